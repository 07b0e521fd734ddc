"""Live progress of a run: a rich table on a terminal, plain lines otherwise (CI logs).

With the last comparable run (history.previous_run) it also says how far: "task 84 of ~148" and,
for each task that took PROGRESS_MIN_S or more then, "2m10s of ~9m03s last run" (the stack install,
a benchmark, a batch of a roll); the plain lines name it once per task, nothing repeats.

Inside one long task: each retry of an `until` poll is a StepProgress event (verify's benchmark
reports "benchmark: level 3 of 5 (C=30), rep 2 of 3"), shown with the time the task has run so far:
in the live table under the host's task, and as a plain line only when it says something new. A
stage (`up --serial`'s "batch 2 of 3") heads the live table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .events import (
    COUNT_KEYS,
    Event,
    HostResult,
    HostStart,
    Output,
    PlayStart,
    Stats,
    StepProgress,
    TaskStart,
    is_notable,
)
from .history import PreviousRun

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "failed": "bold red",
    "skipped": "cyan",
    "unreachable": "bold magenta",
    "ignored": "dim red",
}
MESSAGE_LINES = 8
_COLUMNS = ("host", "current task", "elapsed", "ok", "changed", "failed", "skipped", "unreach")


def clock(seconds: float) -> str:
    """42s, 3m05s, 1h02m."""
    whole = int(max(0.0, seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


@dataclass
class _Host:
    task: str = ""
    since: float = 0.0
    step: str = ""  # the task's last progress line (StepProgress), "" when none
    started_at: datetime | None = None  # the task's start on this host, by the event's own clock
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))


class Progress:
    """Consumes the typed event stream; use as a context manager around the run."""

    def __init__(
        self,
        stream: IO[str],
        *,
        live: bool | None = None,
        verbose: bool = False,
        redact: Callable[[str], str] = lambda text: text,
        previous: PreviousRun | None = None,
        stage: str = "",
    ) -> None:
        self.stream = stream
        self.stage = stage
        self.live = stream.isatty() if live is None else live
        self.redact = redact
        self.t0 = time.monotonic()
        self.play = ""
        self.verbose = verbose
        self.playing = False
        self.task_labels: dict[str, str] = {}
        self.hosts: dict[str, _Host] = {}
        self.previous = previous
        self.task_starts = 0
        self._lock = threading.Lock()
        self._console = Console(
            file=stream,
            highlight=False,
            force_terminal=self.live or None,
            no_color=not self.live,
            soft_wrap=not self.live,
        )
        self._live: Live | None = None

    # -- context -------------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        self.t0 = time.monotonic()
        if self.live:
            self._live = Live(
                get_renderable=self._render, console=self._console, refresh_per_second=4, transient=False
            )
            self._live.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- events --------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self._handle(event)

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.t0:7.1f}s]"

    def _print(self, *parts: Any, style: str | None = None) -> None:
        self._console.print(*parts, style=style, markup=False, highlight=False)

    def _handle(self, event: Event) -> None:
        now = time.monotonic()
        if isinstance(event, PlayStart):
            self.play = event.name
            self.playing = True
            self._print(f"{self._stamp()} PLAY {event.name}", style="bold")
        elif isinstance(event, TaskStart):
            self.task_labels[event.uuid] = event.label
            self.task_starts += 1
            if not self.live:
                self._print(f"{self._stamp()} TASK {event.label}{self._how_far(event.label)}")
        elif isinstance(event, HostStart):
            host = self.hosts.setdefault(event.host, _Host())
            host.task = self.task_labels.get(event.task_uuid, "")
            host.since = now
            host.started_at = event.created
            host.step = ""
        elif isinstance(event, StepProgress):
            self._step(event, now)
        elif isinstance(event, HostResult):
            self._result(event, now)
        elif isinstance(event, Output):
            # once a play started, callback chatter (profile_tasks, timer) only with -v; errors always
            if self.playing and event.kind == "verbose" and not self.verbose and not is_notable(event.text):
                return
            style = "red" if event.kind == "error" or "ERROR" in event.text else None
            for line in self.redact(event.text).splitlines():
                self._print(f"{self._stamp()} {line}", style=style)
        elif isinstance(event, Stats):
            for name, counts in sorted(event.hosts.items()):
                self.hosts.setdefault(name, _Host()).counts = dict(counts)
                if not self.live:
                    line = " ".join(f"{key}={counts.get(key, 0)}" for key in COUNT_KEYS)
                    self._print(f"{self._stamp()} RECAP {name}: {line}")

    def position(self) -> str:
        """ "task 84 of ~148" (the last run's count), or "task 84" without a last run."""
        if self.previous is None:
            return f"task {self.task_starts}"
        return f"task {self.task_starts} of ~{max(self.previous.task_starts, self.task_starts)}"

    def last_took(self, label: str) -> float | None:
        return None if self.previous is None else self.previous.task_seconds.get(label)

    def _how_far(self, label: str) -> str:
        """The plain line's tail: where the run is and what this task took last time."""
        if self.previous is None:
            return ""
        took = self.last_took(label)
        return f"  ({self.position()}" + (f"; took {clock(took)} last run)" if took is not None else ")")

    def _step(self, event: StepProgress, now: float) -> None:
        host = self.hosts.setdefault(event.host, _Host(since=now))
        if event.text == host.step:
            return
        host.step = event.text
        if not self.live and not event.attempt_only:  # plain: a line when a record says something new
            # the time the task has run: by the events' clock (a replay too), else by ours
            if event.created is not None and host.started_at is not None:
                so_far = (event.created - host.started_at).total_seconds()
            else:
                so_far = now - host.since
            self._print(f"{self._stamp()} {'progress':<11} {event.host}  {event.text}, {clock(so_far)}")

    def _result(self, event: HostResult, now: float) -> None:
        host = self.hosts.setdefault(event.host, _Host())
        host.counts[event.outcome] += 1
        if event.outcome == "changed":
            host.counts["ok"] += 1
        host.task = ""
        host.step = ""
        style = _STYLE.get(event.outcome)
        if not self.live or event.outcome in ("changed", "failed", "unreachable", "ignored"):
            line = f"{self._stamp()} {event.outcome:<11} {event.host}  {event.label}  ({event.duration:.2f}s)"
            self._print(line, style=style)
        if event.message and event.outcome in ("failed", "unreachable", "ignored"):
            lines = self.redact(event.message).splitlines()
            for line in lines[:MESSAGE_LINES]:
                self._print(f"{'':>10}  | {line}", style=style)
            if len(lines) > MESSAGE_LINES:
                self._print(f"{'':>10}  | ... ({len(lines) - MESSAGE_LINES} more lines in the summary)")

    # -- live table ----------------------------------------------------------------------------
    def _render(self) -> Group:
        with self._lock:
            now = time.monotonic()
            table = Table(expand=False, box=None, header_style="bold")
            for column in _COLUMNS:
                table.add_column(column, justify="left" if column in ("host", "current task") else "right")
            for name, host in sorted(self.hosts.items()):
                c = host.counts
                took = self.last_took(host.task) if host.task else None
                elapsed = clock(now - host.since) + (f" of ~{clock(took)}" if took is not None else "")
                task = host.task or "-"
                if host.task and host.step:
                    task += f"\n  {host.step}"
                table.add_row(
                    name,
                    task,
                    elapsed if host.task else "",
                    Text(str(c["ok"]), style="green"),
                    Text(str(c["changed"]), style="yellow" if c["changed"] else ""),
                    Text(str(c["failed"]), style="bold red" if c["failed"] else ""),
                    str(c["skipped"]),
                    Text(str(c["unreachable"]), style="bold magenta" if c["unreachable"] else ""),
                )
            overall = clock(now - self.t0)
            if self.previous is not None and self.previous.duration_s > 0:
                overall += f" of ~{clock(self.previous.duration_s)} last run"
            stage = f"{self.stage}: " if self.stage else ""
            header = Text(f"{stage}{self.play}  ({self.position()}, {overall})", style="bold")
            return Group(header, table)

    def final(self, summary: dict[str, Any]) -> None:
        """One closing line per host plus the overall status (printed after the live area)."""
        for name, counts in summary.get("hosts", {}).items():
            line = " ".join(f"{key}={counts.get(key, 0)}" for key in COUNT_KEYS)
            self._print(f"{name}: {line}", style=_STYLE["failed"] if counts.get("status") != "ok" else None)
        for failed in summary.get("failed_tasks", []):
            role = f"{failed['role']} : " if failed["role"] else ""
            first = failed["message"].splitlines()[0] if failed["message"] else ""
            self._print(f"FAILED {failed['host']}: {role}{failed['task']}: {first}", style=_STYLE["failed"])
        self._print(
            f"status={summary.get('status')} rc={summary.get('rc')} duration={summary.get('duration_s')}s",
            style="bold",
        )
