"""Multi-node tensor parallel: a replica of several server hosts, each host's rank, SGLang's flags.

Pure Python (no Ansible import). ONE place computes "the hosts of this replica", "its rank-0 host"
and the multi-node flags: :func:`plan` (called by the launch spec, plugins/module_utils/launch_spec.py,
and exposed as the filter ``sglang.deploy.multinode_plan``). :func:`check_nodes` is preflight's
cross-node check (same GPU count and model on every node, tp = nodes x GPUs per node, the socket
interface variables naming one concrete interface), on the GPU facts preflight gathered on each host.

The rules (docs/multinode.md):

- ``sglang_replica`` (host variable, default ``inventory_hostname``) names the replica a host of
  ``sglang_servers`` belongs to. The replica's hosts, in the inventory order of ``sglang_servers``, are
  ranks 0..n-1; rank 0 (the head) serves HTTP and is the replica's worker in the router.
- With n > 1 nodes the server flags gain ``--nnodes n --node-rank r --dist-init-addr A:P`` (right after
  ``--tp-size``): A = the head's ``sglang_replica_address`` (default ``ansible_host``), P =
  ``sglang_dist_init_port`` (default 20000); an IPv6 address is written ``[addr]:port``, the form SGLang
  0.5.9 parses (server_args.py PortArgs.init_new; model_runner.py: ``tcp://<dist_init_addr>``). A
  single-node replica gets no flag at all: its argv is exactly the single-host argv.
- SGLang 0.5.9 requires tp_size divisible by nnodes (server_args.py check_server_args); this collection
  requires tp / nnodes GPUs per node to equal each node's GPU count (``sglang_tp_size_must_equal_gpu_count:
  true``, the default) or to divide it (false): the single-host rule, per node.
- SGLang 0.5.9 with node_rank >= 1 runs the scheduler processes only (entrypoints/engine.py
  ``_launch_subprocesses``: no tokenizer, no detokenizer, no API) and, once they are ready, a dummy
  health server on --host/--port answering 200 on /health, /health_generate and /ping
  (utils/common.py ``launch_dummy_health_check_server``). So every node keeps --host/--port, and only
  rank 0 is a serving endpoint (``serves_http``).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import PORT_ALLOWED, as_port, valid_host
from ansible_collections.sglang.deploy.plugins.module_utils.convert import show as _show

REPLICA_VAR = "sglang_replica"
ADDRESS_VAR = "sglang_replica_address"
PORT_VAR = "sglang_dist_init_port"
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
_REPLICA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+=:-]{0,127}")
_REPLICA_CHARS = "1-128 characters of A-Z a-z 0-9 _ . @ + = : - (starting with a letter or digit)"
# A Linux interface name (IFNAMSIZ 16 incl. NUL): no "/", whitespace, ":" aliases are fine for NCCL
# but not a device; "^" (exclusion) and "," (list) are refused: Gloo takes one device name only.
_IFNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}")

FLAG_REASONS = {
    "--nnodes": "multi-node tensor parallel: the number of hosts of this replica",
    "--node-rank": "this host's rank in its replica (inventory order of sglang_servers; rank 0 serves HTTP)",
    "--dist-init-addr": "the replica's rank-0 host and sglang_dist_init_port: where torch.distributed meets",
}
# SGLang 0.5.9's other option string of --dist-init-addr (server_args.py).
FLAG_ALIASES = {"--nccl-init-addr": "--dist-init-addr"}


def address_port(address: str, port: int) -> str:
    """host:port as SGLang's --dist-init-addr wants it ([v6]:port for an IPv6 address)."""
    try:
        is_v6 = ipaddress.ip_address(address).version == 6
    except ValueError:
        is_v6 = False
    return f"[{address}]:{port}" if is_v6 else f"{address}:{port}"


def single(host: str | None = None) -> dict[str, Any]:
    """The plan of a one-host replica (also when the inputs carry no multi-node section)."""
    return {
        "replica": host,
        "rank": 0,
        "nnodes": 1,
        "hosts": [host] if host else [],
        "head": host,
        "head_address": None,
        "dist_init_port": None,
        "dist_init_addr": None,
        "addresses": [],
        "serves_http": True,
    }


