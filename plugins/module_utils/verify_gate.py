"""The verify role's performance gate (layer 7) and the benchmark summary it reads (layer 6).

Pure Python, no Ansible import: the filters ``sglang.deploy.verify_*`` (plugins/filter/verify.py) call
it on the controller and ``tests/test_verify_gate.py`` tests it.

* :func:`summarize_level` turns one ``sglang.bench_serving`` JSONL result into the figures verify keeps
  (output tok/s, TTFT and ITL p50/p99, accept length, errors).
* :func:`select_baseline` picks the baseline that applies to THIS host: a baseline the user recorded
  for this host and preset, else the seed's table when the host's GPUs are the seed's hardware, else
  none (then the run is recorded, not gated, and says so).
* :func:`gate` compares each level that has a baseline value with a tolerance; levels without one are
  recorded, not gated; :func:`gate_table` prints level / expected / measured / delta.
"""

from __future__ import annotations

import math
import re
from typing import Any

_FIGURES = {
    "output_tps": "output_throughput",
    "ttft_p50_ms": "median_ttft_ms",
    "ttft_p99_ms": "p99_ttft_ms",
    "ttft_mean_ms": "mean_ttft_ms",
    "itl_p50_ms": "median_itl_ms",
    "itl_p99_ms": "p99_itl_ms",
    "itl_mean_ms": "mean_itl_ms",
    "e2e_p50_ms": "median_e2e_latency_ms",
    "request_tps": "request_throughput",
    "duration_s": "duration",
}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def summarize_level(level: int, result: dict[str, Any] | None, num_prompts: int) -> dict[str, Any]:
    """The figures of one concurrency level from bench_serving's result (None: it wrote none)."""
    if not result:
        return {
            "level": int(level),
            "completed": 0,
            "errors": int(num_prompts),
            "output_tps": None,
            "accept_length": None,
            "ok": False,
        }
    summary: dict[str, Any] = {"level": int(level)}
    for name, key in _FIGURES.items():
        value = _num(result.get(key))
        summary[name] = round(value, 3) if value is not None else None
    completed = int(result.get("completed") or 0)
    summary["completed"] = completed
    summary["errors"] = max(int(num_prompts) - completed, 0)
    accept = _num(result.get("accept_length"))
    summary["accept_length"] = round(accept, 3) if accept is not None else None
    summary["total_output_tokens"] = int(result.get("total_output_tokens") or 0)
    summary["ok"] = summary["errors"] == 0 and summary["output_tps"] is not None
    return summary


def _levels_table(table: Any) -> dict[int, float | None]:
    out: dict[int, float | None] = {}
    if not isinstance(table, dict):
        return out
    for level, value in table.items():
        try:
            key = int(level)
        except (TypeError, ValueError):
            continue
        out[key] = _num(value)
    return out


def seed_hardware_matches(
    gpu_names: list[str], gpu_count: int, tp_size: int, match: dict[str, Any]
) -> tuple[bool, str]:
    """Whether this host is the seed's hardware (``match``: gpu_count, tp_size, gpu_name_regex)."""
    want_count = int(match.get("gpu_count", 0))
    want_tp = int(match.get("tp_size", want_count))
    regex = str(match.get("gpu_name_regex", ""))
    if int(gpu_count) != want_count:
        return False, f"{gpu_count} GPU(s), the seed's table is for {want_count}"
    if int(tp_size) != want_tp:
        return False, f"tp {tp_size}, the seed's table is for tp {want_tp}"
    odd = [name for name in gpu_names if not re.search(regex, name)]
    if odd or not gpu_names:
        return False, f"GPU {odd[0] if odd else '(none)'} is not the seed's /{regex}/"
    return True, "the seed's hardware"


def describe_hardware(gpu_names: list[str], gpu_count: int, tp_size: int) -> str:
    """'2x NVIDIA H200, tp 2' / 'no GPU (lab mode), tp 1'."""
    if int(gpu_count) == 0 or not gpu_names:
        return f"no GPU (lab mode), tp {tp_size}"
    names = sorted(set(gpu_names))
    return f"{gpu_count}x {' + '.join(names)}, tp {tp_size}"


