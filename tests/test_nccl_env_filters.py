"""Unit tests of plugins/filter/nccl_env.py (loaded from its path) and bench helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from modload import load_module

ROOT = Path(__file__).resolve().parents[1]


nccl = load_module("nccl_env_filters", ROOT / "plugins/filter/nccl_env.py")
bench = load_module("nccl_allreduce", ROOT / "bench/nccl_allreduce.py")

PCIE = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": 16,
    "NCCL_BUFFSIZE": 16777216,
    "NCCL_NTHREADS": 512,
}
SAFETY = {"NCCL_NVLS_ENABLE": 0, "TORCH_SYMM_MEM_DISABLE_MULTICAST": 1, "NVSHMEM_DISABLE_NVLS": 1}
PROFILES: dict[str, dict[str, Any]] = {"pcie": PCIE, "nvlink": {}, "none": {}}


def errors(env: dict[str, Any]) -> list[str]:
    result: list[str] = nccl.nccl_env_errors(env)
    return result


@pytest.mark.parametrize(
    "env",
    [
        PCIE,
        SAFETY,
        {"NCCL_PROTO": "LL,LL128,Simple"},
        {"NCCL_PROTO": "^LL128"},
        {"NCCL_PROTO": "simple"},
        {"NCCL_ALGO": "Ring,Tree"},
        {"NCCL_ALGO": "^NVLS,NVLSTree"},
        {"NCCL_ALGO": "PAT"},
        {"NCCL_ALGO": "CollnetDirect,CollnetChain"},
        {"NCCL_NTHREADS": 64},
        {"NCCL_NTHREADS": "256"},
        {"NCCL_P2P_LEVEL": "NVL"},
        {"NCCL_P2P_LEVEL": 5},
        {"NCCL_P2P_LEVEL": "0"},
        {"NCCL_MIN_NCHANNELS": 4, "NCCL_MAX_NCHANNELS": 4},
        {"NCCL_NVLS_ENABLE": False},
        {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "^docker,lo", "NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p"},
        {},
    ],
)
def test_valid(env: dict[str, Any]) -> None:
    assert errors(env) == []


@pytest.mark.parametrize(
    ("env", "must"),
    [
        ({"NCCL_PROTO": "LL256"}, ["NCCL_PROTO", "'LL256'", "LL, LL128, Simple"]),
        ({"NCCL_PROTO": "LL,"}, ["NCCL_PROTO"]),
        ({"NCCL_PROTO": "^"}, ["NCCL_PROTO"]),
        ({"NCCL_PROTO": ""}, ["NCCL_PROTO"]),
        ({"NCCL_ALGO": "Ring,Star"}, ["NCCL_ALGO", "'Star'", "Ring, Tree, CollnetDirect"]),
        ({"NCCL_NTHREADS": 0}, ["NCCL_NTHREADS", "'0'", "64..512"]),
        ({"NCCL_NTHREADS": 700}, ["NCCL_NTHREADS", "'700'"]),
        ({"NCCL_NTHREADS": 100}, ["NCCL_NTHREADS", "multiple of 64"]),
        ({"NCCL_NTHREADS": "-64"}, ["NCCL_NTHREADS"]),
        ({"NCCL_MAX_NCHANNELS": 0}, ["NCCL_MAX_NCHANNELS", "positive integer"]),
        ({"NCCL_MIN_NCHANNELS": "two"}, ["NCCL_MIN_NCHANNELS"]),
        ({"NCCL_BUFFSIZE": "16M"}, ["NCCL_BUFFSIZE"]),
        ({"NCCL_MIN_NCHANNELS": 8, "NCCL_MAX_NCHANNELS": 4}, ["NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"]),
        ({"NCCL_P2P_LEVEL": "NVX"}, ["NCCL_P2P_LEVEL", "'NVX'", "LOC, NVL, PIX, PXB, PHB, SYS"]),
        ({"NCCL_P2P_LEVEL": 6}, ["NCCL_P2P_LEVEL", "0-5"]),
        ({"NCCL_NVLS_ENABLE": 2}, ["NCCL_NVLS_ENABLE", "0 or 1"]),
        ({"nccl_proto": "LL"}, ["'nccl_proto'", "^NCCL_[A-Z0-9_]+$"]),
        ({"TORCH_NCCL_BLOCKING_WAIT": 1}, ["TORCH_NCCL_BLOCKING_WAIT", "TORCH_SYMM_MEM_DISABLE_MULTICAST"]),
        ({"LD_PRELOAD": "/x.so"}, ["LD_PRELOAD"]),
        ({"NCCL_DEBUG": "INFO; rm -rf /"}, ["NCCL_DEBUG", "bad characters"]),
        ({"NCCL_DEBUG": "a\nNCCL_PROTO=LL"}, ["NCCL_DEBUG"]),
        ({"NCCL_DEBUG": None}, ["NCCL_DEBUG", "scalar"]),
        ({"NCCL_DEBUG": ["WARN"]}, ["NCCL_DEBUG", "scalar"]),
    ],
)
def test_invalid_names_variable_and_value(env: dict[str, Any], must: list[str]) -> None:
    errs = errors(env)
    assert errs, env
    for text in must:
        assert any(text in e for e in errs), (text, errs)


def test_not_a_dict() -> None:
    assert errors(["NCCL_PROTO=LL"]) != []  # type: ignore[arg-type]


def test_name_filter() -> None:
    f = nccl.FilterModule().filters()["nccl_env_name_errors"]
    assert f(["NCCL_PROTO", "NVSHMEM_DISABLE_NVLS"]) == []
    assert len(f(["proto", "NCCL_X"])) == 1


def build(profile: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = nccl.nccl_env_build(profile, PROFILES, safety=SAFETY, **kw)
    return result


def test_pcie_is_exactly_the_seed() -> None:
    out = build("pcie")
    assert out["profile"] == "pcie"
    assert out["vars"] == {k: str(v) for k, v in PCIE.items()}
    assert list(out["vars"]) == list(PCIE)


@pytest.mark.parametrize(
    ("kw", "profile", "reason"),
    [
        ({"preflight_interconnect": "pcie"}, "pcie", "auto -> pcie: preflight detected PCIe"),
        ({"preflight_interconnect": "nvlink"}, "nvlink", "auto -> nvlink: preflight detected NVLink"),
        ({"interconnect": "pcie", "preflight_interconnect": "nvlink"}, "pcie", "nccl_env_interconnect"),
        ({"detected_interconnect": "nvlink"}, "nvlink", "nvidia-smi topo -m"),
        ({"preflight_interconnect": "none", "detected_interconnect": "nvlink"}, "none", "preflight"),
        ({}, "none", "auto -> none"),
    ],
)
def test_auto_precedence(kw: dict[str, str], profile: str, reason: str) -> None:
    out = build("auto", **kw)
    assert out["profile"] == profile
    assert reason in out["reason"]


def test_safety_on_nvlink_only_by_default() -> None:
    assert build("auto", preflight_interconnect="nvlink")["vars"] == {k: str(v) for k, v in SAFETY.items()}
    assert "NCCL_NVLS_ENABLE" not in build("auto", preflight_interconnect="pcie")["vars"]
    assert "NCCL_NVLS_ENABLE" in build("pcie", preflight_interconnect="nvlink")["vars"]
    assert "NCCL_NVLS_ENABLE" in build("nvlink")["vars"]
    assert "NCCL_NVLS_ENABLE" in build("none", safety_mode="always")["vars"]
    assert build("nvlink", safety_mode="never")["vars"] == {}


def test_extra_overrides_then_unset() -> None:
    out = build(
        "pcie",
        interconnect="nvlink",
        extra={"NCCL_PROTO": "LL,LL128", "NCCL_NVLS_ENABLE": True, "NCCL_DEBUG": "WARN"},
        unset=["NCCL_BUFFSIZE", "NVSHMEM_DISABLE_NVLS", "NCCL_NOT_THERE"],
    )
    v = out["vars"]
    assert v["NCCL_PROTO"] == "LL,LL128"
    assert v["NCCL_NVLS_ENABLE"] == "1"
    assert v["NCCL_DEBUG"] == "WARN"
    assert "NCCL_BUFFSIZE" not in v
    assert "NVSHMEM_DISABLE_NVLS" not in v


TOPO_NVLINK = (
    "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-31\nGPU1\tNV18\t X \t0-31\n\nLegend:\n  NV#  = ...\n"
)
TOPO_PCIE = (
    "\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n\nLegend:\n  NV#  = Connection traversing NVLinks\n"
)
TOPO_ONE = "\tGPU0\tCPU Affinity\nGPU0\t X \t0-15\n\nLegend:\n  NV#  = ...\n"


@pytest.mark.parametrize(
    ("topo", "cls"), [(TOPO_NVLINK, "nvlink"), (TOPO_PCIE, "pcie"), (TOPO_ONE, "none"), ("", "none")]
)
def test_interconnect_from_topo(topo: str, cls: str) -> None:
    assert nccl.interconnect_from_topo(topo) == cls


def test_recorded_topology_is_nvlink() -> None:
    text = (ROOT / "roles/nccl_env/benchmarks/h200x2-topo.txt").read_text()
    assert nccl.interconnect_from_topo(text) == "nvlink"


def test_defaults_pcie_profile_matches_seed() -> None:
    import yaml  # noqa: PLC0415

    defaults = yaml.safe_load((ROOT / "roles/nccl_env/defaults/main.yml").read_text())
    assert defaults["nccl_env_profile_vars"]["pcie"] == PCIE
    assert nccl.nccl_env_errors(defaults["nccl_env_profile_vars"]["nvlink"]) == []
    assert defaults["nccl_env_safety"] == SAFETY


def test_bench_helpers() -> None:
    assert bench.parse_size("8K") == 8192
    assert bench.parse_size("256M") == 256 << 20
    assert bench.parse_size("512KiB") == 512 << 10
    with pytest.raises(ValueError, match="bad size"):
        bench.parse_size("8X")
    assert bench.human(8192) == "8 KiB"
    # 2 ranks: busbw == algbw; 256 MiB in 1 ms -> 268.4 GB/s
    assert bench.bus_bandwidth_gbps(256 << 20, 1000.0, 2) == pytest.approx(268.435456)
    assert bench.bus_bandwidth_gbps(256 << 20, 1000.0, 8) == pytest.approx(268.435456 * 1.75)


def test_bench_compare_table_on_recorded_runs(capsys: pytest.CaptureFixture[str]) -> None:
    recorded = ROOT / "roles/nccl_env/benchmarks/h200x2-call2-eager-graph.jsonl"
    assert bench.main(["--compare", str(recorded)]) == 0
    out = capsys.readouterr().out
    for text in ("| default |", "| pcie |", "CUDA-graph replay"):
        assert text in out
