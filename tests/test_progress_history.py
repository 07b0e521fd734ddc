"""How far a run is: the summary keeps each run's task starts and long tasks' times, history finds
the last comparable run, and the progress display says "task N of ~M" and "of ~T last run" (plain
lines once per task; the live table on a terminal). The CLI case runs a real playbook twice."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console

from sglang_deploy.events import HostResult, HostStart, PlayStart, TaskStart
from sglang_deploy.history import PreviousRun, previous_run
from sglang_deploy.progress import Progress, clock
from sglang_deploy.report import RunRecorder

REPO = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "data" / "runner_project"
T0 = datetime(2026, 12, 4, 12, 0, 0)


def _task(uuid: str, name: str, role: str = "sglang_stack") -> TaskStart:
    return TaskStart(uuid=uuid, name=name, role=role, action="ansible.builtin.command", created=T0)


def _result(
    uuid: str, name: str, seconds: float, host: str = "gpu1", role: str = "sglang_stack"
) -> HostResult:
    return HostResult(
        host=host, task_uuid=uuid, task=name, role=role, action="ansible.builtin.command", outcome="changed",
        message="", start=T0, end=T0 + timedelta(seconds=seconds), created=T0,
    )  # fmt: skip


def test_the_summary_keeps_task_starts_and_the_longest_host_of_each_long_task() -> None:
    recorder = RunRecorder()
    for event in (
        _task("a", "Install the release"),
        _result("a", "Install the release", 543.2, "gpu1"),
        _result("a", "Install the release", 601.26, "gpu2"),
        _task("b", "Write the receipt"),
        _result("b", "Write the receipt", 0.4),
        # a serial play's next batch starts the same task again: counted again
        _task("a", "Install the release"),
        _result("a", "Install the release", 580.0, "gpu3"),
    ):
        recorder.feed(event)
    summary = recorder.summary(rc=0, status="successful", started=T0, finished=T0, meta={})
    assert summary["task_starts"] == 3
    assert summary["task_seconds"] == {"sglang_stack : Install the release": 601.3}  # 0.4 s: left out


def _write(root: Path, run_id: str, started: str, **fields: object) -> None:
    data = {
        "run_id": run_id, "playbook": "site.yml", "check": False, "limit": None, "tags": None,
        "skip_tags": None, "status": "successful", "started": started, "duration_s": 300.0,
        "task_starts": 148, "task_seconds": {"sglang_stack : Install the release": 543.0},
    }  # fmt: skip
    data.update(fields)
    (root / "runs" / run_id).mkdir(parents=True)
    (root / "runs" / run_id / "summary.json").write_text(json.dumps(data))


def test_the_previous_run_is_the_latest_successful_one_of_the_same_playbook_mode_limit_and_tags(
    tmp_path: Path,
) -> None:
    assert previous_run(tmp_path, playbook="site.yml", check=False) is None
    _write(tmp_path, "old", "2026-12-01T10:00:00", task_starts=120)
    _write(tmp_path, "good", "2026-12-02T10:00:00")
    _write(tmp_path, "failed", "2026-12-03T10:00:00", status="failed", task_starts=7)
    _write(tmp_path, "check", "2026-12-03T11:00:00", check=True, task_starts=90)
    _write(tmp_path, "limited", "2026-12-03T12:00:00", limit="gpu1", task_starts=50)
    _write(tmp_path, "tagged", "2026-12-03T13:00:00", tags="verify", task_starts=40)
    _write(tmp_path, "other", "2026-12-03T14:00:00", playbook="playbooks/roll.yml", task_starts=30)
    _write(tmp_path, "older-format", "2026-12-03T15:00:00", task_starts=None)
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "summary.json").write_text("{not json")
    found = previous_run(tmp_path, playbook="site.yml", check=False)
    assert found == PreviousRun(
        run_id="good", task_starts=148, duration_s=300.0,
        task_seconds={"sglang_stack : Install the release": 543.0},
    )  # fmt: skip
    assert previous_run(tmp_path, playbook="site.yml", check=True) is not None
    limited = previous_run(tmp_path, playbook="site.yml", check=False, limit="gpu1")
    assert limited is not None
    assert limited.run_id == "limited"


def test_clock() -> None:
    assert [clock(s) for s in (0, 42.9, 60, 185, 3599, 3720)] == [
        "0s",
        "42s",
        "1m00s",
        "3m05s",
        "59m59s",
        "1h02m",
    ]


PREVIOUS = PreviousRun(
    run_id="r1",
    task_starts=148,
    duration_s=1200.0,
    task_seconds={"sglang_stack : Install the release": 543.0},
)


def _feed(progress: Progress) -> None:
    progress(PlayStart(name="Deploy", created=T0))
    progress(_task("q", "Check the lock"))
    progress(_result("q", "Check the lock", 0.2))
    progress(_task("a", "Install the release"))
    progress(HostStart(host="gpu1", task_uuid="a", created=T0))


def test_plain_lines_say_how_far_once_per_task() -> None:
    out = io.StringIO()
    with Progress(out, live=False, previous=PREVIOUS) as progress:
        _feed(progress)
    text = out.getvalue()
    assert "TASK sglang_stack : Check the lock  (task 1 of ~148)" in text
    assert "TASK sglang_stack : Install the release  (task 2 of ~148; took 9m03s last run)" in text
    assert "\x1b[" not in text
    assert text.count("Install the release") == 1  # nothing repeats while it runs


def test_without_a_previous_run_the_plain_lines_are_as_before() -> None:
    out = io.StringIO()
    with Progress(out, live=False) as progress:
        _feed(progress)
    assert "TASK sglang_stack : Install the release\n" in out.getvalue()


def test_the_live_table_shows_position_and_the_last_runs_time() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, previous=PREVIOUS)
    with progress:
        _feed(progress)
        rendered = io.StringIO()
        Console(file=rendered, width=200, force_terminal=False).print(progress._render())
    text = rendered.getvalue()
    assert "task 2 of ~148" in text
    assert "of ~20m00s last run" in text
    assert "of ~9m03s" in text  # the host row of the long task


def test_the_cli_names_the_last_runs_time_of_a_long_task(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "sglang-deploy"
    argv = [str(exe), "up", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path),
            "--playbook", str(PROJECT.relative_to(REPO) / "slow.yml")]  # fmt: skip
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    first = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "TASK Long task\n" in first.stdout  # no run to compare with yet
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["task_starts"] == 3
    assert 5.5 <= summary["task_seconds"]["Long task"] < 60
    second = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "TASK Quick task  (task 1 of ~3)" in second.stdout
    took = int(summary["task_seconds"]["Long task"])  # 6 s, or more on a busy machine
    assert f"TASK Long task  (task 2 of ~3; took {took}s last run)" in second.stdout
