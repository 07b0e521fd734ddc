"""Run reports: the summary JSON (per host counts, per role elapsed, failed tasks) and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .events import COUNT_KEYS, Event, HostResult, Output, PlayStart, Stats, TaskStart, is_notable

SCHEMA_VERSION = 1
# The CLI's exit code (up, verify) when ansible-playbook succeeded but a host's verify verdict is
# "ungated": its benchmark had no comparable baseline and none was recorded (verify_record_baseline
# false, verify_require_gate false). Never 0: an ungated run is not a passed one.
UNGATED_RC = 6
# ... and when a host's verdict is "inconclusive" (the same-window pair neither passed nor failed at its
# cap of repetitions; issue 34) and the run failed on nothing else: never 0, and distinct from a failure.
INCONCLUSIVE_RC = 7
MAX_MESSAGE = 4000
NO_ROLE = "(play)"
OUTPUT_TAIL = 30
PROGRESS_MIN_S = 5.0  # a task shorter than this needs no "how long last time"


@dataclass
class _Task:
    start: TaskStart
    first: datetime | None = None
    last: datetime | None = None


@dataclass
class RunRecorder:
    """Folds the typed event stream of one run into what the reports need."""

    redact: Callable[[str], str] = field(default=lambda text: text)
    results: list[HostResult] = field(default_factory=list)
    stats: Stats | None = None
    tasks: dict[str, _Task] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)
    playing: bool = False
    # every task start, batches of a `serial` play included (a task repeats once per batch): what the
    # progress display of the next run counts towards ("task 84 of ~148")
    task_starts: int = 0

    def feed(self, event: Event) -> None:
        if isinstance(event, TaskStart):
            self.tasks.setdefault(event.uuid, _Task(event))
            self.task_starts += 1
        elif isinstance(event, HostResult):
            self.results.append(event)
            task = self.tasks.get(event.task_uuid)
            if task is not None:
                if event.start and (task.first is None or event.start < task.first):
                    task.first = event.start
                if event.end and (task.last is None or event.end > task.last):
                    task.last = event.end
        elif isinstance(event, Stats):
            self.stats = event
        elif isinstance(event, PlayStart):
            self.playing = True
        elif isinstance(event, Output) and (
            not self.playing or event.kind != "verbose" or is_notable(event.text)
        ):
            # before the first play: why the playbook did not start; later only errors and warnings
            self.output.append(event.text)
            del self.output[:-OUTPUT_TAIL]

    def host_counts(self) -> dict[str, dict[str, int]]:
        if self.stats is not None and self.stats.hosts:
            return {host: dict(counts) for host, counts in sorted(self.stats.hosts.items())}
        # No recap (the run died early): count what we saw, the way the recap counts.
        counts: dict[str, dict[str, int]] = {}
        for result in self.results:
            host = counts.setdefault(result.host, dict.fromkeys(COUNT_KEYS, 0))
            if result.outcome == "changed":
                host["ok"] += 1
            host[result.outcome] += 1
        return dict(sorted(counts.items()))

    def role_elapsed(self) -> dict[str, dict[str, float | int]]:
        roles: dict[str, dict[str, float | int]] = {}
        for task in self.tasks.values():
            entry = roles.setdefault(task.start.role or NO_ROLE, {"elapsed_s": 0.0, "tasks": 0})
            entry["tasks"] = int(entry["tasks"]) + 1
            if task.first is not None and task.last is not None:
                elapsed = max(0.0, (task.last - task.first).total_seconds())
                entry["elapsed_s"] = round(float(entry["elapsed_s"]) + elapsed, 3)
        return roles

    def task_seconds(self) -> dict[str, float]:
        """The longest one host took for each task (by label), for tasks of PROGRESS_MIN_S or more:
        what the next run's progress display shows as "of ~N last run"."""
        longest: dict[str, float] = {}
        for result in self.results:
            if result.duration >= PROGRESS_MIN_S:
                longest[result.label] = max(longest.get(result.label, 0.0), round(result.duration, 1))
        return longest

    def failed_tasks(self) -> list[dict[str, str]]:
        return [
            {
                "host": r.host,
                "task": r.task,
                "role": r.role,
                "action": r.action,
                "outcome": r.outcome,
                "message": self.redact(r.message)[:MAX_MESSAGE],
            }
            for r in self.results
            if r.outcome in ("failed", "unreachable")
        ]

    def changed_tasks(self) -> list[dict[str, str]]:
        """Every changed result (in check mode: what would change, i.e. drift) with its summary."""
        return [
            {
                "host": r.host,
                "task": r.task,
                "role": r.role,
                "action": r.action,
                "detail": self.redact(r.detail)[:MAX_MESSAGE],
            }
            for r in self.results
            if r.outcome == "changed"
        ]

    def deployed(self) -> dict[str, dict[str, Any]]:
        """Per host, what the run left there, from the facts its roles exported and the unit state the
        service probe read (events.KEPT_FACTS; the last value of each wins): see DEPLOYED_KEYS."""
        facts: dict[str, dict[str, Any]] = {}
        for result in self.results:
            if result.kept:
                facts.setdefault(result.host, {}).update(result.kept)
        return {host: _deployed(host_facts) for host, host_facts in sorted(facts.items())}

    def stats_data(self) -> dict[str, Any]:
        """What the playbook handed over with ansible.builtin.set_stats (already redacted)."""
        return dict(self.stats.custom) if self.stats is not None else {}

    def summary(
        self, *, rc: int, status: str, started: datetime, finished: datetime, meta: dict[str, Any]
    ) -> dict[str, Any]:
        hosts: dict[str, Any] = {}
        for host, counts in self.host_counts().items():
            state = "unreachable" if counts["unreachable"] else "failed" if counts["failed"] else "ok"
            hosts[host] = {**counts, "status": state}
        return {
            "schema": SCHEMA_VERSION,
            **meta,
            "status": status,
            "rc": rc,
            "started": started.isoformat(timespec="seconds"),
            "finished": finished.isoformat(timespec="seconds"),
            "duration_s": round((finished - started).total_seconds(), 3),
            "hosts": hosts,
            "roles": self.role_elapsed(),
            "task_starts": self.task_starts,
            "task_seconds": self.task_seconds(),
            "failed_tasks": self.failed_tasks(),
            "changed_tasks": self.changed_tasks(),
            "stats_data": self.stats_data(),
            "deployed": self.deployed(),
            # what ansible printed outside task results (e.g. why a playbook did not even start)
            "output_tail": [self.redact(line) for line in self.output] if rc != 0 else [],
        }

    def junit(self, suite_name: str, *, changed_is_failure: bool = False) -> ET.ElementTree[ET.Element]:
        """One testsuite per host, one testcase per task on that host. With changed_is_failure (a
        drift check: check mode on a converged host), a changed task is a failure of type "drift"."""
        root = ET.Element("testsuites", name=suite_name)
        per_host: dict[str, list[HostResult]] = {}
        for result in self.results:
            per_host.setdefault(result.host, []).append(result)
        totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        total_time = 0.0
        for host, results in sorted(per_host.items()):
            suite = ET.SubElement(root, "testsuite", name=host)
            counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
            suite_time = 0.0
            for r in results:
                case = ET.SubElement(
                    suite,
                    "testcase",
                    classname=f"{suite_name}.{host}",
                    name=r.label,
                    time=f"{r.duration:.3f}",
                )
                counts["tests"] += 1
                suite_time += r.duration
                message = self.redact(r.message)[:MAX_MESSAGE]
                if r.outcome == "failed":
                    counts["failures"] += 1
                    ET.SubElement(
                        case,
                        "failure",
                        message=message.splitlines()[0] if message else "failed",
                        type=r.action or "failed",
                    ).text = message
                elif r.outcome == "unreachable":
                    counts["errors"] += 1
                    ET.SubElement(
                        case, "error", message=message or "unreachable", type="unreachable"
                    ).text = message
                elif r.outcome == "skipped":
                    counts["skipped"] += 1
                    ET.SubElement(case, "skipped")
                elif r.outcome == "ignored":
                    ET.SubElement(case, "system-out").text = f"failed (ignored): {message}"
                elif r.outcome == "changed" and changed_is_failure:
                    counts["failures"] += 1
                    detail = self.redact(r.detail)[:MAX_MESSAGE]
                    first = detail.splitlines()[0] if detail else "would change"
                    ET.SubElement(case, "failure", message=f"drift: {first}", type="drift").text = (
                        detail or "the task would change the host (check mode)"
                    )
                elif r.outcome == "changed":
                    ET.SubElement(case, "system-out").text = "changed"
            for key, value in counts.items():
                suite.set(key, str(value))
                totals[key] += value
            suite.set("time", f"{suite_time:.3f}")
            total_time += suite_time
        for key, value in totals.items():
            root.set(key, str(value))
        root.set("time", f"{total_time:.3f}")
        ET.indent(root)
        return ET.ElementTree(root)


