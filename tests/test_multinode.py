"""Pure tests of plugins/module_utils/multinode.py (multi-node tensor parallel) and of its section of the
launch spec: the replica plan (ranks in inventory order, the head, --dist-init-addr), the argv of each
node, byte-identical argv for a one-node replica, and preflight's cross-node rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from modload import load_module
from test_launch_spec import cfg

REPO = Path(__file__).resolve().parents[1]
M = load_module("multinode", REPO / "plugins" / "module_utils" / "multinode.py")
L = load_module("launch_spec_mn", REPO / "plugins" / "module_utils" / "launch_spec.py")

SERVERS = ["gpu-a1", "gpu-a2", "gpu-b1", "solo"]
REPLICAS = {"gpu-a1": "a", "gpu-a2": "a", "gpu-b1": None, "solo": ""}
ADDRESSES = {"gpu-a1": "10.0.0.11", "gpu-a2": "10.0.0.12", "gpu-b1": None, "solo": "10.0.0.30"}


def mn(host: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "host": host,
        "servers": SERVERS,
        "replicas": REPLICAS,
        "addresses": ADDRESSES,
        "port": 20000,
    }
    base.update(over)
    return base


def plan(host: str, **over: Any) -> dict[str, Any]:
    result = M.plan(mn(host, **over))
    assert result["errors"] == []
    return dict(result["plan"])


def test_ranks_follow_inventory_order_and_rank0_is_the_head() -> None:
    head, second = plan("gpu-a1"), plan("gpu-a2")
    for p in (head, second):
        assert p["replica"] == "a"
        assert p["hosts"] == ["gpu-a1", "gpu-a2"]
        assert p["head"] == "gpu-a1"
        assert p["nnodes"] == 2
        assert p["dist_init_addr"] == "10.0.0.11:20000"
    assert (head["rank"], head["serves_http"]) == (0, True)
    assert (second["rank"], second["serves_http"]) == (1, False)
    # reordering the inventory reorders the ranks
    swapped = plan("gpu-a2", servers=["gpu-a2", "gpu-a1", "gpu-b1", "solo"])
    assert (swapped["rank"], swapped["head"], swapped["dist_init_addr"]) == (0, "gpu-a2", "10.0.0.12:20000")


def test_default_replica_is_the_host_itself() -> None:
    for host in ("gpu-b1", "solo"):  # sglang_replica null / "" (unset): one host = one replica
        p = plan(host)
        assert (p["replica"], p["hosts"], p["nnodes"], p["rank"]) == (host, [host], 1, 0)
        assert p["dist_init_addr"] is None
        assert p["serves_http"] is True
    # a host outside sglang_servers (a role run on its own) is its own replica
    assert plan("lab", servers=[])["hosts"] == ["lab"]


def test_node_addresses_for_the_units_ip_allow_list() -> None:
    assert plan("gpu-a2")["addresses"] == ["10.0.0.11", "10.0.0.12"]
    assert plan("solo")["addresses"] == []
    assert M.check_ip_allow(plan("gpu-a2"), None) == []
    named = plan("gpu-a2", addresses={"gpu-a1": "10.0.0.11", "gpu-a2": "gpu-a2.example"})
    [error] = M.check_ip_allow(named, None)
    assert "sglang_replica_address is a host name on node(s) of replica a (gpu-a2: gpu-a2.example)" in error
    assert M.check_ip_allow(named, ["10.0.0.0/24"]) == []  # sglang_service_ip_address_allow set by hand
    assert M.check_ip_allow(plan("solo"), None) == []


def test_ipv6_and_name_addresses() -> None:
    v6 = plan("gpu-a2", addresses={"gpu-a1": "fd00::11"})
    assert v6["dist_init_addr"] == "[fd00::11]:20000"  # SGLang 0.5.9 parses [v6]:port
    named = plan("gpu-a2", addresses={}, port="21000")
    assert named["dist_init_addr"] == "gpu-a1:21000"  # no address: the inventory name


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"replicas": {**REPLICAS, "gpu-a2": "a b"}}, "sglang_replica='a b' (host gpu-a2) is not valid"),
        ({"replicas": {**REPLICAS, "gpu-a2": "a\n"}}, "sglang_replica='a\\n' (host gpu-a2)"),
        ({"port": 80}, "sglang_dist_init_port=80 (host gpu-a2) is not valid: allowed an integer 1024-65535"),
        ({"port": True}, "sglang_dist_init_port=true"),
        ({"port": "21000x"}, "sglang_dist_init_port='21000x' (host gpu-a2) is not valid"),
        ({"port": 70000}, "sglang_dist_init_port=70000 (host gpu-a2) is not valid"),
        (
            {"addresses": {"gpu-a1": "10.0.0.11:99"}},
            "sglang_replica_address='10.0.0.11:99' (host gpu-a1, rank 0",
        ),
    ],
)
def test_bad_multinode_inputs(over: dict[str, Any], needle: str) -> None:
    errors = M.plan(mn("gpu-a2", **over))["errors"]
    assert any(needle in e for e in errors), errors


def spec_of(host: str, **over: Any) -> dict[str, Any]:
    result = L.resolve(cfg(tp_size=4, multinode=mn(host), **over))
    assert result["errors"] == [], result["errors"]
    return dict(result["spec"])


def test_argv_of_each_node() -> None:
    head, second = spec_of("gpu-a1"), spec_of("gpu-a2")
    single = L.resolve(cfg(tp_size=4))["spec"]
    for rank, spec in enumerate((head, second)):
        args = spec["server_args"]
        at = args.index("--tp-size")
        assert args[at : at + 8] == [
            "--tp-size", "4", "--nnodes", "2", "--node-rank", str(rank),
            "--dist-init-addr", "10.0.0.11:20000",
        ]  # fmt: skip
        # everything else is the single-node argv, --host/--port included (rank > 0: SGLang's dummy
        # health server binds there), --config last
        assert args[: at + 2] + args[at + 8 :] == single["server_args"]
        assert args[-2:] == ["--config", L.CONFIG_ARG]
        assert spec["argv"] == spec["launcher"] + args
        assert f"--node-rank {rank}" in spec["command"]
        assert spec["multinode"]["rank"] == rank
        assert spec["multinode"]["serves_http"] is (rank == 0)
    assert {f["flag"] for f in head["flags"]} >= {"--nnodes", "--node-rank", "--dist-init-addr"}
    assert all(f["reason"] != "operator-supplied (sglang_extra_args)" for f in head["flags"])


@pytest.mark.parametrize("preset", ["production", "baseline", "tree"])
@pytest.mark.parametrize("host", ["gpu-b1", "solo"])
def test_single_node_replica_argv_is_byte_identical(preset: str, host: str) -> None:
    over: dict[str, Any] = {"preset": preset}
    before = L.resolve(cfg(**over))["spec"]  # the inputs without any multi-node section
    after = L.resolve(cfg(multinode=mn(host), **over))["spec"]
    assert after["argv"] == before["argv"]
    assert after["command"].encode() == before["command"].encode()
    assert {k: v for k, v in after.items() if k != "multinode"} == {
        k: v for k, v in before.items() if k != "multinode"
    }
    assert after["multinode"]["nnodes"] == 1


def test_launch_spec_refuses_tp_not_divisible_and_port_clash() -> None:
    errors = L.resolve(cfg(tp_size=3, multinode=mn("gpu-a1")))["errors"]
    assert any("sglang_tp_size=3 does not fit replica a of 2 nodes" in e for e in errors), errors
    errors = L.resolve(cfg(tp_size=4, multinode=mn("gpu-a1", port=30000)))["errors"]
    assert any("sglang_dist_init_port=30000" in e and "sglang_service_port=30000" in e for e in errors), (
        errors
    )


def test_extra_args_may_not_set_the_multinode_flags() -> None:
    for word in ("--nnodes", "--node-rank=1", "--dist-init-addr", "--nccl-init-addr", "--node-r"):
        errors = L.resolve(cfg(extra_args=[word, "1"]))["errors"]
        assert any("sglang_extra_args" in e for e in errors), (word, errors)


H200 = {"count": 2, "names": ["NVIDIA H200", "NVIDIA H200"]}


@pytest.mark.parametrize(
    ("nodes", "tp", "equal", "needle"),
    [
        ({"gpu-a1": H200, "gpu-a2": H200}, 4, True, None),
        ({"gpu-a1": H200, "gpu-a2": H200}, 2, False, None),  # 1 GPU per node of 2: a divisor
        ({"gpu-a1": {"count": 0, "names": []}, "gpu-a2": {"count": 0, "names": []}}, 8, True, None),  # lab
        (
            {"gpu-a1": H200, "gpu-a2": {"count": 1, "names": ["NVIDIA H200"]}},
            4,
            True,
            "GPU count differs between the nodes of sglang_replica='a' (gpu-a1: 2, gpu-a2: 1)",
        ),
        (
            {"gpu-a1": H200, "gpu-a2": {"count": 2, "names": ["NVIDIA H100", "NVIDIA H100"]}},
            4,
            True,
            "GPU model differs between the nodes of sglang_replica='a' (gpu-a1: NVIDIA H200, "
            "gpu-a2: NVIDIA H100)",
        ),
        (
            {"gpu-a1": H200, "gpu-a2": H200},
            2,
            True,
            "sglang_tp_size=2 does not fit replica a of 2 nodes x 2 GPU(s)",
        ),
        ({"gpu-a1": H200, "gpu-a2": H200}, 8, False, "allowed 2, 4"),
        ({"gpu-a1": H200, "gpu-a2": H200}, 3, True, "allowed a multiple of 2"),
        ({"gpu-a1": H200, "gpu-a2": None}, 4, True, "host(s) gpu-a2 of the replica are not in this run"),
    ],
)
def test_check_nodes(nodes: dict[str, Any], tp: int, equal: bool, needle: str | None) -> None:
    errors = M.check_nodes(plan("gpu-a1"), nodes, tp, equal)
    if needle is None:
        assert errors == []
    else:
        assert any(needle in e for e in errors), errors
    assert M.check_nodes(plan("solo"), {}, 3, True) == []  # one node: preflight's per-host rule


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}, None),
        ({"NCCL_SOCKET_IFNAME": "eth0"}, "GLOO_SOCKET_IFNAME is not set (host gpu-a2"),
        (
            {"NCCL_SOCKET_IFNAME": "^lo", "GLOO_SOCKET_IFNAME": "eth0"},
            "NCCL_SOCKET_IFNAME='^lo' (host gpu-a2)",
        ),
        (
            {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0,eth1"},
            "GLOO_SOCKET_IFNAME='eth0,eth1'",
        ),
        ({"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "a-very-long-ifname0"}, "not valid"),
    ],
)
def test_check_ifnames(env: dict[str, Any], needle: str | None) -> None:
    errors = M.check_ifnames(plan("gpu-a2"), env, "gpu-a2")
    if needle is None:
        assert errors == []
    else:
        assert any(needle in e for e in errors), errors
    assert M.check_ifnames(plan("solo"), {}, "solo") == []  # one node: nothing required


TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:7530 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1
"""
TCP6 = """  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:7531 00000000000000000000000000000000:0000 0A 0
"""


