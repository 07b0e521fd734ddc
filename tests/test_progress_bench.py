"""Progress inside one long task (issue 35 item 2): verify's benchmark runs in the background and an
`until` poll reads its progress record; each retry is a runner_retry event the CLI shows ("benchmark:
level 1 of 2 (C=1), rep 1 of 2, 4s"), a plain line only when it says something new, a line under the
host's task in the live table. The events are real: tests/data/runner_events/bench_progress.jsonl is
a run of tests/data/runner_project/bench_progress.yml (the real runner, roles/verify/files/verify_bench.py,
with a stand-in bench_serving) through ansible-runner."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from sglang_deploy.events import StepProgress, TaskStart, parse_event, progress_text
from sglang_deploy.progress import Progress

DATA = Path(__file__).parent / "data" / "runner_events"
LEVELS = [
    "benchmark: level 1 of 2 (C=1), rep 1 of 2",
    "benchmark: level 2 of 2 (C=4), rep 1 of 2",
    "benchmark: level 1 of 2 (C=1), rep 2 of 2",
    "benchmark: level 2 of 2 (C=4), rep 2 of 2",
]


def events() -> list[Any]:
    lines = (DATA / "bench_progress.jsonl").read_text().splitlines()
    return [event for line in lines if (event := parse_event(json.loads(line))) is not None]


def retry(res: dict[str, Any]) -> dict[str, Any]:
    return {"event": "runner_retry", "event_data": {"host": "gpu1", "task_uuid": "t1", "res": res}}


def record(**doc: Any) -> dict[str, Any]:
    content = base64.b64encode(json.dumps({"kind": "sglang-deploy-progress", **doc}).encode()).decode()
    return retry({"content": content, "attempts": 3, "retries": 61})


def test_the_polls_retries_carry_the_runners_progress() -> None:
    steps = [event for event in events() if isinstance(event, StepProgress)]
    texts = [step.text for step in steps]
    assert len(steps) >= 4
    assert {step.host for step in steps} == {"localhost"}
    assert not any(step.attempt_only for step in steps)
    # every (level, repetition) was seen, in the runner's order (a poll may see one twice)
    seen = [text for index, text in enumerate(texts) if index == 0 or texts[index - 1] != text]
    assert seen[-4:] == LEVELS or seen == LEVELS, texts
    [task] = {
        event.uuid
        for event in events()
        if isinstance(event, TaskStart) and event.name == "Follow the benchmark's progress"
    }
    assert {step.task_uuid for step in steps} == {task}


@pytest.mark.parametrize(
    ("doc", "text"),
    [
        ({"what": "benchmark", "state": "starting"}, "benchmark: starting"),
        ({"what": "benchmark", "state": "running", "runs": 6}, "benchmark: starting (loading the benchmark)"),
        (
            {"what": "benchmark", "state": "running", "run": 7, "runs": 15, "level": 30, "level_index": 3,
             "levels": 5, "rep": 2, "reps": 3},
            "benchmark: level 3 of 5 (C=30), rep 2 of 3",
        ),
        # the same-window order with its capacity probe: more runs than levels x repetitions
        (
            {"what": "benchmark", "state": "running", "run": 1, "runs": 9, "level": 1, "levels": 2, "rep": 1,
             "reps": 2},
            "benchmark: C=1, rep 1 of 2, run 1 of 9",
        ),
        ({"what": "benchmark", "state": "running", "run": 1, "runs": 2, "level": 8, "level_index": 1,
          "levels": 2, "rep": 1, "reps": 1}, "benchmark: level 1 of 2 (C=8)"),
        ({"what": "benchmark", "state": "done"}, "benchmark: done"),
        ({"what": "benchmark", "state": "failed"}, "benchmark: failed"),
        # host text is data: an unknown name or a string where a number belongs is not printed
        ({"what": "\x1b[31mrm -rf", "state": "running", "run": "1; evil", "level": 4},
         "step: starting (loading the benchmark)"),
    ],
)  # fmt: skip
def test_progress_text(doc: dict[str, Any], text: str) -> None:
    assert progress_text(doc) == text


def test_a_retry_without_a_record_is_an_attempt() -> None:
    event = parse_event(retry({"attempts": 4, "retries": 61, "status": 503}))
    assert event == StepProgress(host="gpu1", task_uuid="t1", text="attempt 4 of 61", attempt_only=True)
    bad = parse_event(retry({"content": "not base64!", "attempts": 2}))
    assert isinstance(bad, StepProgress)
    assert bad.text == "attempt 2"
    assert parse_event(retry({})) is None
    step = parse_event(
        record(
            what="benchmark", state="running", run=1, runs=2, level=1, level_index=1, levels=2, rep=1, reps=1
        )
    )
    assert isinstance(step, StepProgress)
    assert step.text == "benchmark: level 1 of 2 (C=1)"


def test_plain_lines_say_each_step_once_with_the_time_so_far() -> None:
    out = io.StringIO()
    with Progress(out, live=False) as progress:
        for event in events():
            progress(event)
        progress(parse_event(record(what="benchmark", state="done")))  # type: ignore[arg-type]
        progress(parse_event(retry({"attempts": 5, "retries": 61})))  # type: ignore[arg-type]
    text = out.getvalue()
    lines = [line for line in text.splitlines() if "] progress " in line]
    for level in LEVELS:
        assert sum(f"progress    localhost  {level}, " in line for line in lines) == 1, text
    # the time so far, by the events' clock: the runner's levels took ~2 s each, one after the other
    seconds = [int(line.rsplit(", ", 1)[1].rstrip("s")) for line in lines if "localhost" in line]
    assert seconds == sorted(seconds)
    assert 5 <= seconds[-1] <= 30, lines
    assert "attempt" not in text  # bare attempts are for the live table only
    assert "\x1b[" not in text


def test_the_live_table_shows_the_step_under_the_task_and_the_stage() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True, stage="up (batch 2/3)")
    with progress:
        for event in events():
            if isinstance(event, StepProgress):
                progress(event)
                break
            progress(event)
        rendered = io.StringIO()
        Console(file=rendered, width=200, force_terminal=False).print(progress._render())
    text = rendered.getvalue()
    assert "up (batch 2/3): Fixture - a benchmark in the background" in text
    assert "Follow the benchmark's progress" in text
    assert "benchmark: level 1 of 2 (C=1), rep 1 of 2" in text