# summary.json "deployed": per host, key -> the exported fact it comes from (None where the run set none)
DEPLOYED_KEYS = {
    "lab_mode": "preflight_lab_mode",
    "gpu_count": "preflight_gpu_count",
    "os": "preflight_os",
    "release_id": "sglang_stack_release_id",
    "release_dir": "sglang_stack_release_dir",
    "unit_path": "sglang_service_unit_path",
    "unit_will_start": "sglang_service_will_start",
    "unit_enabled": "unit_enabled",
    "unit_active": "unit_active",
    "nccl_env_file": "nccl_env_file",
    "nccl_profile": "nccl_env_profile_resolved",
    "verdict": "verify_verdict",
    "verify_layers": "verify_results",
}


def _deployed(facts: dict[str, Any]) -> dict[str, Any]:
    return {key: facts.get(fact) for key, fact in DEPLOYED_KEYS.items()}


def write_reports(
    recorder: RunRecorder,
    summary: dict[str, Any],
    directories: list[Path],
    *,
    changed_is_failure: bool = False,
) -> None:
    """Write summary.json and junit.xml into each directory (the latest + the per-run copy)."""
    tree = recorder.junit(str(summary.get("playbook", "ansible")), changed_is_failure=changed_is_failure)
    text = json.dumps(summary, indent=2, sort_keys=False) + "\n"
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "summary.json").write_text(text, encoding="utf-8")
        tree.write(directory / "junit.xml", encoding="utf-8", xml_declaration=True)


