"""The last comparable run, read from the run reports the CLI keeps (artifacts/runs/<id>/summary.json):
what the progress display compares this run with ("task 84 of ~148", "2m10s of ~9m03s last run").

Comparable: the same playbook, in the same mode (check or not), with the same limit and tags, that
ended successfully. None when there is none; a report that cannot be read is passed over."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PreviousRun:
    """What a past run took: its task starts, its duration and its long tasks' times (by label)."""

    run_id: str
    task_starts: int
    duration_s: float
    task_seconds: dict[str, float] = field(default_factory=dict)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _comparable(data: dict[str, Any], want: dict[str, Any]) -> bool:
    return data.get("status") == "successful" and all(data.get(key) == value for key, value in want.items())


def previous_run(
    artifacts_dir: Path,
    *,
    playbook: str,
    check: bool,
    limit: str | None = None,
    tags: str | None = None,
    skip_tags: str | None = None,
) -> PreviousRun | None:
    """The latest successful run of this playbook in this mode, limit and tags; None when none."""
    want = {"playbook": playbook, "check": check, "limit": limit, "tags": tags, "skip_tags": skip_tags}
    best: tuple[str, dict[str, Any]] | None = None
    for path in (artifacts_dir / "runs").glob("*/summary.json"):
        data = _read(path)
        if data is None or not _comparable(data, want) or not isinstance(data.get("task_starts"), int):
            continue
        started = str(data.get("started", ""))
        if best is None or started > best[0]:
            best = (started, data)
    if best is None:
        return None
    data = best[1]
    seconds = data.get("task_seconds")
    return PreviousRun(
        run_id=str(data.get("run_id", "")),
        task_starts=int(data["task_starts"]),
        duration_s=float(data.get("duration_s") or 0.0),
        task_seconds={str(k): float(v) for k, v in seconds.items()} if isinstance(seconds, dict) else {},
    )