def test_listening_reads_proc_net_tcp() -> None:
    assert M.listening([TCP], 20000) is True  # 0x4E20 in LISTEN (0A)
    assert M.listening([TCP], 30000) is False  # 0x7530 is an established connection, not a listener
    assert M.listening([TCP, TCP6], 30001) is True
    assert M.listening(["header only\n"], 20000) is False


def test_filter_plugin_exports_the_one_plan() -> None:
    F = load_module("multinode_filter", REPO / "plugins" / "filter" / "multinode.py")
    filters = F.FilterModule().filters()
    assert filters["multinode_plan"] is M.plan or filters["multinode_plan"].__name__ == "plan"
    for name in filters:
        assert (REPO / "plugins" / "filter" / f"{name}.yml").is_file(), name


def test_check_host_reads_the_probe_of_the_node() -> None:
    mn_mod = M
    plan = {"nnodes": 2, "replica": "r1", "rank": 0, "dist_init_port": 29500}
    env = {"NCCL_SOCKET_IFNAME": "eth9", "GLOO_SOCKET_IFNAME": "eth0"}
    net = {"ifaces": ["lo", "eth0"], "port_listening": False, "unit_active": ""}
    (error,) = mn_mod.check_host(plan, env, "h0", net, "sglang-kimi")
    assert error == (
        'NCCL_SOCKET_IFNAME="eth9" names no network interface of host h0 (replica r1, rank 0): allowed one'
        " interface that exists on every node of the replica; this host has eth0, lo"
    )
    env = {
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "^lo",
    }  # refused by check_ifnames: not looked up
    assert mn_mod.check_host(plan, env, "h0", net, "sglang-kimi") == []
    taken = {**net, "port_listening": True, "unit_active": "inactive"}
    (error,) = mn_mod.check_host(
        plan, {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}, "h0", taken, "u"
    )
    assert error.startswith("sglang_dist_init_port=29500 is taken on host h0 (rank 0 of replica r1: a socket")
    # the service that holds it, or another rank, or one node: nothing to say
    assert mn_mod.check_host(plan, {}, "h0", {**taken, "unit_active": "active"}, "u") == []
    assert mn_mod.check_host({**plan, "rank": 1}, {}, "h1", taken, "u") == []
    assert mn_mod.check_host({**plan, "nnodes": 1}, env, "h0", None, "u") == []
