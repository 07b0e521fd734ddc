"""A typed view of ansible-runner's event dicts (what the progress display and the reports read).

Only what we use is kept; `parse_event` returns None for events we do not model. Loop items are
kept only as `ItemChanged` (a changed item of a no_log loop, see `censored_changed`)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from .diffs import change_summary

Outcome = Literal["ok", "changed", "failed", "skipped", "unreachable", "ignored"]
COUNT_KEYS = ("ok", "changed", "failed", "skipped", "unreachable", "rescued", "ignored")


@dataclass(frozen=True)
class PlayStart:
    name: str
    created: datetime | None


@dataclass(frozen=True)
class TaskStart:
    uuid: str
    name: str
    role: str
    action: str
    created: datetime | None

    @property
    def label(self) -> str:
        return f"{self.role} : {self.name}" if self.role else self.name


@dataclass(frozen=True)
class HostStart:
    """A host began executing a task (v2_runner_on_start)."""

    host: str
    task_uuid: str
    created: datetime | None


@dataclass(frozen=True)
class HostResult:
    host: str
    task_uuid: str
    task: str
    role: str
    action: str
    outcome: Outcome
    message: str
    start: datetime | None
    end: datetime | None
    created: datetime | None
    # changed results: what changed (or would change, in check mode): diff summary + message
    detail: str = ""
    # what the end-of-run summary of `up` reads (report.deployed): the KEPT_FACTS a task set, and
    # the unit's state a service probe read from the host (`unit_enabled`, `unit_active`)
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.role} : {self.task}" if self.role else self.task

    @property
    def duration(self) -> float:
        if self.start is None or self.end is None:
            return 0.0
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Output:
    """Text ansible printed outside a task result: errors before the play starts, warnings, -v lines."""

    kind: str
    text: str


_NOTABLE = re.compile(r"^\s*(\[ERROR\]|ERROR!|\[WARNING\]|\[DEPRECATION|fatal:|An exception occurred)", re.I)


def is_notable(text: str) -> bool:
    """Errors, warnings and deprecations (as opposed to callback chatter such as profile_tasks)."""
    return bool(_NOTABLE.match(text))


@dataclass(frozen=True)
class Stats:
    """The play recap: per host counts, as ansible-playbook prints them; `custom` is the data of
    `ansible.builtin.set_stats` (not per host), e.g. what a read-only playbook found on each host."""

    hosts: dict[str, dict[str, int]] = field(default_factory=dict)
    custom: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemChanged:
    """A loop item of a no_log task changed. ansible-runner replaces a no_log result with
    {'censored': ...}, dropping `changed`; only the item's display line still tells. The recorder
    marks the task's final (censored) result changed with it."""

    host: str
    task_uuid: str


@dataclass(frozen=True)
class StepProgress:
    """How far a long task is, from one retry of an `until` loop (runner_retry): the progress record
    a poll read (verify's benchmark: "benchmark: level 3 of 5 (C=30), rep 2 of 3"), else the
    attempt ("attempt 4 of 60")."""

    host: str
    task_uuid: str
    text: str
    attempt_only: bool = False  # no progress record: only the attempt count (not a plain line)
    created: datetime | None = None


Event = PlayStart | TaskStart | HostStart | HostResult | ItemChanged | Stats | Output | StepProgress
OUTPUT_EVENTS = ("verbose", "error", "warning", "deprecated", "debug", "system_warning")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is None else parsed.replace(tzinfo=None)


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def result_message(res: Any) -> str:
    """The human message of a task result: msg, else stderr/stdout, else the first of results[]."""
    if not isinstance(res, dict):
        return ""
    for key in ("msg", "reason", "stderr", "stdout", "module_stderr", "exception"):
        value = res.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value:
            return "\n".join(str(v) for v in value)
    results = res.get("results")
    if isinstance(results, list):
        for item in results:
            if isinstance(item, dict) and (item.get("failed") or item.get("unreachable")):
                return result_message(item)
    return ""


