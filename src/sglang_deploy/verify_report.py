"""The report of `sglang-deploy verify`: per host, what the verify role fetched (verify-results.json,
production_v2.md, the benchmark's JSONL), rendered as one Markdown file and one PNG chart per host
(output tok/s against concurrency: this run, the baseline it was gated against, and the run after a
rollback when there was one).

The role scrubs the API key from everything it writes; the Markdown goes through the pattern
redactor once more before it is written."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from .host_history import report_section
from .redact import Redactor

RESULTS_NAME = "verify-results.json"
DOC_NAME = "production_v2.md"
LAYERS = (
    ("gpu", "1 GPU"),
    ("cuda", "2 CUDA"),
    ("torch", "3 torch"),
    ("nccl", "4 NCCL"),
    ("http", "5 HTTP"),
    ("bench", "6 benchmark"),
    ("bench_confirm", "6 benchmark (confirmation)"),
    ("gate", "7 gate"),
    ("speculation", "7 speculation"),
    ("startup", "7 start-up"),
    ("rollback", "8 rollback"),
    ("http_after_rollback", "5 HTTP (after rollback)"),
    ("bench_after_rollback", "6 benchmark (after rollback)"),
    ("bench_after_rollback_confirm", "6 benchmark (confirmation, after rollback)"),
    ("gate_after_rollback", "7 gate (after rollback)"),
)
Series = list[tuple[int, float]]


@dataclass
class HostResults:
    host: str
    data: dict[str, Any]
    results_file: Path
    doc_file: Path | None = None
    bench_files: list[Path] = field(default_factory=list)

    @property
    def results(self) -> dict[str, Any]:
        value = self.data.get("results")
        return value if isinstance(value, dict) else {}


def collect(fetch_dir: Path) -> dict[str, HostResults]:
    """What ansible.builtin.fetch (flat: false) put under fetch_dir/<host>/<path on the host>."""
    found: dict[str, HostResults] = {}
    if not fetch_dir.is_dir():
        return found
    for host_dir in sorted(p for p in fetch_dir.iterdir() if p.is_dir()):
        files = sorted(p for p in host_dir.rglob("*") if p.is_file())
        results = [p for p in files if p.name == RESULTS_NAME]
        if not results:
            continue
        try:
            data = json.loads(results[0].read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        docs = [p for p in files if p.name == DOC_NAME]
        bench = [p for p in files if p.suffix in (".jsonl", ".log")]
        found[host_dir.name] = HostResults(
            host_dir.name,
            data if isinstance(data, dict) else {},
            results[0],
            docs[0] if docs else None,
            bench,
        )
    return found


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _levels(bench: Any) -> Series:
    if not isinstance(bench, dict):
        return []
    points: Series = []
    for item in bench.get("levels") or []:
        if not isinstance(item, dict):
            continue
        tps = _num(item.get("output_tps"))
        if tps is not None and item.get("level") is not None:
            points.append((int(item["level"]), tps))
    return sorted(points)


def _baseline(gate: Any) -> Series:
    if not isinstance(gate, dict):
        return []
    table = (gate.get("baseline") or {}).get("table") if isinstance(gate.get("baseline"), dict) else None
    points: dict[int, float] = {}
    if isinstance(table, dict):
        for level, value in table.items():
            number = _num(value)
            if number is not None:
                points[int(level)] = number
    for row in gate.get("rows") or []:
        expected = _num(row.get("expected")) if isinstance(row, dict) else None
        if expected is not None:
            points.setdefault(int(row["level"]), expected)
    return sorted(points.items())


def _same_window_lines(gate: dict[str, Any], capacity: Any) -> list[str]:
    """What decided the gate (the same-window pair or the stored baseline); for the pair, its rule, the
    seed of both arms' orders and the capacity control (issue 34). In the table above, "baseline" is arm
    A's median and the margin is the one-sided bound's distance from the allowed shortfall."""
    lines = [f"Compared with: {_cell(gate.get('decided_by'))}", ""] if gate.get("decided_by") else []
    if gate.get("mode") != "same_window":
        return lines
    bounds = ", ".join(
        f"C={row.get('level')}: B/A {_fmt(row.get('delta_pct'), signed=True)}, bound "
        f"{_fmt(row.get('lower_pct'), signed=True)}, {row.get('pairs')} pairs"
        for row in gate.get("rows") or []
        if isinstance(row, dict)
    )
    lines += [
        f"Same window: arm A (the serving release, before the change) against arm B (this run), paired by "
        f"repetition, one-sided {100 * (1 - float(gate.get('alpha') or 0.05)):g} % bounds of B/A, Holm "
        f"across levels, allowed shortfall {_fmt(gate.get('shortfall_pct'))} %, cap "
        f"{_cell(gate.get('max_pairs'))} pairs, seed {_cell(gate.get('seed'))}: {_cell(bounds or '-')}.",
        "",
    ]
    calibration = gate.get("calibration")
    if isinstance(calibration, dict) and calibration.get("false_alarm_rate") is not None:
        lines += [
            f"Calibration (A/A, {_cell(calibration.get('recorded_at'))}): measured false-alarm rate "
            f"{_fmt(float(calibration['false_alarm_rate']) * 100.0)} %, "
            f"{_cell(calibration.get('repetitions'))} repetition(s) per arm for 95 % power against a "
            f"{_fmt(calibration.get('detect_pct'))} % regression.",
            "",
        ]
        needed, cap = calibration.get("pairs_needed", 0), gate.get("max_pairs")
        if isinstance(cap, int) and (needed is None or (isinstance(needed, int) and needed > cap)):
            power = calibration.get("power_at_cap")
            lines += [
                f"**The cap of {cap} pairs is below what this host's spread needs for 95 % power** "
                f"(power at the cap {_fmt(float(power) * 100.0) if power is not None else '-'} %): "
                + (
                    f"set verify_same_window_max_repetitions to {needed}."
                    if needed is not None
                    else "the host is too noisy for the pair at any cap up to 64 pairs."
                ),
                "",
            ]
    if isinstance(capacity, dict) and capacity.get("status"):
        lines += [f"Capacity: {_cell(capacity.get('status'))} - {_cell(capacity.get('reason'))}", ""]
    return lines


def throughput_series(results: dict[str, Any]) -> dict[str, Series]:
    """The chart's lines: this run, the baseline (when one applied), the run after a rollback."""
    series = {
        "this run": _levels(results.get("bench")),
        "baseline": _baseline(results.get("gate")),
        "after rollback": _levels(results.get("bench_after_rollback")),
    }
    return {name: points for name, points in series.items() if points}


