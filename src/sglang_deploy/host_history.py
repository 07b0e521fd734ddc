"""The long-term alarm over each host's gated verify runs (issue 34, item 5), on the controller.

Every gated run of `sglang-deploy verify` appends its figures to the host's history, one JSON file
per host under the CLI's state dir (``<artifacts>/history/<host>.json``, beside the run reports; the
per-host baseline stays in the inventory's host_vars, where the role reads it). An entry: the run id,
when the host generated the results, the release benchmarked, the gate's status, output tok/s per
concurrency level, the mean accept length over the levels and the start-up time. The change-point
search (plugins/plugin_utils/history_alarm.py: permutation test + binary segmentation) runs over it,
and what it finds is printed by ``status`` and written into the verify report: an alarm for a
person, never a gate and never a rollback.

Gated: the gate ran on a benchmark (status passed, failed or baseline recorded); an ungated or skipped
gate adds nothing (its figures were judged against nothing, or not measured)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .paths import load_plugin_file

HISTORY_DIR = "history"
KEEP = 200  # entries per host; the oldest go first
GATED = frozenset({"passed", "failed", "baseline recorded", "baseline_recorded"})
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


ALARM = load_plugin_file("plugins/plugin_utils/history_alarm.py", "sglang_deploy._history_alarm")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def entry_of(data: Mapping[str, Any], run_id: str) -> dict[str, Any] | None:
    """The history entry of one host's verify-results.json, or None when the run was not gated."""
    results = data.get("results")
    if not isinstance(results, Mapping):
        return None
    gate = results.get("gate")
    bench = results.get("bench")
    if not isinstance(gate, Mapping) or str(gate.get("status", "")) not in GATED:
        return None
    if not isinstance(bench, Mapping):
        return None
    tps: dict[str, float] = {}
    accepts: list[float] = []
    for item in bench.get("levels") or []:
        if not isinstance(item, Mapping) or item.get("level") is None:
            continue
        value = _number(item.get("output_tps"))
        if value is not None and value > 0:
            tps[str(int(item["level"]))] = value
        accept = _number(item.get("accept_length"))
        if accept is not None and accept > 0:
            accepts.append(accept)
    if not tps:
        return None
    startup = results.get("startup")
    return {
        "run_id": run_id,
        "at": str(data.get("generated_at") or ""),
        "release": str(data.get("release_id") or data.get("current_release_id") or "?"),
        "gate": str(gate.get("status")),
        "output_tps": tps,
        "accept_length": round(sum(accepts) / len(accepts), 4) if accepts else None,
        "startup_s": _number(startup.get("measured_s")) if isinstance(startup, Mapping) else None,
    }


def history_file(history_dir: Path, host: str) -> Path:
    if not _HOST_NAME.match(host):
        raise ValueError(f"not a host name for a history file: {host!r}")
    return history_dir / f"{host}.json"


def read(history_dir: Path, host: str) -> list[dict[str, Any]]:
    """The host's entries, oldest first; [] when there is no (readable) history."""
    try:
        data = json.loads(history_file(history_dir, host).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    entries = data.get("entries") if isinstance(data, dict) else None
    return [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []


def append(history_dir: Path, host: str, entry: Mapping[str, Any]) -> bool:
    """Append ``entry`` to the host's history (atomically; once per run id). True when written."""
    entries = read(history_dir, host)
    if any(item.get("run_id") == entry.get("run_id") for item in entries):
        return False
    kept = ALARM.appended(entries, entry, keep=KEEP)
    path = history_file(history_dir, host)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"schema": 1, "host": host, "entries": kept}, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def record_runs(history_dir: Path, results: Mapping[str, Mapping[str, Any]], run_id: str) -> list[str]:
    """Append each host's gated run ({host: verify-results.json data}); the hosts written."""
    written = []
    for host, data in sorted(results.items()):
        entry = entry_of(data, run_id)
        if entry is not None and append(history_dir, host, entry):
            written.append(host)
    return written


def alarms(history_dir: Path, host: str) -> list[str]:
    """The change points over the host's history, each one line (``ChangePoint.describe``)."""
    entries = read(history_dir, host)
    try:
        points = ALARM.change_points(entries)
    except ALARM.HistoryError as error:
        return [f"history unreadable: {error}"]
    return [point.describe() for point in points]


def status_lines(history_dir: Path, hosts: Iterable[str]) -> dict[str, list[str]]:
    """{host: alarm lines} for the hosts that have any (what `status` prints and puts in its JSON)."""
    found = {}
    for host in sorted(set(hosts)):
        lines = alarms(history_dir, host) if _HOST_NAME.match(host) else []
        if lines:
            found[host] = lines
    return found


def report_section(hosts: Iterable[str], history_dir: str | Path | None) -> list[str]:
    """The verify report's section: per host, its gated runs on record and every change point found
    (an alarm for a person; the gate decided this run)."""
    if not history_dir:
        return []
    root = Path(history_dir)
    lines = [
        "## History alarm",
        "",
        "Change points over each host's gated runs (permutation test and binary segmentation, "
        f"alpha {ALARM.ALPHA:g}, at least {ALARM.MIN_SEGMENT} runs per segment): an alarm for a person, "
        "never a rollback; the gate above decided this run.",
        "",
    ]
    for host in sorted(set(hosts)):
        if not _HOST_NAME.match(host):
            continue
        entries = read(root, host)
        found = alarms(root, host)
        if not entries:
            lines.append(f"- {host}: no gated run on record")
        elif not found:
            lines.append(f"- {host}: {len(entries)} gated run(s) on record, no change point")
        else:
            lines.append(
                f"- {host}: {len(entries)} gated run(s) on record, **{len(found)} change point(s)**:"
            )
            lines += [f"  - {line}" for line in found]
    lines += ["", f"History files: {root}", ""]
    return lines
