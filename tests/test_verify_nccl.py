"""Unit tests of the one NCCL all-reduce implementation (roles/verify/files/nccl_allreduce.py) and
of its wrapper bench/nccl_allreduce.py: statistics (median/spread, slowest rank), env-file
parsing, floors, the verify layer's JSON document; the multi-node layout (world size, global ranks,
the rank-0 rendezvous) and, heavy (a real torch), two "nodes" of one replica meeting over TCP with the
gloo backend on the CPU."""

from __future__ import annotations

import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from modload import load_module

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ("patches_fixtures",)  # sglang_venv_python: a real torch (CPU) for the gloo run


impl = load_module("verify_nccl_allreduce", ROOT / "roles/verify/files/nccl_allreduce.py")
bench = load_module("bench_nccl_allreduce", ROOT / "bench/nccl_allreduce.py")

NO_FLOORS: dict[str, float | None] = {"latency_us_8k": None, "latency_us_512k": None, "busbw_gbps_256m": None}


def test_bench_is_a_wrapper_of_the_one_implementation() -> None:
    assert bench.IMPL == ROOT / "roles/verify/files/nccl_allreduce.py"
    source = (ROOT / "bench/nccl_allreduce.py").read_text()
    assert "def _worker" not in source
    assert "def bus_bandwidth_gbps" not in source
    assert bench.bus_bandwidth_gbps(256 << 20, 1000.0, 2) == pytest.approx(268.435456)
    assert bench.parse_size("512K") == 512 << 10


def test_summarize_median_and_spread() -> None:
    s = impl.summarize([16.85, 15.67, 16.61, 15.7, 15.0])
    assert s["median"] == 15.7
    assert (s["min"], s["max"], s["reps"]) == (15.0, 16.85, 5)
    assert s["spread_pct"] == pytest.approx((16.85 - 15.0) / 15.7 * 100, abs=0.05)
    assert impl.summarize([4.0, 1.0, 3.0, 2.0])["median"] == 2.5
    with pytest.raises(ValueError, match="no samples"):
        impl.summarize([])


def test_slowest_rank_per_repetition() -> None:
    assert impl.slowest_per_rep([[1.0, 5.0, 3.0], [2.0, 4.0, 3.5]]) == [2.0, 5.0, 3.5]
    with pytest.raises(ValueError, match="same number"):
        impl.slowest_per_rep([[1.0], [1.0, 2.0]])


def test_env_file_parsed_not_executed() -> None:
    text = (ROOT / "roles/nccl_env/molecule/nccl_env/golden/converge.env").read_text()
    assert impl.parse_env_file(text) == {
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
    }
    assert impl.parse_env_file("export A=1\nB='x y'\nC=\"$(rm -rf /)\"\n\n# c\n") == {
        "A": "1",
        "B": "x y",
        "C": "$(rm -rf /)",
    }
    with pytest.raises(ValueError, match="line 2: not KEY=VALUE"):
        impl.parse_env_file("A=1\nrm -rf /\n")


def test_force_env() -> None:
    assert impl.parse_force_env(["NCCL_NVLS_ENABLE=0", "X="]) == {"NCCL_NVLS_ENABLE": "0", "X": ""}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        impl.parse_force_env(["1BAD=0"])


def test_apply_env_forces_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "nccl.env"
    env.write_text("NCCL_NVLS_ENABLE=1\nNCCL_PROTO=LL\n")
    monkeypatch.delenv("NCCL_PROTO", raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "x")
    loaded = impl.apply_env(str(env), {"NCCL_NVLS_ENABLE": "0"})
    assert loaded == {"NCCL_NVLS_ENABLE": "1", "NCCL_PROTO": "LL"}
    assert impl.nccl_env()["NCCL_NVLS_ENABLE"] == "0"
    assert impl.nccl_env()["NCCL_PROTO"] == "LL"


@pytest.mark.parametrize(
    ("floors", "status", "needle"),
    [
        (NO_FLOORS, "passed", None),
        ({**NO_FLOORS, "latency_us_8k": 20.0, "busbw_gbps_256m": 250.0}, "passed", None),
        ({**NO_FLOORS, "latency_us_8k": 10.0}, "failed", "8 KiB graph latency 15.7 us > allowed max 10 us"),
        (
            {**NO_FLOORS, "latency_us_512k": 18.0},
            "failed",
            "512 KiB graph latency 18.9 us > allowed max 18 us",
        ),
        (
            {**NO_FLOORS, "busbw_gbps_256m": 400.0},
            "failed",
            "256 MiB busbw 300.9 GB/s < required min 400 GB/s",
        ),
    ],
)
def test_floors(floors: dict[str, float | None], status: str, needle: str | None) -> None:
    figures = {"latency_us_8k": 15.7, "latency_us_512k": 18.88, "busbw_gbps_256m": 300.92}
    got, reasons = impl.evaluate_floors(figures, floors)
    assert got == status
    assert reasons == ([needle] if needle else [])


