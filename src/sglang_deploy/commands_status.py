"""`sglang-deploy status`: the fleet at a glance, read-only. playbooks/status.yml asks every server
host (unit, release, last verify verdict, /health, SGLang's Prometheus /metrics) and every router
(GET /workers, /readiness, /health) and hands the raw answers over with set_stats; this module
parses them (never templated: host text is data), groups the server hosts into replicas, prints one
row per replica (or one JSON document) and writes the Prometheus file_sd scrape-target file the
inventory names (`sglang_prometheus_targets_file`).

Exit status: the playbook's when it failed (2 a failed host, 4 unreachable, ...), else 0 when every
replica is healthy and in every router, else STATUS_DOWN_RC (7). A change point in a host's history of
gated verify runs (host_history.py) is printed as a HISTORY ALARM line and is in the JSON
(``history_alarms``); it is for a person to look at and never changes the exit status."""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import math
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from . import host_history
from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream, print_json, run_paths

PLAYBOOK = "playbooks/status.yml"
STATUS_DOWN_RC = 7  # a replica is down, unhealthy or not (healthy) in a router; or a router does not answer

# SGLang 0.5.9's names (python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector; served on
# the server's port at /metrics with --enable-metrics) -> how the series of one server combine
METRICS: dict[str, str] = {
    "sglang:num_running_reqs": "sum",
    "sglang:num_queue_reqs": "sum",
    "sglang:gen_throughput": "sum",
    "sglang:spec_accept_length": "mean",
}
_SAMPLE = re.compile(
    r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)(?:\s+\S+)?"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_metrics(text: str) -> dict[str, list[float]]:
    """Prometheus text exposition (version 0.0.4) -> {metric name: [sample values]} of the METRICS
    names (comments, other metrics and unparsable lines ignored; NaN samples dropped)."""
    found: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None or match["name"] not in METRICS:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        if not math.isnan(value):
            found.setdefault(match["name"], []).append(value)
    return found


@dataclass
class Metric:
    value: float | None
    why: str = ""  # when value is None: why it is n/a

    def show(self, digits: int = 1) -> str:
        if self.value is None:
            return "n/a"
        return f"{self.value:.{digits}f}" if digits else f"{self.value:g}"


def server_metrics(status: int, text: str, error: str) -> dict[str, Metric]:
    """The four figures of one server from its /metrics answer, each with why it is n/a."""
    if status != 200:
        why = {
            -1: f"/metrics not reachable: {error or 'no answer'}",
            404: "/metrics 404: the server runs without --enable-metrics",
        }.get(status, f"/metrics answered HTTP {status}")
        return {name: Metric(None, why) for name in METRICS}
    samples = parse_metrics(text)
    out: dict[str, Metric] = {}
    for name, how in METRICS.items():
        values = samples.get(name)
        if not values:
            why = f"{name} not exported"
            if name == "sglang:spec_accept_length":
                why += " (no speculative decoding, or no decode step yet)"
            out[name] = Metric(None, why)
        else:
            out[name] = Metric(sum(values) if how == "sum" else sum(values) / len(values))
    return out


@dataclass
class Verdict:
    status: str
    at: str
    release: str
    why: str = ""


def last_verdict(results_b64: str) -> Verdict:
    """verify-results.json's top-level status, generated_at and release_id (the slurped file)."""
    if not results_b64:
        return Verdict("none", "", "", "no verify-results.json (never verified with a benchmark)")
    try:
        data = json.loads(base64.b64decode(results_b64, validate=True))
    except (binascii.Error, ValueError) as error:
        return Verdict("unreadable", "", "", f"verify-results.json: {error}")
    if not isinstance(data, dict):
        return Verdict("unreadable", "", "", "verify-results.json is not an object")
    return Verdict(
        str(data.get("status") or "unknown"),
        str(data.get("generated_at") or ""),
        str(data.get("release_id") or ""),
    )


@dataclass
class Membership:
    router: str
    state: str  # healthy | unhealthy | absent | unknown
    why: str = ""


def router_workers(answer: dict[str, Any]) -> tuple[dict[str, bool] | None, str]:
    """A router's GET /workers answer -> ({worker url: is_healthy}, "") or (None, why)."""
    status = int(answer.get("status", -1))
    if status != 200:
        error = str(answer.get("error") or "")
        return None, f"GET /workers: {'no answer: ' + error if status == -1 else f'HTTP {status}'}"
    try:
        data = json.loads(str(answer.get("body") or ""))
        workers = data["workers"]
        return {_norm_url(str(w["url"])): bool(w.get("is_healthy")) for w in workers}, ""
    except (ValueError, KeyError, TypeError) as error:
        return None, f"GET /workers: not the router's worker list ({type(error).__name__})"


def _norm_url(url: str) -> str:
    return url.strip().rstrip("/").lower()