_OUTCOMES: dict[str, Outcome] = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def censored_changed(res: Any, stdout: Any) -> bool:
    """A no_log result (ansible-runner keeps only {'censored': ...}, not `changed`) that the
    callback's own line reports as `changed: [host]`."""
    if not isinstance(res, dict) or "censored" not in res or "changed" in res:
        return False
    return isinstance(stdout, str) and _ANSI.sub("", stdout).lstrip().startswith("changed:")


# Exported facts of the roles (their READMEs, "Exports") that say what a run deployed; none is a secret.
KEPT_FACTS = frozenset({
    "preflight_lab_mode", "preflight_gpu_count", "preflight_os", "sglang_stack_release_id",
    "sglang_stack_release_dir", "nccl_env_file", "nccl_env_profile_resolved", "sglang_service_unit_path",
    "sglang_service_will_start", "sglang_service_unit_state", "verify_verdict", "verify_results",
})  # fmt: skip
SERVICE_PROBE = "sglang_service_probe"  # sglang.deploy.sglang_service_probe


def kept_data(action: str, res: Any) -> dict[str, Any]:
    """The KEPT_FACTS of a result (verify_results: each layer's status and reason only), and the
    unit state of a service probe's answer."""
    if not isinstance(res, dict):
        return {}
    facts = res.get("ansible_facts")
    kept = {k: v for k, v in facts.items() if k in KEPT_FACTS} if isinstance(facts, dict) else {}
    layers = kept.get("verify_results")
    if isinstance(layers, dict):
        kept["verify_results"] = {
            str(name): {"status": str(r.get("status", "")), "reason": str(r.get("reason", ""))}
            for name, r in layers.items()
            if isinstance(r, dict)
        }
    probe = res.get("probe")
    if action.rsplit(".", 1)[-1] == SERVICE_PROBE and isinstance(probe, dict) and "active" in probe:
        kept["unit_active"] = str(probe.get("active"))
    unit = kept.pop("sglang_service_unit_state", None)
    if isinstance(unit, dict):  # systemd's answer after the service stage (roles/sglang_service run.yml)
        kept["unit_enabled"], kept["unit_active"] = str(unit.get("enabled")), str(unit.get("active"))
    return kept


def _host_result(kind: str, data: dict[str, Any], created: datetime | None, stdout: Any) -> HostResult:
    res = data.get("res")
    outcome = _OUTCOMES[kind]
    if outcome == "ok" and isinstance(res, dict) and (res.get("changed") or censored_changed(res, stdout)):
        outcome = "changed"
    if outcome == "failed" and data.get("ignore_errors"):
        outcome = "ignored"
    message = result_message(res) if outcome in ("failed", "ignored", "unreachable") else ""
    action = _str(data, "resolved_action") or _str(data, "task_action")
    return HostResult(
        host=_str(data, "host"),
        task_uuid=_str(data, "task_uuid"),
        task=_str(data, "task"),
        role=_str(data, "role"),
        action=action,
        outcome=outcome,
        message=message,
        start=parse_time(data.get("start")),
        end=parse_time(data.get("end")),
        created=created,
        detail=change_summary(res) if outcome == "changed" else "",
        kept=kept_data(action, res) if outcome in ("ok", "changed") else {},
    )


def _stats(data: dict[str, Any]) -> Stats:
    hosts: dict[str, dict[str, int]] = {}
    for key, ansible_key in (
        ("ok", "ok"),
        ("changed", "changed"),
        ("failed", "failures"),
        ("skipped", "skipped"),
        ("unreachable", "dark"),
        ("rescued", "rescued"),
        ("ignored", "ignored"),
    ):
        per_host = data.get(ansible_key)
        if not isinstance(per_host, dict):
            continue
        for host, count in per_host.items():
            hosts.setdefault(str(host), dict.fromkeys(COUNT_KEYS, 0))[key] = int(count)
    for host in data.get("processed", {}) or {}:
        hosts.setdefault(str(host), dict.fromkeys(COUNT_KEYS, 0))
    custom = data.get("artifact_data")
    return Stats(hosts=hosts, custom=custom if isinstance(custom, dict) else {})


PROGRESS_KIND = "sglang-deploy-progress"  # roles/verify/files/verify_bench.py's progress record
_PROGRESS_WHAT = frozenset({"benchmark"})


