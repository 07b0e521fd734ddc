"""The rolling upgrade's pure rules (playbooks/tasks/router_drain.yml, router_readmit.yml; the CLI's
batches in src/sglang_deploy/rollout.py follow the same replica rule): which replica a server host
belongs to, the replica's rank-0 host, the router's worker list read as data, the min-healthy
decision, and the in-flight count of a server's Prometheus /metrics. docs/rolling-upgrade.md."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import multinode

# SGLang 0.5.9's scheduler gauges (sglang/srt/metrics/collector.py): requests running, waiting
IN_FLIGHT_METRICS = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
_SAMPLE = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?[ \t]+(?P<value>\S+)(?:[ \t]+\S+)?")


def replicas(hosts: Iterable[str], hostvars: Mapping[str, Any]) -> dict[str, list[str]]:
    """{replica: [its hosts in the order given]} (the order of group sglang_servers: rank 0 first).
    A host's replica is its ``sglang_replica``, default its own name (one host = one replica): the rule
    of multinode.replica_groups, which the launch spec's replica plan uses too."""
    hosts = [str(h) for h in hosts]
    names: dict[str, Any] = {}
    for host in hosts:
        own = hostvars.get(host) or {}
        names[host] = own.get("sglang_replica") if hasattr(own, "get") else None
    groups: dict[str, list[str]] = multinode.replica_groups(hosts, names)
    return groups


def replica_of(host: str, groups: Mapping[str, list[str]]) -> str:
    """The replica holding ``host`` in the output of replicas()."""
    for name, members in groups.items():
        if host in members:
            return name
    raise ValueError(f"{host} is in no replica of {sorted(groups)}")


def workers(body: Any) -> list[dict[str, Any]]:
    """The router's GET /workers answer (sglang-router 0.3.2: {"workers": [{"id", "url", "is_healthy",
    ...}], "total", "stats"}) as [{id, url, healthy}], anything else refused."""
    if not isinstance(body, Mapping) or not isinstance(body.get("workers"), list):
        raise ValueError(f"not a /workers answer of sglang-router: {str(body)[:200]!r}")
    out = []
    for item in body["workers"]:
        if not isinstance(item, Mapping) or not isinstance(item.get("url"), str):
            raise ValueError(f"a worker without a url in the /workers answer: {str(item)[:200]!r}")
        out.append(
            {"id": str(item.get("id", "")), "url": item["url"], "healthy": item.get("is_healthy") is True}
        )
    return out


def drain_plan(body: Any, remove: Iterable[str], min_healthy: int) -> dict[str, Any]:
    """Whether the router may lose the workers ``remove``: {healthy, removing, left, min_healthy, ok,
    ids (url -> worker id of the listed ones), msg}. Only listed workers are removed; a batch that
    removes no healthy worker never lowers the count, so it is never refused."""
    listed = workers(body)
    wanted = list(dict.fromkeys(remove))
    healthy = [w["url"] for w in listed if w["healthy"]]
    removing = [url for url in wanted if url in healthy]
    left = len(healthy) - len(removing)
    ok = not removing or left >= int(min_healthy)
    msg = (
        f"removing {len(removing)} healthy worker(s) ({', '.join(removing) or '-'}) from the router leaves "
        f"{left} of {len(healthy)} healthy; sglang_router_min_healthy={int(min_healthy)}"
    )
    return {
        "healthy": len(healthy),
        "removing": removing,
        "left": left,
        "min_healthy": int(min_healthy),
        "ok": ok,
        "ids": {w["url"]: w["id"] for w in listed if w["url"] in wanted},
        "msg": msg,
    }


def listed(body: Any, url: str) -> dict[str, Any]:
    """{present, healthy, id} of ``url`` in a /workers answer."""
    for worker in workers(body):
        if worker["url"] == url:
            return {"present": True, "healthy": worker["healthy"], "id": worker["id"]}
    return {"present": False, "healthy": False, "id": ""}


def in_flight(text: Any) -> int:
    """Requests running + queued on an SGLang server: the sum of every sample of IN_FLIGHT_METRICS in
    its Prometheus text (/metrics). Refuses a text without them (metrics off: the drain cannot tell)."""
    if not isinstance(text, str):
        raise ValueError("the /metrics body is not text")
    total = 0.0
    seen = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(line.strip())
        if match and match["name"] in IN_FLIGHT_METRICS:
            value = float(match["value"])
            if math.isnan(value) or value < 0:
                raise ValueError(f"{match['name']} = {match['value']}")
            total += value
            seen.add(match["name"])
    missing = [name for name in IN_FLIGHT_METRICS if name not in seen]
    if missing:
        raise ValueError(f"/metrics has no {', '.join(missing)} (is --enable-metrics on?)")
    return math.ceil(total)