def render_chart(host: str, series: dict[str, Series], path: Path, *, test_double: bool = False) -> bool:
    """A PNG of output tok/s against concurrency; False (nothing written) without any measurement.
    test_double: the host's unit ran a test double (the production document's note): the title says so."""
    if not series.get("this run") and not series.get("after rollback"):
        return False
    fig = Figure(figsize=(7.0, 4.2), dpi=110)
    ax = fig.subplots()
    styles = {"this run": ("o-", "C0"), "baseline": ("s--", "C7"), "after rollback": ("^-", "C3")}
    levels: set[int] = set()
    for name, points in series.items():
        marker, color = styles.get(name, ("o-", None))
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        levels.update(xs)
        ax.plot(xs, ys, marker, color=color, label=name)
        if name == "baseline":
            continue  # its values are in the report's table; labels would sit on this run's
        offset = (0, 6) if name == "this run" else (0, -12)
        for x, y in points:
            ax.annotate(
                f"{y:.0f}", (x, y), textcoords="offset points", xytext=offset, ha="center", fontsize=7
            )
    if len(levels) > 1 and min(levels) > 0 and max(levels) / min(levels) >= 10:
        ax.set_xscale("log")
    ax.set_xticks(sorted(levels), labels=[str(level) for level in sorted(levels)])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("output tokens/s")
    title = f"{host}: output throughput, this run vs baseline"
    ax.set_title(
        f"{title}\n{CHART_DOUBLE_NOTE}" if test_double else title, fontsize=10 if test_double else None
    )
    ax.grid(True, alpha=0.3)
    top = max(y for points in series.values() for _x, y in points)
    ax.set_ylim(bottom=0, top=top * 1.12 if top > 0 else 1.0)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path.is_file() and path.stat().st_size > 0