@dataclass
class HostState:
    host: str
    rank: int
    unit: dict[str, str]
    release: str
    health: int
    health_error: str

    @property
    def active(self) -> bool:
        return self.unit.get("ActiveState") == "active"

    def unit_text(self) -> str:
        if self.unit.get("LoadState") == "not-found":
            return "not installed"
        state = f"{self.unit.get('ActiveState') or '?'}/{self.unit.get('SubState') or '?'}"
        since = self.unit.get("ActiveEnterTimestamp") or ""
        return f"{state} since {since}" if self.active and since else state


@dataclass
class Replica:
    name: str
    hosts: list[HostState]
    worker_url: str
    verdict: Verdict
    metrics: dict[str, Metric]
    routers: list[Membership] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def rank0(self) -> HostState:
        return self.hosts[0]

    @property
    def healthy(self) -> bool:
        return not self.problems


def replica_hosts(stats: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """[(replica, [its hosts, rank 0 first])] as playbooks/status.yml hands them: grouped there by the
    collection's one rule (filter sglang.deploy.roll_replicas: `sglang_replica`, default the host
    itself; inventory order of sglang_servers), replicas in the order of their first host."""
    grouped = stats.get("sglang_status_replicas") or {}
    return [(str(name), [str(h) for h in hosts]) for name, hosts in grouped.items()]


def build_status(stats: dict[str, Any]) -> tuple[list[Replica], dict[str, dict[str, Any]]]:
    """Replicas (with problems named) and routers from the playbook's set_stats data."""
    servers: dict[str, dict[str, Any]] = stats.get("sglang_status_servers") or {}
    routers_raw: dict[str, dict[str, Any]] = stats.get("sglang_status_routers") or {}
    routers: dict[str, dict[str, Any]] = {}
    for name in sorted(routers_raw, key=lambda h: (int(routers_raw[h].get("index", 0)), h)):
        raw = routers_raw[name]
        workers, why = router_workers(raw.get("workers") or {})
        routers[name] = {
            "workers": workers,
            "why": why,
            "health": int((raw.get("health") or {}).get("status", -1)),
            "readiness": int((raw.get("readiness") or {}).get("status", -1)),
            "prometheus_target": str(raw.get("prometheus_target") or ""),
        }
    replicas: list[Replica] = []
    for replica_name, hosts in replica_hosts(stats):
        states = [
            HostState(
                host=host,
                rank=rank,
                unit={k: str(v) for k, v in (servers.get(host, {}).get("unit") or {}).items()},
                release=os.path.basename(str(servers.get(host, {}).get("current") or "")),
                health=int(servers.get(host, {}).get("health_status", -1)),
                health_error=str(servers.get(host, {}).get("health_error") or ""),
            )
            for rank, host in enumerate(hosts)
        ]
        head = servers.get(hosts[0], {})  # {} for a host that did not answer: reported down
        replica = Replica(
            name=replica_name,
            hosts=states,
            worker_url=str(head.get("worker_url") or ""),
            verdict=last_verdict(str(head.get("results_b64") or "")),
            metrics=server_metrics(
                int(head.get("metrics_status", -1)),
                str(head.get("metrics_text") or ""),
                str(head.get("metrics_error") or ""),
            ),
        )
        for state in states:
            if not state.active:
                replica.problems.append(f"{state.host}: unit {state.unit_text()}")
        if replica.rank0.health != 200:
            detail = (
                replica.rank0.health_error if replica.rank0.health == -1 else f"HTTP {replica.rank0.health}"
            )
            replica.problems.append(f"{replica.rank0.host}: /health {detail or 'no answer'}")
        for router, info in routers.items():
            if info["workers"] is None:
                member = Membership(router, "unknown", info["why"])
            elif _norm_url(replica.worker_url) not in info["workers"]:
                member = Membership(router, "absent", f"{replica.worker_url} not in the router's /workers")
            elif info["workers"][_norm_url(replica.worker_url)]:
                member = Membership(router, "healthy")
            else:
                member = Membership(router, "unhealthy", "the router's health check marks it unhealthy")
            replica.routers.append(member)
            if member.state != "healthy":
                replica.problems.append(
                    f"router {router}: {member.state}" + (f" ({member.why})" if member.why else "")
                )
        replicas.append(replica)
    return replicas, routers


def scrape_targets(replicas: list[Replica], routers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Prometheus file_sd: each replica's rank-0 server (host:port of its worker URL; labels replica,
    role=server) and each router's Prometheus port (role=router)."""
    groups: list[dict[str, Any]] = []
    for replica in replicas:
        target = re.sub(r"^[a-z]+://", "", replica.worker_url).split("/", 1)[0]
        groups.append({"targets": [target], "labels": {"replica": replica.name, "role": "server"}})
    for name, info in routers.items():
        groups.append({"targets": [info["prometheus_target"]], "labels": {"router": name, "role": "router"}})
    return groups


def targets_path(value: str, inventory_dir: str) -> Path | None:
    """Where the scrape-target file goes: absolute, or relative to the inventory's directory;
    None when not set. ValueError for a value with control characters."""
    if not value:
        return None
    if _CONTROL.search(value):
        raise ValueError(
            f"sglang_prometheus_targets_file {value!r}: control characters are not allowed (a file path)"
        )
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(inventory_dir or ".") / path


def write_targets(path: Path, groups: list[dict[str, Any]]) -> None:
    """Atomically (temp file + rename), 0644: JSON of data, nothing a host said is interpreted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".targets-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(groups, fh, indent=2)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replica_json(replica: Replica) -> dict[str, Any]:
    return {
        "replica": replica.name,
        "healthy": replica.healthy,
        "problems": replica.problems,
        "worker_url": replica.worker_url,
        "hosts": [
            {
                "host": h.host,
                "rank": h.rank,
                "unit": h.unit,
                "active": h.active,
                "release": h.release,
                "health": h.health,
            }
            for h in replica.hosts
        ],
        "release": replica.rank0.release,
        "verdict": asdict(replica.verdict),
        "routers": [asdict(m) for m in replica.routers],
        "metrics": {name: asdict(m) for name, m in replica.metrics.items()},
    }


def render_table(replicas: list[Replica], routers: dict[str, dict[str, Any]], stream: IO[str]) -> None:
    console = Console(file=stream, width=None if stream.isatty() else 200, highlight=False, soft_wrap=False)
    table = Table(title="fleet status", title_justify="left")
    for column in (
        "replica",
        "router",
        "unit",
        "release",
        "verdict",
        "running",
        "queued",
        "gen tok/s",
        "accept len",
    ):
        table.add_column(column, overflow="fold")
    for replica in replicas:
        router = ", ".join(f"{m.router}: {m.state}" for m in replica.routers) or "no router"
        units = "; ".join(h.unit_text() for h in replica.hosts)
        verdict = replica.verdict.status + (f" ({replica.verdict.at})" if replica.verdict.at else "")
        m = replica.metrics
        table.add_row(
            ("OK " if replica.healthy else "DOWN ") + replica.name,
            router,
            units,
            replica.rank0.release or "-",
            verdict,
            m["sglang:num_running_reqs"].show(0),
            m["sglang:num_queue_reqs"].show(0),
            m["sglang:gen_throughput"].show(1),
            m["sglang:spec_accept_length"].show(2),
        )
    console.print(table)
    for replica in replicas:
        reasons = sorted({m.why for m in replica.metrics.values() if m.value is None})
        for why in reasons:
            console.print(f"{replica.name}: n/a: {why}")
        for problem in replica.problems:
            console.print(f"{replica.name}: DOWN: {problem}")
    for name, info in routers.items():
        state = "answers" if info["workers"] is not None else info["why"]
        console.print(
            f"router {name}: /health {info['health']}, /readiness {info['readiness']}, /workers {state}"
        )


def run(args: argparse.Namespace) -> int:
    request = make_request(args, PLAYBOOK)
    if request is None:
        return BAD_INPUT_RC
    result = execute(request, args, "status")
    stats = result.summary.get("stats_data", {}) or {}
    replicas, routers = build_status(stats)
    stream = out_stream(args)
    targets_file = ""
    try:
        path = targets_path(
            str(stats.get("sglang_status_targets_file") or ""),
            str(stats.get("sglang_status_inventory_dir") or ""),
        )
    except ValueError as error:
        print(error, file=stream)
        return BAD_INPUT_RC
    if path is not None and replicas:
        write_targets(path, scrape_targets(replicas, routers))
        targets_file = str(path)
    routers_down = [name for name, info in routers.items() if info["workers"] is None]
    history_dir = request.artifacts_dir / host_history.HISTORY_DIR
    history_alarms = host_history.status_lines(history_dir, (h.host for r in replicas for h in r.hosts))
    rc = result.rc
    if rc == 0 and (not replicas or any(not r.healthy for r in replicas) or routers_down):
        rc = STATUS_DOWN_RC
    if args.json:
        print_json(
            {
                "schema": 1,
                "command": "status",
                "rc": rc,
                "healthy": rc == 0,
                "replicas": [replica_json(r) for r in replicas],
                "routers": {
                    name: {k: v for k, v in info.items() if k != "workers"}
                    | {"workers": info["workers"], "answers": info["workers"] is not None}
                    for name, info in routers.items()
                },
                "targets_file": targets_file,
                "history_alarms": history_alarms,
                **run_paths(result),
            }
        )
    else:
        render_table(replicas, routers, stream)
        for host, lines in history_alarms.items():
            for line in lines:
                print(f"{host}: HISTORY ALARM (verify runs, {history_dir}): {line}", file=stream)
        if targets_file:
            print(f"scrape targets: {targets_file}", file=stream)
        if rc == STATUS_DOWN_RC:
            down = [r.name for r in replicas if not r.healthy]
            print(
                f"status: {len(down)} of {len(replicas)} replica(s) down or out of the router"
                + (f" ({', '.join(down)})" if down else "")
                + (f"; router(s) not answering: {', '.join(routers_down)}" if routers_down else "")
                + f": exit {STATUS_DOWN_RC}",
                file=stream,
            )
        stream.flush()
    return rc