def test_floor_on_a_missing_figure_fails() -> None:
    status, reasons = impl.evaluate_floors({"latency_us_8k": None}, {**NO_FLOORS, "latency_us_8k": 30.0})
    assert status == "failed"
    assert reasons == ["8 KiB graph latency not measured (floor 30.0 us)"]


def _row(nbytes: int, graph_median: float) -> dict[str, Any]:
    return {"bytes": nbytes, "graph_stats": impl.summarize([graph_median] * 5)}


def test_verify_summary_document() -> None:
    rows = [_row(8 << 10, 15.7), _row(512 << 10, 18.88), _row(256 << 20, 892.04)]
    doc = impl.verify_summary(rows, NO_FLOORS, True, 2)
    assert doc["status"] == "passed"
    assert (doc["latency_us_8k"], doc["latency_us_512k"]) == (15.7, 18.88)
    assert doc["busbw_gbps_256m"] == pytest.approx(300.92, abs=0.01)
    assert doc["reason"].startswith("2 ranks: 8 KiB 15.7 us, 512 KiB 18.88 us (graph replay), 256 MiB busbw")
    bad = impl.verify_summary(rows, NO_FLOORS, False, 2)
    assert (bad["status"], bad["reason"]) == ("failed", "all-reduce returned a wrong sum")