def _count(doc: dict[str, Any], key: str) -> int | None:
    value = doc.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**7 else None


def progress_text(doc: dict[str, Any]) -> str:
    """The line of a progress record (only its known fields, numbers only: host text is data)."""
    what = doc.get("what") if doc.get("what") in _PROGRESS_WHAT else "step"
    state = doc.get("state")
    run, runs, level = _count(doc, "run"), _count(doc, "runs"), _count(doc, "level")
    if state in ("done", "failed", "starting"):
        return f"{what}: {state}"
    if state != "running":
        return f"{what}: running"
    if run is None or level is None:
        return f"{what}: starting (loading the benchmark)"
    index, levels = _count(doc, "level_index"), _count(doc, "levels")
    rep, reps = _count(doc, "rep"), _count(doc, "reps")
    text = f"{what}: level {index} of {levels} (C={level})" if index and levels else f"{what}: C={level}"
    if rep is not None and reps is not None and reps > 1:
        text += f", rep {rep} of {reps}"
    if runs is not None and (levels is None or reps is None or runs != levels * reps):
        text += f", run {run} of {runs}"
    return text


def _retry(data: dict[str, Any], created: datetime | None) -> StepProgress | None:
    res = data.get("res")
    if not isinstance(res, dict):
        return None
    text = ""
    attempt_only = False
    content = res.get("content")
    if isinstance(content, str) and content:
        try:
            doc = json.loads(base64.b64decode(content, validate=True))
        except (binascii.Error, ValueError):
            doc = None
        if isinstance(doc, dict) and doc.get("kind") == PROGRESS_KIND:
            text = progress_text(doc)
    if not text:
        attempts, retries = _count(res, "attempts"), _count(res, "retries")
        if attempts is None:
            return None
        text = f"attempt {attempts}" + (f" of {retries}" if retries else "")
        attempt_only = True
    return StepProgress(
        host=_str(data, "host"),
        task_uuid=_str(data, "task_uuid"),
        text=text,
        attempt_only=attempt_only,
        created=created,
    )


def parse_event(raw: dict[str, Any]) -> Event | None:
    kind = raw.get("event")
    data = raw.get("event_data", {})
    if not isinstance(kind, str) or not isinstance(data, dict):
        return None
    created = parse_time(raw.get("created"))
    event: Event | None = None
    if kind in OUTPUT_EVENTS:
        text = raw.get("stdout")
        event = Output(kind=kind, text=text) if isinstance(text, str) and text.strip() else None
    elif kind == "playbook_on_play_start":
        event = PlayStart(name=_str(data, "play") or _str(data, "name"), created=created)
    elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
        event = TaskStart(
            uuid=_str(data, "task_uuid"),
            name=_str(data, "task") or _str(data, "name"),
            role=_str(data, "role"),
            action=_str(data, "resolved_action") or _str(data, "task_action"),
            created=created,
        )
    elif kind == "runner_on_start":
        event = HostStart(host=_str(data, "host"), task_uuid=_str(data, "task_uuid"), created=created)
    elif kind in _OUTCOMES:
        event = _host_result(kind, data, created, raw.get("stdout"))
    elif kind == "runner_item_on_ok" and censored_changed(data.get("res"), raw.get("stdout")):
        event = ItemChanged(host=_str(data, "host"), task_uuid=_str(data, "task_uuid"))
    elif kind == "playbook_on_stats":
        event = _stats(data)
    elif kind == "runner_retry":
        event = _retry(data, created)
    return event


@dataclass
class CensoredLoops:
    """Folds `ItemChanged` into the task's final result: a no_log loop with a changed item is
    changed (the final event of a loop prints no line of its own, so only its items tell)."""

    changed: set[tuple[str, str]] = field(default_factory=set)

    def fold(self, event: Event | None) -> Event | None:
        if isinstance(event, ItemChanged):
            self.changed.add((event.host, event.task_uuid))
            return None
        key = (event.host, event.task_uuid) if isinstance(event, HostResult) else None
        if isinstance(event, HostResult) and event.outcome == "ok" and key in self.changed:
            self.changed.discard((event.host, event.task_uuid))
            return replace(event, outcome="changed", detail=change_summary({"censored": True}))
        return event
