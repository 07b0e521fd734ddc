"""The router's worker list made equal to the inventory: the pure rules of plugins/modules/router_workers.py
(role sglang_router, entry point workers).

Wanted: the rank-0 server hosts whose verify passed (the role decides that from the verdicts and hands
each server over with ``wanted``). Missing: a wanted host whose URL the router does not list. Extra: a
listed worker whose URL no wanted host has (removed only when pruning), and a listed worker whose URL
the caller names in ``remove`` (the roll's drain takes a replica out before its restart). The messages
are the drift report's lines, one per worker, which ``sglang-deploy drift`` names
(src/sglang_deploy/commands_drift.py ROUTER_DRIFT): keep their wording. Pure: no I/O; the router's
answers are read by roll.workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MISSING_WHY = "in the inventory and verified, not registered"


def plan(
    listed: Sequence[Mapping[str, Any]],
    servers: Sequence[Mapping[str, Any]],
    *,
    router: str,
    prune: bool,
    remove: Iterable[str] = (),
) -> dict[str, Any]:
    """What to change on the router: {missing: [{host, url}], extra: [{id, url}] (the unwanted when
    ``prune``, and the listed workers whose URL is in ``remove``), messages: [the report's lines]}.
    ``listed``: roll.workers() of its GET /workers; ``servers``: [{host, url, status, wanted}] of the
    rank-0 server hosts, in inventory order (the roll's calls pass its one replica, or none)."""
    listed_urls = {str(w["url"]) for w in listed}
    wanted = [s for s in servers if s.get("wanted")]
    wanted_urls = {str(s["url"]) for s in wanted}
    inventory_urls = {str(s["url"]) for s in servers}
    missing = [
        {"host": str(s["host"]), "url": str(s["url"])} for s in wanted if str(s["url"]) not in listed_urls
    ]
    extra = [
        {"id": str(w.get("id", "")), "url": str(w["url"])} for w in listed if str(w["url"]) not in wanted_urls
    ]
    messages = [
        f"router {router}: {s['host']} ({s['url']}) is not registered: verify status '{s.get('status', '')}'"
        for s in servers
        if not s.get("wanted")
    ]
    messages += [f"router {router}: worker {m['url']} ({m['host']}) missing: {MISSING_WHY}" for m in missing]
    if prune:
        messages += [
            f"router {router}: worker {e['url']} registered but "
            + ("its verify has not passed" if e["url"] in inventory_urls else "not in the inventory")
            for e in extra
        ]
    out = extra if prune else []
    removing = set(remove)
    drained = [
        {"id": str(w.get("id", "")), "url": str(w["url"])}
        for w in listed
        if str(w["url"]) in removing and str(w.get("id", "")) not in {e["id"] for e in out}
    ]
    messages += [f"router {router}: worker {d['url']} taken out of the router (drain)" for d in drained]
    return {"missing": missing, "extra": out + drained, "messages": messages}


def all_healthy(listed: Iterable[Mapping[str, Any]], urls: Iterable[str]) -> bool:
    """Whether the router lists every URL of ``urls`` healthy (roll.workers' ``healthy``): a POST of a
    worker answers 202 while the router's background job adds it."""
    healthy = {str(w["url"]) for w in listed if w.get("healthy") is True}
    return set(urls) <= healthy


def none_listed(listed: Iterable[Mapping[str, Any]], urls: Iterable[str]) -> bool:
    """Whether the router lists none of ``urls`` (a DELETE answers 202 while the router removes it)."""
    gone = set(urls)
    return not any(str(w["url"]) in gone for w in listed)