def ungated_hosts(summary: dict[str, Any]) -> list[str]:
    """Hosts whose verify verdict (the role's set_stats ``verify_verdicts``) is ``ungated``."""
    verdicts = (summary.get("stats_data") or {}).get("verify_verdicts") or {}
    if not isinstance(verdicts, dict):
        return []
    return sorted(str(host) for host, status in verdicts.items() if status == "ungated")


def inconclusive_hosts(summary: dict[str, Any]) -> list[str]:
    """Hosts whose verify verdict is ``inconclusive`` (the same-window pair at its cap)."""
    verdicts = (summary.get("stats_data") or {}).get("verify_verdicts") or {}
    if not isinstance(verdicts, dict):
        return []
    return sorted(str(host) for host, status in verdicts.items() if status == "inconclusive")


def verdict_rc(rc: int, summary: dict[str, Any]) -> int:
    """ansible-playbook's status; INCONCLUSIVE_RC when every host that failed (the play fails an
    inconclusive verdict) has an inconclusive verdict and none is unreachable; UNGATED_RC when it was 0
    and a host's verdict is ungated."""
    inconclusive = inconclusive_hosts(summary)
    if inconclusive and rc in (0, 2):
        hosts = summary.get("hosts") or {}
        failing = {
            str(host)
            for host, counts in hosts.items()
            if isinstance(counts, dict) and (counts.get("failed") or counts.get("unreachable"))
        }
        if failing <= set(inconclusive):
            return INCONCLUSIVE_RC
    return UNGATED_RC if rc == 0 and ungated_hosts(summary) else rc


