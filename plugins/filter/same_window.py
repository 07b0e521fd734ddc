"""Filters ``sglang.deploy.verify_same_window_*`` of the verify role: the same-window verdict (issue 34),
the serving release (arm A) measured right before a change and the new one (arm B) right after.

The logic is plugins/plugin_utils/same_window.py (pure Python, scipy's tests; tests/test_same_window.py);
the per-run figures are verify_gate.summarize_level's, as layer 6 summarizes them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.verify_gate import (
    combine_repetitions,
    summarize_level,
)
from ansible_collections.sglang.deploy.plugins.plugin_utils.same_window import (
    PROBE_REP,
    calibration_record,
    capacity,
    gate_result,
    run_order,
)


def verify_same_window_order(
    levels: list[Any], repetitions: Any, seed: Any, arm: str, first: Any = 0
) -> list[list[int]]:
    order: list[list[int]] = run_order(
        [int(lv) for lv in levels], int(repetitions), int(seed), str(arm), int(first)
    )
    return order


def verify_same_window_plan(
    levels: list[Any], repetitions: Any, seed: Any, probe_prompts: Any
) -> dict[str, Any]:
    """Arm A's plan: the seed of both arms' run orders (``seed``, or drawn now when it is '') and arm A's
    run order, the capacity probe first ([1, -1, probe_prompts]) then every level x ``repetitions``."""
    given = seed is not None and str(seed).strip() != ""
    drawn = int(seed) if given else random.SystemRandom().randrange(999999999)
    order = [[1, PROBE_REP, int(probe_prompts)], *verify_same_window_order(levels, repetitions, drawn, "A")]
    return {"seed": drawn, "order": order}


def verify_same_window_runs(bench: dict[str, Any], num_prompts: Any) -> list[dict[str, Any]]:
    """The runner's ``{"levels": [{level, rep, num_prompts, result}]}`` -> one row per run (level, rep,
    output_tps, accept_length, errors, ok, ...): the probe (rep -1) among them."""
    per_level: dict[Any, Any] = num_prompts if isinstance(num_prompts, dict) else {}
    rows = []
    for item in bench.get("levels", []):
        level = int(item["level"])
        sent = item.get("num_prompts")
        if sent is None:
            sent = per_level.get(level, per_level.get(str(level))) if per_level else num_prompts
        row = summarize_level(level, item.get("result"), int(sent or 0))
        row["rep"] = int(item.get("rep", 0))
        rows.append(row)
    return rows


def verify_same_window_gate(
    arm_b: list[dict[str, Any]],
    arm_a: list[dict[str, Any]],
    *,
    shortfall_pct: Any,
    max_pairs: Any,
    seed: Any,
    final: Any = False,
) -> dict[str, Any]:
    result: dict[str, Any] = gate_result(
        arm_a,
        arm_b,
        shortfall_pct=float(shortfall_pct),
        max_pairs=int(max_pairs),
        seed=int(seed),
        final=bool(final),
    )
    return result


def verify_same_window_probe(rows: list[dict[str, Any]]) -> float | None:
    """The capacity probe's output tok/s among an arm's per-run rows (None: no probe or it failed)."""
    for row in rows:
        if int(row.get("rep", 0)) == PROBE_REP and row.get("ok"):
            value = row.get("output_tps")
            return float(value) if value is not None else None
    return None


def verify_same_window_capacity(
    probe_a: Any, probe_b: Any, reference: Any, shortfall_pct: Any
) -> dict[str, Any]:
    ref = reference if isinstance(reference, dict) and reference else None
    a = float(probe_a) if probe_a not in (None, "") else None
    b = float(probe_b) if probe_b not in (None, "") else None
    result: dict[str, Any] = capacity(a, b, ref, float(shortfall_pct) / 100.0)
    return result


def verify_same_window_arm_baseline(rows: list[dict[str, Any]], startup_s: Any = None) -> dict[str, Any]:
    """Arm A's figures as the comparison of the accept length and the start-up time (the shape
    verify_check_accept and verify_check_startup read): per level the median accept length and its CV
    over arm A's repetitions, and the serving release's start-up."""
    levels = combine_repetitions([r for r in rows if int(r.get("rep", 0)) != PROBE_REP])
    accept = {}
    band = {}
    for item in levels:
        spread = item.get("accept_spread") or {}
        if spread.get("median") is not None:
            accept[int(item["level"])] = spread["median"]
            band[int(item["level"])] = spread.get("cv_pct")
    return {
        "source": "same window",
        "accept": accept,
        "accept_band": band,
        "repetitions": max((int(i.get("repetitions") or 1) for i in levels), default=1),
        "startup_s": startup_s
        if isinstance(startup_s, int | float) and not isinstance(startup_s, bool)
        else None,
        "reason": "arm A: the serving release, measured right before the change",
    }


CALIBRATION_KEYS = (
    "recorded_at", "release_id", "repetitions", "pairs_needed", "power_at_cap", "false_alarm_rate",
    "shortfall_pct", "detect_pct",
)  # fmt: skip


def verify_same_window_decide(
    bench: dict[str, Any],
    arm_a: dict[str, Any],
    *,
    shortfall_pct: Any,
    max_pairs: Any,
    final: Any,
    repetitions_b: Any,
    calibration: Any = None,
) -> dict[str, Any]:
    """Layer 6's arm B (``verify_results.bench``) against arm A (``__verify_arm_a``) -> the whole
    same-window gate: the three-way decision per level (or failed when arm B failed its benchmark), the
    capacity control (both arms' probes against the host's last one), both run orders, arm A's figures as
    the accept-length and start-up comparison, and the host's calibration record's summary."""
    seed = int(arm_a["seed"])
    shortfall = float(shortfall_pct)
    a_bench = arm_a.get("bench") or {}
    if bench.get("status") == "passed":
        gate = verify_same_window_gate(
            bench.get("per_run") or [],
            a_bench.get("per_run") or [],
            shortfall_pct=shortfall,
            max_pairs=max_pairs,
            seed=seed,
            final=final,
        )
    else:
        # arm B's errors fail layer 6 (the verdict), as without the pair; the gate says so
        gate = {
            "mode": "same_window", "status": "failed",
            "reason": f"arm B (the new state) failed its benchmark: {bench.get('reason', '')}",
            "rows": [], "failed_levels": [], "more_levels": [], "shortfall_pct": shortfall,
            "tolerance_pct": shortfall, "seed": seed, "confirmable": False,
        }  # fmt: skip
    record = calibration if isinstance(calibration, dict) else {}
    gate.update(
        {
            "capacity": verify_same_window_capacity(
                a_bench.get("probe_tps"), bench.get("probe_tps"), arm_a.get("capacity_reference"), shortfall
            ),
            "seed": seed,
            "order_a": arm_a.get("order"),
            "order_b": bench.get("order"),
            "arm_a": {
                key: a_bench.get("probe_tps") if key == "probe_tps" else arm_a.get(key)
                for key in ("release", "at", "drained", "probe_tps", "startup_s")
            },
            "arm_baseline": verify_same_window_arm_baseline(
                a_bench.get("per_run") or [], arm_a.get("startup_s")
            ),
            "repetitions_b": int(repetitions_b),
            "calibration": {key: record[key] for key in CALIBRATION_KEYS if key in record},
        }
    )
    return gate


def verify_same_window_calibrate(
    arm_b: list[dict[str, Any]],
    arm_a: list[dict[str, Any]],
    *,
    shortfall_pct: Any,
    detect_pct: Any,
    max_pairs: Any,
    seed: Any,
) -> dict[str, Any]:
    record: dict[str, Any] = calibration_record(
        arm_a,
        arm_b,
        shortfall_pct=float(shortfall_pct),
        detect_pct=float(detect_pct),
        max_pairs=int(max_pairs),
        seed=int(seed),
    )
    return record


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "verify_same_window_order": verify_same_window_order,
            "verify_same_window_plan": verify_same_window_plan,
            "verify_same_window_runs": verify_same_window_runs,
            "verify_same_window_gate": verify_same_window_gate,
            "verify_same_window_probe": verify_same_window_probe,
            "verify_same_window_capacity": verify_same_window_capacity,
            "verify_same_window_arm_baseline": verify_same_window_arm_baseline,
            "verify_same_window_calibrate": verify_same_window_calibrate,
            "verify_same_window_decide": verify_same_window_decide,
        }
