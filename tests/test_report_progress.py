"""The progress display, fed with real runner events: plain lines (CI) and the live table (terminal)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from sglang_deploy.events import parse_event
from sglang_deploy.progress import Progress

DATA = Path(__file__).parent / "data" / "runner_events"


def feed(name: str, progress: Progress) -> None:
    with progress:
        for line in (DATA / f"{name}.jsonl").read_text().splitlines():
            event = parse_event(json.loads(line))
            if event is not None:
                progress(event)


def test_plain_lines() -> None:
    out = io.StringIO()
    feed("fail", Progress(out, live=False))
    text = out.getvalue()
    assert "PLAY Fixture - failing play" in text
    assert "TASK demo : Report ok" in text
    assert "ok          localhost  demo : Report ok" in text
    assert "changed     localhost  demo : Report changed" in text
    assert "skipped     localhost  demo : Skip always" in text
    assert "failed      localhost  Validate the port" in text
    assert "| demo_port must be 1-65535, got 0" in text
    assert "RECAP localhost: ok=3 changed=1 failed=1 skipped=1" in text
    assert "\x1b[" not in text
    assert all(line.startswith(("[", " ")) for line in text.splitlines())


def test_plain_hides_callback_chatter_unless_verbose() -> None:
    chatter = {"event": "verbose", "stdout": "TASKS RECAP ****"}
    for verbose in (False, True):
        out = io.StringIO()
        with Progress(out, live=False, verbose=verbose) as progress:
            for line in (DATA / "pass.jsonl").read_text().splitlines():
                event = parse_event(json.loads(line))
                if event is not None:
                    progress(event)
            chatter_event = parse_event(chatter)
            assert chatter_event is not None
            progress(chatter_event)
        assert ("TASKS RECAP" in out.getvalue()) is verbose


def test_plain_shows_errors_before_the_play() -> None:
    out = io.StringIO()
    feed("error", Progress(out, live=False))
    assert "[ERROR]: couldn't resolve module/action 'no.such.module'" in out.getvalue()


def test_live_table_and_final() -> None:
    out = io.StringIO()
    progress = Progress(out, live=True)
    feed("fail", progress)
    progress.final(
        {
            "hosts": {"localhost": {"ok": 3, "changed": 1, "failed": 1, "status": "failed"}},
            "failed_tasks": [
                {"host": "localhost", "role": "", "task": "Validate the port", "message": "bad"}
            ],
            "status": "failed",
            "rc": 2,
            "duration_s": 3.2,
        }
    )
    text = out.getvalue()
    assert "localhost" in text
    assert "current task" in text  # the live table was rendered
    assert "demo_port must be 1-65535" in text  # failures are printed above the table
    assert "FAILED localhost: Validate the port: bad" in text
    assert "status=failed rc=2" in text
    # a live display shows the ok results only in the table, not as lines
    assert "ok          localhost  demo : Report ok" not in text