def _cell(text: Any) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def _fmt(value: Any, signed: bool = False) -> str:
    number = _num(value)
    if number is None:
        return "-"
    return f"{number:+.1f}%" if signed else f"{number:.1f}"


TEST_DOUBLE_NOTE = "> **Test double, not SGLang**"
CHART_DOUBLE_NOTE = "TEST DOUBLE, not SGLang: the unit ran a test double (no GPU)"


def test_double_note(doc_file: Path | None) -> list[str]:
    """The production document's note that the unit runs a test double (its quoted lines), if any:
    the report repeats it, so no figure of a double passes for SGLang's."""
    if doc_file is None or not doc_file.is_file():
        return []
    lines = doc_file.read_text(encoding="utf-8", errors="replace").splitlines()
    for start, line in enumerate(lines):
        if line.startswith(TEST_DOUBLE_NOTE):
            end = start
            while end < len(lines) and lines[end].startswith(">"):
                end += 1
            return [*lines[start:end], ""]
    return []


def _host_section(entry: HostResults, chart: Path | None, base: Path) -> list[str]:
    data, results = entry.data, entry.results
    lines = [
        f"## {entry.host}",
        "",
        *test_double_note(entry.doc_file),
        f"- status: **{_cell(data.get('status'))}**",
        f"- preset: {_cell(data.get('preset'))}",
        f"- release: {_cell(data.get('release_id'))} (current: {_cell(data.get('current_release_id'))})",
        f"- generated on the host: {_cell(data.get('generated_at'))}",
        "",
        "| layer | status | reason |",
        "|---|---|---|",
    ]
    for key, title in LAYERS:
        layer = results.get(key)
        if isinstance(layer, dict):
            lines.append(f"| {title} | {_cell(layer.get('status'))} | {_cell(layer.get('reason'))} |")
    lines.append("")
    gate = results.get("gate_after_rollback") or results.get("gate")
    if isinstance(gate, dict) and gate.get("rows"):
        lines += [
            "### Output tok/s per concurrency level",
            "",
            "| concurrency | measured | baseline | delta | allowed | margin | verdict |",
            "|---:|---:|---:|---:|---:|---:|---|",
        ]
        for row in gate["rows"]:
            allowed = row.get("allowed_pct")
            lines.append(
                f"| {row.get('level')} | {_fmt(row.get('measured'))} | {_fmt(row.get('expected'))} "
                f"| {_fmt(row.get('delta_pct'), signed=True)} "
                f"| {'-' if allowed is None else '-' + _fmt(allowed) + '%'} "
                f"| {_fmt(row.get('margin_pct'), signed=True)} | {_cell(row.get('verdict'))} |"
            )
        baseline_value = gate.get("baseline")
        baseline: dict[str, Any] = baseline_value if isinstance(baseline_value, dict) else {}
        lines += ["", f"Baseline: {_cell(baseline.get('source'))} - {_cell(baseline.get('reason'))}", ""]
        lines += _same_window_lines(gate, results.get("capacity"))
        mode = gate.get("prompts_mode")
        if mode:
            per_level = gate.get("prompts_per_level") or {}
            prompts = ", ".join(f"C={k}: {v}" for k, v in per_level.items())
            lines += [
                f"Gate: {_cell(gate.get('status'))} - {_cell(gate.get('reason'))}",
                "",
                f"Workload: prompts mode {_cell(mode)} ({_cell(prompts or '-')} prompts per level), "
                f"{_cell(gate.get('repetitions'))} repetition(s) per level.",
                "",
            ]
    verdict = data.get("verdict")
    if isinstance(verdict, dict) and verdict.get("status"):
        lines += [f"Verdict: **{_cell(verdict.get('status'))}** - {_cell(verdict.get('reason'))}", ""]
    if chart is not None:
        lines += [f"![output tok/s against concurrency]({chart.relative_to(base).as_posix()})", ""]
    else:
        lines += ["No benchmark figures in this run (layer 6 did not run): no chart.", ""]
    files = [entry.results_file, *([entry.doc_file] if entry.doc_file else []), *entry.bench_files]
    lines += ["Files fetched from the host:", ""]
    lines += [f"- [{p.name}]({p.relative_to(base).as_posix()})" for p in files]
    lines.append("")
    return lines