def select_baseline(
    preset: str,
    *,
    recorded: dict[str, Any] | None,
    recorded_meta: dict[str, Any] | None,
    seed_table: dict[str, Any] | None,
    seed_hardware: str,
    seed_match: dict[str, Any],
    gpu_names: list[str],
    gpu_count: int,
    tp_size: int,
) -> dict[str, Any]:
    """The baseline that applies to this host and preset.

    Returns ``{source: recorded|seed|none, table: {level: tok/s or None}, hardware, reason}``. A
    recorded baseline (``verify_baseline_output_tps`` of this host's inventory) wins: it was measured
    on this very host. The seed's table applies only to the seed's hardware.
    """
    here = describe_hardware(gpu_names, gpu_count, tp_size)
    mine = _levels_table((recorded or {}).get(preset))
    if any(value is not None for value in mine.values()):
        meta = recorded_meta or {}
        return {
            "source": "recorded",
            "table": mine,
            "hardware": str(meta.get("hardware") or here),
            "reason": f"recorded on this host ({meta.get('recorded_at', 'time unknown')}, "
            f"release {meta.get('release_id', 'unknown')})",
        }
    matches, why = seed_hardware_matches(gpu_names, gpu_count, tp_size, seed_match)
    seed = _levels_table((seed_table or {}).get(preset))
    if matches and any(value is not None for value in seed.values()):
        return {"source": "seed", "table": seed, "hardware": seed_hardware, "reason": "the seed's table"}
    if matches:
        why = f"the seed's table has no row for preset {preset}"
    return {
        "source": "none",
        "table": {},
        "hardware": here,
        "reason": f"not gated: no baseline for {here}/{preset} ({why}; "
        "record one with verify_record_baseline: true)",
    }


def gate(levels: list[dict[str, Any]], baseline: dict[str, Any], tolerance_pct: float) -> dict[str, Any]:
    """Compare each measured level with the baseline.

    A level fails when it had errors, or when the baseline has a value for it and the measured output
    tok/s is below ``expected * (1 - tolerance_pct / 100)``. Levels without a baseline value are
    recorded, not gated. Returns ``{status: passed|failed|not_gated, rows, reason, failed_levels}``.
    """
    table = _levels_table(baseline.get("table", {}))
    tol = float(tolerance_pct)
    rows: list[dict[str, Any]] = []
    failed: list[int] = []
    gated = 0
    for item in sorted(levels, key=lambda x: int(x["level"])):
        level = int(item["level"])
        measured = _num(item.get("output_tps"))
        expected = table.get(level)
        errors = int(item.get("errors") or 0)
        row: dict[str, Any] = {
            "level": level,
            "expected": expected,
            "measured": measured,
            "delta_pct": None,
            "min_allowed": None,
            "errors": errors,
            "verdict": "recorded",
        }
        if expected is not None and measured is not None and expected > 0:
            row["delta_pct"] = round((measured - expected) / expected * 100.0, 1)
            row["min_allowed"] = round(expected * (1.0 - tol / 100.0), 1)
        if errors > 0 or measured is None:
            row["verdict"] = "FAIL (errors)" if errors > 0 else "FAIL (no result)"
            failed.append(level)
        elif expected is not None:
            gated += 1
            if measured < expected * (1.0 - tol / 100.0):
                row["verdict"] = "FAIL"
                failed.append(level)
            else:
                row["verdict"] = "ok"
        rows.append(row)
    if failed:
        status = "failed"
        reason = f"output tok/s below baseline - {tol:g}% (or errors) at C={', C='.join(map(str, failed))}"
    elif gated == 0:
        status = "not_gated"
        reason = baseline.get("reason") or "not gated: no baseline"
        if baseline.get("source") != "none":
            reason = (
                f"not gated: the baseline ({baseline.get('source')}) has no value for the measured levels"
            )
    else:
        status = "passed"
        reason = (
            f"{gated} level(s) within {tol:g}% of the {baseline.get('source')} baseline "
            f"({baseline.get('hardware')}); others recorded"
        )
    return {"status": status, "rows": rows, "reason": reason, "failed_levels": failed, "tolerance_pct": tol}


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:+.1f}{suffix}" if suffix == "%" else f"{value:.1f}{suffix}"
    return f"{value}{suffix}"


def gate_table(result: dict[str, Any]) -> str:
    """The gate's rows as a fixed-width text table: level, expected, measured, delta, verdict."""
    header = f"{'level':>6} {'expected':>10} {'measured':>10} {'delta':>8}  verdict"
    lines = [header, "-" * len(header)]
    for row in result.get("rows", []):
        lines.append(
            f"{'C=' + str(row['level']):>6} {_fmt(row['expected']):>10} {_fmt(row['measured']):>10} "
            f"{_fmt(row['delta_pct'], '%'):>8}  {row['verdict']}"
        )
    return "\n".join(lines)


def baseline_record(levels: list[dict[str, Any]]) -> dict[int, float]:
    """The output tok/s of every error-free level, as a baseline row {level: tok/s}."""
    return {
        int(item["level"]): round(float(item["output_tps"]), 1)
        for item in levels
        if item.get("output_tps") is not None and not item.get("errors")
    }