def replica_name(host: str, value: Any) -> Any:
    """A host's replica: its ``sglang_replica``, or its own name when that is unset or empty."""
    return host if value is None or value == "" else value


def replica_groups(servers: Sequence[str], replicas: Mapping[str, Any]) -> dict[str, list[str]]:
    """{replica: [its hosts in the order of ``servers``]} (rank 0 first): the one grouping rule the
    launch spec (plan) and the rolling upgrade's plays (filter sglang.deploy.roll_replicas) share."""
    out: dict[str, list[str]] = {}
    for server in servers:
        out.setdefault(str(replica_name(server, replicas.get(server))), []).append(str(server))
    return out


def plan(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``{"plan": {...}, "errors": [...]}`` for one host.

    cfg: ``host`` (inventory_hostname), ``servers`` (groups.sglang_servers, inventory order),
    ``replicas`` ({server: its sglang_replica}), ``addresses`` ({server: its sglang_replica_address}),
    ``port`` (sglang_dist_init_port). Every error names the variable, the host, the value and what is
    allowed.
    """
    errors: list[str] = []
    host = cfg.get("host")
    servers = [str(s) for s in cfg.get("servers") or []]
    replicas: Mapping[str, Any] = cfg.get("replicas") or {}
    addresses: Mapping[str, Any] = cfg.get("addresses") or {}
    if not isinstance(host, str) or not host:
        return {"plan": single(None), "errors": ["multinode: no host name given (inventory_hostname)"]}
    names: dict[str, str] = {}
    for server in [*servers, *([] if host in servers else [host])]:
        value = replica_name(server, replicas.get(server))
        if not isinstance(value, str) or not _REPLICA.fullmatch(value):
            errors.append(
                f"{REPLICA_VAR}={_show(value)} (host {server}) is not valid: allowed {_REPLICA_CHARS}; "
                "default inventory_hostname (one host = one replica)"
            )
            value = server
        names[server] = value
    replica = names[host]
    hosts = [s for s in servers if names[s] == replica] if host in servers else [host]
    port = as_port(cfg.get("port"))
    if port is None:
        errors.append(
            f"{PORT_VAR}={_show(cfg.get('port'))} (host {host}) is not valid: allowed {PORT_ALLOWED}"
            " (the rank-0 host's port where torch.distributed meets)"
        )
        port = None
    if len(hosts) == 1:
        return {"plan": {**single(host), "replica": replica}, "errors": errors}
    head = hosts[0]
    head_address = addresses.get(head) or head
    if not valid_host(head_address):
        errors.append(
            f"{ADDRESS_VAR}={_show(head_address)} (host {head}, rank 0 of replica {replica}) is not valid: "
            "allowed an IPv4/IPv6 address or an RFC 1123 host name the other nodes reach it by "
            "(default ansible_host)"
        )
    out = {
        "replica": replica,
        "rank": hosts.index(host),
        "nnodes": len(hosts),
        "hosts": hosts,
        "head": head,
        "head_address": head_address,
        "dist_init_port": port,
        "dist_init_addr": address_port(str(head_address), port) if port and not errors else None,
        # every node's address, in rank order: the unit's IPAddressAllow= lets the others in
        "addresses": [addresses.get(h) or h for h in hosts],
        "serves_http": hosts.index(host) == 0,
    }
    return {"plan": out, "errors": errors}


def server_args(mn: Mapping[str, Any]) -> list[str]:
    """The multi-node flags of a plan: none for a one-host replica."""
    if int(mn.get("nnodes") or 1) <= 1:
        return []
    return [
        "--nnodes", str(mn["nnodes"]),
        "--node-rank", str(mn["rank"]),
        "--dist-init-addr", str(mn["dist_init_addr"]),
    ]  # fmt: skip


def with_flags(args: Sequence[str], mn: Mapping[str, Any]) -> list[str]:
    """The server args with the multi-node flags right after ``--tp-size N`` (unchanged for one node)."""
    flags = server_args(mn)
    out = list(args)
    if not flags:
        return out
    at = out.index("--tp-size") + 2 if "--tp-size" in out else len(out)
    return out[:at] + flags + out[at:]


def check_tp(mn: Mapping[str, Any], tp: Any) -> list[str]:
    """SGLang's rule: tp_size divisible by nnodes."""
    nnodes = int(mn.get("nnodes") or 1)
    if nnodes <= 1 or not isinstance(tp, int) or tp % nnodes == 0:
        return []
    return [
        f"sglang_tp_size={tp} does not fit replica {mn.get('replica')} of {nnodes} nodes "
        f"({', '.join(mn.get('hosts') or [])}): allowed a multiple of {nnodes} (SGLang splits tp evenly "
        "across the nodes: tp = nodes x GPUs per node)"
    ]


def check_ports(mn: Mapping[str, Any], service_port: Any) -> list[str]:
    """The dist-init port is not the HTTP port (both bind on rank 0)."""
    if int(mn.get("nnodes") or 1) <= 1 or mn.get("dist_init_port") is None:
        return []
    if mn["dist_init_port"] != service_port:
        return []
    return [
        f"{PORT_VAR}={mn['dist_init_port']} (host {mn.get('head')}, rank 0 of replica "
        f"{mn.get('replica')}) is not valid: allowed a port other than "
        f"sglang_service_port={service_port} (both bind on rank 0)"
    ]


def check_ip_allow(mn: Mapping[str, Any], ip_allow: Any) -> list[str]:
    """The unit denies every address but those allowed (IPAddressDeny=any): the nodes of a replica
    reach each other only when their addresses are IP literals it can list (systemd takes no names),
    unless sglang_service_ip_address_allow is set by hand."""
    if int(mn.get("nnodes") or 1) <= 1 or ip_allow is not None:
        return []
    names = [
        f"{h}: {a}"
        for h, a in zip(mn.get("hosts") or [], mn.get("addresses") or [], strict=False)
        if not _is_ip(a)
    ]
    if not names:
        return []
    return [
        f"{ADDRESS_VAR} is a host name on node(s) of replica {mn.get('replica')} ({', '.join(names)}): "
        "allowed an IP address on every node (the unit's IPAddressAllow= lets the other nodes in and takes "
        "no names), or sglang_service_ip_address_allow listing the nodes' networks"
    ]


def _is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def socket_ifnames(env: Mapping[str, Any]) -> dict[str, Any]:
    """NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME of the merged server environment (None when unset)."""
    return {name: env.get(name) for name in IFNAME_VARS}


def check_ifnames(mn: Mapping[str, Any], env: Mapping[str, Any], host: str) -> list[str]:
    """Both socket interface variables set, each one concrete interface name (the existence of the
    interface on each node is checked on the node, /sys/class/net/<name>)."""
    if int(mn.get("nnodes") or 1) <= 1:
        return []
    errors = []
    for name, value in socket_ifnames(env).items():
        if value is None or (isinstance(value, str) and not value.strip()):
            errors.append(
                f"{name} is not set (host {host}, replica {mn.get('replica')} of {mn.get('nnodes')} nodes): "
                "allowed one concrete network interface that exists on every node of the replica, e.g. "
                f"eth0, in sglang_launch_environment (or nccl_env_extra for {IFNAME_VARS[0]})"
            )
        elif not isinstance(value, str) or not _IFNAME.fullmatch(value):
            errors.append(
                f"{name}={_show(value)} (host {host}) is not valid: allowed one concrete interface name "
                "(1-15 characters of A-Z a-z 0-9 _ . @ -), not an exclusion such as ^lo (Gloo crashes on "
                "exclusions) nor a list"
            )
    return errors


def check_nodes(mn: Mapping[str, Any], nodes: Mapping[str, Any], tp: Any, must_equal: Any) -> list[str]:
    """Every node of a multi-node replica in this run, with the same GPU count and model, and
    tp / nnodes equal to (or, must_equal false, dividing) the GPUs per node.

    nodes: {host: preflight's GPU summary of that host ({"count": int, "names": [str], ...}), or None
    (the host is not in this run). Nodes without a GPU (all in lab mode) skip the GPU rules.
    """
    nnodes = int(mn.get("nnodes") or 1)
    if nnodes <= 1:
        return []
    replica = mn.get("replica")
    errors: list[str] = []
    missing = [h for h in mn.get("hosts") or [] if not nodes.get(h)]
    if missing:
        return [
            f"{REPLICA_VAR}={_show(replica)}: host(s) {', '.join(missing)} of the replica are not in this "
            "run (--limit, or unreachable): allowed only whole replicas (a replica deploys as one unit)"
        ]
    facts = {h: nodes[h] for h in mn.get("hosts") or []}
    counts = {h: int(f.get("count") or 0) for h, f in facts.items()}
    models = {h: sorted(set(f.get("names") or [])) for h, f in facts.items()}
    if not any(counts.values()):
        return []  # lab mode on every node: no GPU to match (as for one host)
    shown = ", ".join(f"{h}: {counts[h]}" for h in facts)
    if len(set(counts.values())) != 1:
        errors.append(
            f"GPU count differs between the nodes of {REPLICA_VAR}={_show(replica)} ({shown}): allowed "
            "the same GPU count on every node (SGLang puts tp / nodes ranks on each)"
        )
    if len({tuple(m) for m in models.values()}) != 1:
        errors.append(
            f"GPU model differs between the nodes of {REPLICA_VAR}={_show(replica)} ("
            + ", ".join(f"{h}: {'/'.join(m) or 'none'}" for h, m in models.items())
            + "): allowed one GPU model on every node"
        )
    if errors or not isinstance(tp, int):
        return errors
    per_node = next(iter(counts.values()))
    equal = must_equal is True or (isinstance(must_equal, str) and must_equal.lower() in ("true", "yes", "1"))
    if tp % nnodes:
        return check_tp(mn, tp)
    share = tp // nnodes
    if (equal and share != per_node) or (not equal and (share < 1 or per_node % share)):
        allowed = (
            str(nnodes * per_node)
            if equal
            else ", ".join(str(nnodes * d) for d in range(1, per_node + 1) if per_node % d == 0)
        )
        errors.append(
            f"sglang_tp_size={tp} does not fit replica {replica} of {nnodes} nodes x {per_node} GPU(s) "
            f"(sglang_tp_size_must_equal_gpu_count={_show(equal)}): allowed {allowed} "
            "(tp = nodes x GPUs per node" + (")" if equal else ", or nodes x a divisor of it)")
        )
    return errors


def check_host(mn: Mapping[str, Any], env: Mapping[str, Any], host: str, net: Any, service: str) -> list[str]:
    """This node of a multi-node replica, from what preflight's probe read on it (``net``: ifaces, the
    entries of /sys/class/net; port_listening, whether a socket listens on the dist-init port (rank 0);
    unit_active, the service's ActiveState when one does): each socket interface variable names an
    interface the node has, and on rank 0 the dist-init port is free unless ``service``, which would hold
    it, is active. Values check_ifnames refuses are not looked up."""
    if int(mn.get("nnodes") or 1) <= 1:
        return []
    net = net if isinstance(net, Mapping) else {}
    present = sorted(str(i) for i in net.get("ifaces") or [])
    replica, rank = mn.get("replica"), int(mn.get("rank") or 0)
    errors = [
        f"{name}={json.dumps(value)} names no network interface of host {host} (replica {replica}, "
        f"rank {rank}): allowed one interface that exists on every node of the replica; this host has "
        + ", ".join(present)
        for name, value in socket_ifnames(env).items()
        if isinstance(value, str) and _IFNAME.fullmatch(value) and value not in present
    ]
    if rank == 0 and net.get("port_listening") and net.get("unit_active") != "active":
        errors.append(
            f"sglang_dist_init_port={mn.get('dist_init_port')} is taken on host {host} (rank 0 of replica "
            f"{replica}: a socket listens on it and {service}.service, which would hold it, is not active): "
            "allowed a port that is free on the rank-0 host; set sglang_dist_init_port to a free one"
        )
    return errors


def listening(proc_net_tcp: Sequence[str], port: int) -> bool:
    """Whether a TCP socket listens on `port`, from the text of /proc/net/tcp and /proc/net/tcp6."""
    want = f"{port:04X}"
    for text in proc_net_tcp:
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) > 3 and cols[3] == "0A" and cols[1].rsplit(":", 1)[-1].upper() == want:
                return True
    return False