Line = tuple[str, str | None]  # a closing line and its rich style (None: plain)
NEXT_COMMANDS = (
    ("drift", "check mode: what would change, exit 2 on drift"),
    ("verify", "the verify layers again, report.md under artifacts/verify/"),
    ("releases", "each host's releases and which one is current"),
)


LAB_DEMO = "make demo"
LAB_DEMO_WHY = (
    "no GPU here: the whole job on the lab host with a named TEST DOUBLE of SGLang "
    "(sglang-deploy lab demo: a gated benchmark, its chart, a rollback)"
)


def up_closing(summary: dict[str, Any], inventory: str) -> list[Line]:
    """The closing block of a successful `up`: what was deployed where, what a host could not do (no
    GPU: what was not started, which verify layers were skipped and why, the benchmark and gate) and
    the next commands with the inventory flag they need. Every statement comes from the run's
    `deployed` facts (summary.json); what the run did not report is printed as unknown."""
    deployed: dict[str, Any] = summary.get("deployed") or {}
    if not deployed:
        return [("deployed: the run reported no deployment facts (see summary.json)", "bold")]
    lines: list[Line] = [("deployed:", "bold")]
    limits: list[str] = []
    for host, state in deployed.items():
        unit_path = str(state.get("unit_path") or "")
        unit = Path(unit_path).name or "(unit unknown)"
        release = state.get("release_id") or "unknown"
        nccl = state.get("nccl_env_file") or "unknown"
        verdict = state.get("verdict")
        verdict_text = (
            f"{verdict.get('status')}: {verdict.get('reason')}" if isinstance(verdict, dict) else "none"
        )
        lines += [
            (f"  {host}: release {release} ({state.get('release_dir') or '-'})", None),
            (f"    unit {unit} ({unit_path or '-'}): {_unit_state(state)}", None),
            (f"    NCCL env {nccl} (profile {state.get('nccl_profile') or '-'})", None),
            (f"    verify verdict: {verdict_text}", None),
        ]
        limits += _host_limits(host, state)
    if limits:
        lines.append(("what could not be done here:", "bold"))
        lines += [(line, None) for line in limits]
    lines.append(("next:", "bold"))
    lines += [(f"  sglang-deploy {cmd} -i {inventory}    # {why}", None) for cmd, why in NEXT_COMMANDS]
    if any(isinstance(state, dict) and state.get("lab_mode") is True for state in deployed.values()):
        lines.append((f"  {LAB_DEMO}    # {LAB_DEMO_WHY}", None))
    return lines


def _unit_state(state: dict[str, Any]) -> str:
    return (
        f"{state.get('unit_enabled') or 'enablement unknown'}, {state.get('unit_active') or 'state unknown'}"
    )


def _host_limits(host: str, state: dict[str, Any]) -> list[str]:
    """What the run says this host did not do: the unit not started, the skipped verify layers (with
    the role's own reasons), no benchmark and gate. Nothing for a host on which all of it ran."""
    out: list[str] = []
    why = "no GPU (lab mode): " if state.get("lab_mode") is True else ""
    if state.get("unit_will_start") is False:
        started = (
            "not started" if state.get("unit_active") != "active" else "running (not started by this run)"
        )
        out.append(f"  {host}: {why}unit installed ({_unit_state(state)}), {started}")
    layers: dict[str, Any] = state.get("verify_layers") or {}
    by_reason: dict[str, list[str]] = {}
    for name, result in layers.items():
        if isinstance(result, dict) and result.get("status") == "skipped":
            by_reason.setdefault(str(result.get("reason", "")), []).append(str(name))
    out += [f"  {host}: verify {', '.join(names)} skipped: {reason}" for reason, names in by_reason.items()]
    verdict = state.get("verdict")
    if layers and "bench" not in layers and isinstance(verdict, dict):
        out.append(
            f"  {host}: benchmark and gate not run: verdict {verdict.get('status')}: {verdict.get('reason')}"
        )
    return out