def render_markdown(
    hosts: dict[str, HostResults],
    charts: dict[str, Path],
    base: Path,
    meta: dict[str, Any],
    missing: dict[str, str],
) -> str:
    """The whole report; paths are linked relative to `base` (the report's directory)."""
    lines = [
        f"# Verify report - run {meta.get('run_id', '-')}",
        "",
        f"`{meta.get('playbook', 'playbooks/verify.yml')}` on `{meta.get('inventory', '-')}`, "
        f"ansible-playbook rc={meta.get('rc', '-')}, {meta.get('finished', '')}",
        "",
        "| host | verify status | release | gate |",
        "|---|---|---|---|",
    ]
    for name, entry in sorted(hosts.items()):
        gate = entry.results.get("gate_after_rollback") or entry.results.get("gate") or {}
        gate_text = gate.get("status", "-") if isinstance(gate, dict) else "-"
        lines.append(
            f"| {name} | {_cell(entry.data.get('status'))} | {_cell(entry.data.get('current_release_id'))} "
            f"| {_cell(gate_text)} |"
        )
    for name in sorted(missing):
        lines.append(f"| {name} | no results fetched | - | - |")
    lines.append("")
    for name, why in sorted(missing.items()):
        lines += [f"## {name}", "", f"No verify-results.json was fetched: {why}", ""]
    for name, entry in sorted(hosts.items()):
        lines += _host_section(entry, charts.get(name), base)
    lines += report_section(hosts, meta.get("history_dir"))
    return Redactor()("\n".join(lines).rstrip() + "\n")


def build_report(
    fetch_dir: Path,
    out_dir: Path,
    meta: dict[str, Any],
    expected_hosts: list[str],
    why_missing: dict[str, str],
) -> dict[str, Any]:
    """Collect, chart, write report.md; returns what was written (for --json and the closing lines)."""
    hosts = collect(fetch_dir)
    charts: dict[str, Path] = {}
    for name, entry in hosts.items():
        path = out_dir / f"throughput-{name}.png"
        double = bool(test_double_note(entry.doc_file))
        if render_chart(name, throughput_series(entry.results), path, test_double=double):
            charts[name] = path
    missing = {
        host: why_missing.get(
            host, "the role did not write it (layers 6-9 did not run, or the play failed first)"
        )
        for host in expected_hosts
        if host not in hosts
    }
    report = out_dir / "report.md"
    out_dir.mkdir(parents=True, exist_ok=True)
    report.write_text(render_markdown(hosts, charts, out_dir, meta, missing), encoding="utf-8")
    return {
        "report": str(report),
        "charts": {name: str(path) for name, path in charts.items()},
        "hosts": {
            name: {
                "status": entry.data.get("status"),
                "release_id": entry.data.get("current_release_id"),
                "gate": (entry.results.get("gate_after_rollback") or entry.results.get("gate") or {}).get(
                    "status"
                ),
                "series": throughput_series(entry.results),
                "files": [
                    str(p) for p in [entry.results_file, *([entry.doc_file] if entry.doc_file else [])]
                ],
            }
            for name, entry in sorted(hosts.items())
        },
        "missing": missing,
    }