def test_verify_mode_never_raises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert impl.main(["--verify", "--env-file", str(tmp_path / "missing.env")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "failed"
    assert doc["reason"].startswith("all-reduce benchmark did not run: FileNotFoundError")
    env = tmp_path / "nccl.env"
    env.write_text("")
    impl.main(["--verify", "--reps", "3", "--env-file", str(env)])
    assert "at least 5 repetitions" in json.loads(capsys.readouterr().out)["reason"]


def test_recorded_device_figures() -> None:
    doc = json.loads((ROOT / "bench/results/2026-11-30-h200x2-verify-layers.json").read_text())
    nccl = doc["results"]["nccl"]
    assert nccl["status"] == "passed"
    sizes = {r["bytes"]: r for r in nccl["sizes"]}
    assert set(sizes) == {8 << 10, 512 << 10, 256 << 20}
    for row in sizes.values():
        assert row["graph_stats"]["reps"] >= 5
        assert row["graph_stats"]["median"] == impl.summarize(row["graph_stats"]["samples"])["median"]
    assert nccl["latency_us_8k"] == sizes[8 << 10]["graph_stats"]["median"]


def test_world_layout_and_rendezvous() -> None:
    assert impl.world_layout(2, 1, 0) == (2, 0)
    assert impl.world_layout(2, 2, 1) == (4, 2)  # node 1's local ranks are global ranks 2, 3
    assert impl.world_layout(8, 3, 2) == (24, 16)
    for bad in ((2, 2, 2), (2, 2, -1), (0, 1, 0)):
        with pytest.raises(ValueError, match="node-rank"):
            impl.world_layout(*bad)
    args = impl.build_parser().parse_args(["--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.11"])
    args.master_port = 20001
    assert impl.init_method(args, 0) == "tcp://10.0.0.11:20001"
    args.master_addr = "fd00::11"
    assert impl.init_method(args, 0) == "tcp://[fd00::11]:20001"
    single = impl.build_parser().parse_args([])
    assert impl.init_method(single, 4242) == "tcp://127.0.0.1:4242"  # one node: its own loopback


def test_multinode_verify_needs_the_master_port(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    env = tmp_path / "nccl.env"
    env.write_text("")
    impl.main(["--verify", "--env-file", str(env), "--nnodes", "2", "--node-rank", "1"])
    assert "--master-port 0" in json.loads(capsys.readouterr().out)["reason"]
    impl.main(["--verify", "--env-file", str(env), "--nnodes", "2", "--node-rank", "2", "--master-port", "1"])
    assert "need 0 <= node-rank < nnodes" in json.loads(capsys.readouterr().out)["reason"]


def test_two_nodes_meet_with_gloo(sglang_venv_python: Path, tmp_path: Path) -> None:
    """The verify layer's multi-node path for real (torch.distributed, gloo on the CPU: no GPU here):
    two separate process trees ("nodes" 0 and 1, 2 local ranks each) started at the same time meet at
    node 0's port; each node's document reports the 4-rank world and a correct sum."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env_file = tmp_path / "nccl.env"
    env_file.write_text("NCCL_DEBUG=WARN\n")

    def node(rank: int) -> subprocess.CompletedProcess[str]:
        argv = [
            str(sglang_venv_python), str(ROOT / "roles/verify/files/nccl_allreduce.py"), "--verify",
            "--backend", "gloo", "--ranks", "2", "--nnodes", "2", "--node-rank", str(rank),
            "--master-addr", "127.0.0.1", "--master-port", str(port), "--init-timeout-s", "120",
            "--sizes", "8K,512K", "--warmup", "2", "--iters", "5", "--reps", "5", "--env-file", str(env_file),
        ]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)

    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(node, (0, 1)))
    for rank, proc in enumerate(procs):
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
        assert doc["status"] == "passed", doc
        assert (doc["ranks"], doc["nnodes"], doc["node_rank"], doc["backend"]) == (4, 2, rank, "gloo")
        assert doc["env_file_vars"] == {"NCCL_DEBUG": "WARN"}
        assert [r["bytes"] for r in doc["sizes"]] == [8 << 10, 512 << 10]
        assert all(r["eager_stats"]["reps"] == 5 for r in doc["sizes"])


def _layer_args(spec: dict[str, Any]) -> list[str]:
    """The argv layer 4's entry of the layers task (roles/verify/tasks/main.yml) renders for a host with
    this launch spec (its own template text, rendered by Jinja with Ansible's `quote`), parsed as the
    script parses it."""
    import shlex  # noqa: PLC0415

    import jinja2  # noqa: PLC0415
    import yaml  # noqa: PLC0415

    tasks = yaml.safe_load((ROOT / "roles/verify/tasks/main.yml").read_text())
    [task] = [t for t in tasks if t["name"].startswith("Layers 1-4")]
    [layer] = [x for x in task["vars"]["__layers"] if x["key"] == "nccl"]
    assert layer["script"] == "nccl_allreduce.py"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["quote"] = lambda v: shlex.quote(str(v))
    variables: dict[str, Any] = {
        "preflight_launch_spec": {"tp_per_node": 2, **spec},
        "verify_nccl_reps": 5,
        "verify_nccl_iters": 100,
        "verify_nccl_env_file": "/etc/sglang/nccl.env",
        "verify_nccl_env_force": {"NCCL_NVLS_ENABLE": 0},
    }
    # what the task's vars line resolves to: preflight_launch_spec.multinode | default({'nnodes': 1})
    assert "preflight_launch_spec.multinode" in task["vars"]["__mn"]
    variables["__mn"] = spec.get("multinode", {"nnodes": 1})
    variables["__floors"] = [["--max-latency-us-8k", None]]
    return shlex.split(env.from_string(layer["args"]).render(variables))


def test_layer_args_of_each_node() -> None:
    plan = {
        "replica": "a", "nnodes": 2, "hosts": ["gpu-a1", "gpu-a2"], "head": "gpu-a1",
        "head_address": "10.0.0.11", "dist_init_port": 20000, "dist_init_addr": "10.0.0.11:20000",
    }  # fmt: skip
    env = {"NCCL_SOCKET_IFNAME": "ens5", "GLOO_SOCKET_IFNAME": "ens5", "OTHER": "x"}
    for rank in (0, 1):
        spec = {"environment": env, "multinode": {**plan, "rank": rank, "serves_http": rank == 0}}
        args = impl.build_parser().parse_args(_layer_args(spec))
        assert (args.nnodes, args.node_rank, args.master_addr, args.master_port) == (
            2,
            rank,
            "10.0.0.11",
            20010,
        )
        assert args.ranks == 2  # this node's GPUs; the world is 2 x 2
        assert args.force_env == ["NCCL_SOCKET_IFNAME=ens5", "GLOO_SOCKET_IFNAME=ens5", "NCCL_NVLS_ENABLE=0"]
        assert args.verify
    single = impl.build_parser().parse_args(
        _layer_args({"environment": env, "multinode": {"nnodes": 1, "rank": 0, "serves_http": True}})
    )
    assert (single.nnodes, single.node_rank, single.master_port) == (1, 0, 0)  # a one-node replica: as before
    assert single.force_env == ["NCCL_NVLS_ENABLE=0"]
