"""The same-window decision rule (plugins/plugin_utils/same_window.py) on fixed samples with known
answers: pass, fail, more repetitions, inconclusive at the cap, Holm across levels, a host whose speed
drifts under both arms, one disturbed repetition (Yuen's trimmed t from 5 pairs), and the inputs it
refuses. The t statistics are checked against the formula."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest
from modload import REPO, load_module
from scipy import stats

same_window = load_module("same_window", REPO / "plugins/plugin_utils/same_window.py")
verify_gate = load_module("verify_gate", REPO / "plugins/module_utils/verify_gate.py")
decide = same_window.decide
PairError = same_window.PairError
THRESHOLD_5 = math.log(0.95)


def pairs_from(diffs: list[float], base: float = 100.0) -> list[tuple[float, float]]:
    """(A, B) pairs whose log ratios are exactly diffs."""
    return [(base, base * math.exp(d)) for d in diffs]


def test_a_release_as_fast_as_the_serving_one_passes() -> None:
    pairs = [(100.0, 100.5), (101.0, 100.0), (99.0, 99.2), (100.0, 101.0), (100.0, 100.3)]
    verdict = decide({4: pairs}, 0.05, max_pairs=10)
    assert verdict.decision == "pass"
    [level] = verdict.levels
    assert level.decision == "pass"
    assert level.lower > 0.95  # the one-sided 95 % lower bound clears the allowance
    assert level.p_pass < 0.05


def test_a_release_15_percent_slower_fails() -> None:
    pairs = [(100.0, 85.2), (101.0, 85.5), (99.0, 84.0), (100.0, 85.1)]
    verdict = decide({1: pairs, 4: pairs}, 0.05, max_pairs=10)
    assert verdict.decision == "fail"
    assert all(level.decision == "fail" for level in verdict.levels)
    assert all(level.upper < 0.95 for level in verdict.levels)


def test_a_level_near_the_allowance_asks_for_more_then_is_inconclusive_at_the_cap() -> None:
    diffs = [THRESHOLD_5 + d for d in (-0.02, 0.0, 0.02)]
    more = decide({8: pairs_from(diffs)}, 0.05, max_pairs=6)
    assert more.decision == "more"
    assert more.more == (8,)
    capped = decide({8: pairs_from(diffs)}, 0.05, max_pairs=3)
    assert capped.decision == "inconclusive"
    assert capped.decision != "pass"


def test_the_p_values_are_the_paired_t_test_of_the_log_ratios() -> None:
    a = [100.0, 98.0, 103.0, 101.0]
    b = [97.0, 96.5, 99.0, 98.8]
    diffs = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    n, mean = len(diffs), sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    t_stat = (mean - THRESHOLD_5) / (sd / math.sqrt(n))
    [level] = decide({2: list(zip(a, b, strict=True))}, 0.05, max_pairs=10).levels
    assert level.p_fail == pytest.approx(stats.t.cdf(t_stat, n - 1))
    assert level.p_pass == pytest.approx(stats.t.sf(t_stat, n - 1))
    half = stats.t.ppf(0.95, n - 1) * sd / math.sqrt(n)
    assert level.lower == pytest.approx(math.exp(mean - half))
    assert level.upper == pytest.approx(math.exp(mean + half))
    assert level.ratio == pytest.approx(math.exp(mean))


# The lab's healthy upgrade (2026-12-05, C=4, 6 pairs): arm B's second run 11 % low, the rest within 0.7 %
LAB_A = [386.8, 390.1, 389.1, 389.9, 390.9, 390.8]
LAB_B = [391.8, 347.4, 391.8, 391.9, 391.1, 389.2]


def test_one_disturbed_repetition_no_longer_holds_a_healthy_level_undecided() -> None:
    """From 5 pairs Yuen's 20 % trimmed t: the lab's healthy upgrade passes at 6 pairs, where the plain
    paired t's lower bound (-5.5 %) straddled the allowed -5 % and the level ended inconclusive."""
    diffs = [math.log(b / a) for a, b in zip(LAB_A, LAB_B, strict=True)]
    plain_lower = sum(diffs) / 6 - stats.t.ppf(0.95, 5) * stats.sem(diffs)
    assert math.exp(plain_lower) < 0.95  # what the rule decided before: undecided at the cap
    verdict = decide({4: list(zip(LAB_A, LAB_B, strict=True))}, 0.05, max_pairs=6)
    [level] = verdict.levels
    assert verdict.decision == "pass", level
    assert level.lower > 0.99, level
    assert 1.0 < level.ratio < 1.005, level  # the trimmed centre: +0.2 %, not the mean's -1.6 %


def test_from_5_pairs_the_statistic_is_scipy_s_trimmed_mean_and_standard_error() -> None:
    rng = random.Random(7)
    for n in (5, 6, 9, 10, 14, 71):
        diffs = [rng.gauss(-0.03, 0.02) for _rep in range(n)]
        g = n // 5
        assert same_window.trimmed(n) == g
        centre, p_fail, p_pass, lower, upper = same_window.one_sided(diffs, THRESHOLD_5, 0.05)
        kept = sorted(diffs)[g : n - g]
        assert centre == pytest.approx(sum(kept) / len(kept), rel=1e-12)
        winsorized = [kept[0]] * g + kept + [kept[-1]] * g
        sem = stats.tstd(winsorized) / ((1 - 2 * g / n) * math.sqrt(n))  # Tukey-McLaughlin
        q = stats.t.ppf(0.95, n - 2 * g - 1)
        assert lower == pytest.approx(centre - q * sem, rel=1e-9)
        assert upper == pytest.approx(centre + q * sem, rel=1e-9)
        assert p_fail == pytest.approx(stats.t.cdf((centre - THRESHOLD_5) / sem, n - 2 * g - 1), rel=1e-9)
        assert p_fail + p_pass == pytest.approx(1.0)
    assert [same_window.trimmed(n) for n in (3, 4)] == [0, 0]  # below 5 pairs: the plain t (above)


def test_a_slower_release_still_fails_with_one_fast_repetition() -> None:
    a = [100.0, 101.0, 99.0, 100.0, 100.5, 99.5]
    b = [85.0, 86.0, 84.5, 100.0, 85.2, 84.9]  # 15 % slower; one run as fast as arm A
    verdict = decide({4: list(zip(a, b, strict=True))}, 0.05, max_pairs=6)
    assert verdict.decision == "fail", verdict.levels


@pytest.mark.parametrize("pairs", [5, 6, 10])
def test_at_the_allowance_the_trimmed_rule_fails_and_passes_at_about_alpha(pairs: int) -> None:
    """Release exactly 5 % slower (the boundary), normal noise: the fail and the pass rate are each near
    alpha = 5 % (Yuen's t is approximately level alpha), so trimming buys robustness, not false alarms."""
    rng = random.Random(pairs)
    runs, fails, passes = 4000, 0, 0
    for _run in range(runs):
        level = decide({4: pairs_from([THRESHOLD_5 + rng.gauss(0, 0.03) for _rep in range(pairs)])}, 0.05,
                       max_pairs=pairs).levels[0]  # fmt: skip
        fails += level.decision == "fail"
        passes += level.decision == "pass"
    assert 0.025 < fails / runs < 0.075, fails / runs
    assert 0.025 < passes / runs < 0.075, passes / runs


def test_holm_adjustment() -> None:
    assert same_window.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert same_window.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # monotone: never below an earlier step
    assert same_window.holm([]) == []


def test_a_shortfall_that_fails_one_level_alone_does_not_fail_three_levels_at_once() -> None:
    """Each level's fail p-value is about 0.03: alone it fails (0.03 <= 0.05); three such levels,
    Holm-adjusted (3 x 0.03), do not: the family-wise false-alarm rate stays at 5 %."""
    spread = 0.01
    shift = stats.t.ppf(0.03, 2) * spread / math.sqrt(3)
    diffs = [THRESHOLD_5 + shift + e for e in (-spread, 0.0, spread)]
    alone = decide({1: pairs_from(diffs)}, 0.05, max_pairs=10)
    assert alone.levels[0].p_fail == pytest.approx(0.03)
    assert alone.decision == "fail"
    three = decide({1: pairs_from(diffs), 4: pairs_from(diffs), 8: pairs_from(diffs)}, 0.05, max_pairs=10)
    assert [level.p_fail_holm for level in three.levels] == pytest.approx([0.09, 0.09, 0.09])
    assert three.decision == "more"


def test_a_host_whose_speed_drifts_under_both_arms_still_passes() -> None:
    """The host loses up to 15 % between repetitions (clocks, a neighbour): A and B of one pair share
    the window, so the ratio holds and a healthy release passes; against a baseline recorded before
    the drift, the same B would look 10-15 % slower."""
    host = [1.00, 0.95, 0.90, 0.87, 0.85]
    noise = [1.004, 0.997, 1.002, 0.999, 1.003]
    pairs = [(100.0 * f, 100.0 * f * e) for f, e in zip(host, noise, strict=True)]
    assert decide({4: pairs}, 0.05, max_pairs=10).decision == "pass"
    old_baseline = 100.0
    assert min(b for _a, b in pairs[2:]) / old_baseline < 0.95  # what a stored baseline would see


def test_identical_ratios_decide_without_a_spread() -> None:
    assert decide({1: [(100.0, 100.0)] * 3}, 0.05, max_pairs=5).decision == "pass"
    assert decide({1: [(100.0, 90.0)] * 3}, 0.05, max_pairs=5).decision == "fail"


def test_a_fail_wins_over_more_and_inconclusive() -> None:
    slow = [(100.0, 80.0), (100.0, 81.0), (100.0, 79.5)]
    near = pairs_from([THRESHOLD_5 + d for d in (-0.02, 0.0, 0.02)])
    assert decide({1: slow, 4: near}, 0.05, max_pairs=6).decision == "fail"


@pytest.mark.parametrize(
    ("pairs", "shortfall", "max_pairs", "message"),
    [
        ({}, 0.05, 5, "no level to judge"),
        ({1: [(100.0, 100.0)] * 2}, 0.05, 5, "level 1: 2 pair"),
        ({1: [(100.0, 0.0)] * 3}, 0.05, 5, "positive finite number, got 0.0"),
        ({1: [(100.0, float("nan"))] * 3}, 0.05, 5, "positive finite number, got nan"),
        ({1: [(100.0, 100.0)] * 3}, 0.0, 5, r"allowed shortfall must lie in \(0, 1\), got 0.0"),
        ({1: [(100.0, 100.0)] * 3}, 0.05, 2, "max_pairs must be at least 3, got 2"),
    ],
)
def test_what_it_cannot_judge_is_refused(
    pairs: dict[int, list[tuple[float, float]]], shortfall: float, max_pairs: int, message: str
) -> None:
    with pytest.raises(PairError, match=message):
        decide(pairs, shortfall, max_pairs=max_pairs)


def test_fail_power_is_the_noncentral_t_power_and_grows_with_pairs() -> None:
    spread, shortfall, detect = 0.04, 0.05, 0.10
    low, high = (same_window.fail_power(spread, n, shortfall, detect) for n in (3, 12))
    assert 0.0 < low < high < 1.0
    df, delta = 11, (math.log(0.9) - math.log(0.95)) / (spread / math.sqrt(12))
    assert high == pytest.approx(stats.nct.cdf(-stats.t.ppf(0.95, df), df, delta))


def test_fail_power_matches_the_rate_at_which_decide_fails_a_simulated_10_percent_regression() -> None:
    rng = random.Random(7)
    spread, n = 0.04, 8
    fails = sum(
        decide(
            {1: pairs_from([math.log(0.9) + rng.gauss(0.0, spread) for _pair in range(n)])}, 0.05, max_pairs=n
        ).decision
        == "fail"
        for _run in range(2000)
    )
    assert fails / 2000 == pytest.approx(same_window.fail_power(spread, n, 0.05, 0.10), abs=0.03)


def test_calibrate_reports_spread_pairs_needed_and_a_measured_false_alarm_rate() -> None:
    rng = random.Random(8)
    quiet = [(100.0, 100.0 * math.exp(rng.gauss(0.0, 0.02))) for _pair in range(10)]
    noisy = [(100.0, 100.0 * math.exp(rng.gauss(0.0, 0.12))) for _pair in range(10)]
    [q, n] = same_window.calibrate({1: quiet, 16: noisy}, 0.05, detect=0.10, max_pairs=10, resamples=400)
    assert q.level == 1
    assert q.spread == pytest.approx(stats.tstd([math.log(b / a) for a, b in quiet]))
    assert q.pairs_needed is not None
    assert q.pairs_needed <= 5
    assert q.power_at_cap > 0.99
    assert q.false_alarm_rate <= 0.02  # an identical release at 2 % spread: the gate fails it (almost) never
    # 12 % paired spread: 10 pairs cannot catch 10 % with 95 % power; the need is searched beyond the cap
    assert n.pairs_needed is not None
    assert 10 < n.pairs_needed <= same_window.NEEDED_CEILING
    assert same_window.fail_power(n.spread, n.pairs_needed, 0.05, 0.10) >= 0.95
    assert same_window.fail_power(n.spread, n.pairs_needed - 1, 0.05, 0.10) < 0.95
    assert n.power_at_cap < 0.95
    wild = [(100.0, 100.0 * math.exp(0.3 * (-1) ** k)) for k in range(10)]  # 30 % spread
    [w] = same_window.calibrate({1: wild}, 0.05, detect=0.10, max_pairs=10, resamples=50)
    assert w.pairs_needed is None  # more than NEEDED_CEILING pairs


def test_calibrate_counts_a_hosts_order_effect_as_false_alarms() -> None:
    # the second arm always 6 % slower on this host (an order effect): an identical release then fails
    biased = [(100.0, 94.0 * (1.0 + 0.002 * k)) for k in range(-4, 5)]
    [level] = same_window.calibrate({4: biased}, 0.05, detect=0.10, max_pairs=6, resamples=200)
    assert level.false_alarm_rate > 0.5


def test_calibrate_refuses_what_it_cannot_judge() -> None:
    with pytest.raises(PairError, match="shortfall < detect"):
        same_window.calibrate({1: [(1.0, 1.0)] * 3}, 0.10, detect=0.05, max_pairs=5)
    with pytest.raises(PairError, match="at least 3 needed"):
        same_window.calibrate({1: [(1.0, 1.0)] * 2}, 0.05, detect=0.10, max_pairs=5)


# ---- the wiring into verify's transaction (run order, the gate verify records, the capacity control) ----


def runs(values: dict[int, list[float]], errors: dict[int, int] | None = None) -> list[dict[str, object]]:
    """Per-run rows as layer 6 records them (verify_same_window_runs): repetition i of each level."""
    out: list[dict[str, object]] = [{"level": 1, "rep": -1, "output_tps": 999.0, "errors": 0, "ok": True}]
    for level, tps in values.items():
        for rep, value in enumerate(tps):
            bad = (errors or {}).get(level, 0) if rep == 0 else 0
            out.append({"level": level, "rep": rep, "output_tps": value, "errors": bad, "ok": bad == 0})
    return out


def test_the_run_order_is_every_run_once_reproducible_from_the_seed_and_differs_per_arm() -> None:
    order_a = same_window.run_order([1, 4, 16], 3, 1234, "A")
    assert sorted(map(tuple, order_a)) == [(lv, r) for lv in (1, 4, 16) for r in range(3)]
    assert order_a == same_window.run_order([1, 4, 16], 3, 1234, "A")
    assert order_a != same_window.run_order([1, 4, 16], 3, 1234, "B")
    assert order_a != same_window.run_order([1, 4, 16], 3, 1235, "A")
    assert order_a != [[lv, r] for r in range(3) for lv in (1, 4, 16)]  # not the plain rounds
    more = same_window.run_order([4], 6, 1234, "B+", first=3)
    assert sorted(map(tuple, more)) == [(4, 3), (4, 4), (4, 5)]


JITTER = [1.0, 0.99, 1.01, 1.005, 0.995, 1.0]


def test_the_gate_passes_a_release_as_fast_as_the_serving_one() -> None:
    arm_a = runs({1: [100.0 * j for j in JITTER], 4: [380.0 * j for j in JITTER]})
    arm_b = runs({1: [100.5, 99.6, 100.2], 4: [381.0, 379.0, 380.5]})
    gate = same_window.gate_result(arm_a, arm_b, shortfall_pct=5, max_pairs=6, seed=7, final=False)
    assert gate["status"] == "passed", gate
    assert gate["mode"] == "same_window"
    assert gate["seed"] == 7
    assert [r["verdict"] for r in gate["rows"]] == ["ok", "ok"]
    assert [r["pairs"] for r in gate["rows"]] == [3, 3]  # arm A's first 3 repetitions pair with B's 3
    assert all(r["margin_pct"] > 0 for r in gate["rows"])
    assert gate["rows"][0]["expected"] == 100.0  # arm A's median over its 6 repetitions


def test_the_gate_fails_a_release_15_percent_slower_and_names_the_levels() -> None:
    arm_a = runs({1: [100.0 * j for j in JITTER], 4: [380.0 * j for j in JITTER]})
    arm_b = runs({1: [85.0, 85.8, 84.6], 4: [323.0, 325.0, 322.0]})
    gate = same_window.gate_result(arm_a, arm_b, shortfall_pct=5, max_pairs=6, seed=7, final=False)
    assert gate["status"] == "failed"
    assert gate["failed_levels"] == [1, 4]
    assert all(r["upper_pct"] < -5 for r in gate["rows"])
    assert gate["rows"][0]["p_fail_holm"] <= 0.05


def test_a_host_slower_by_10_percent_for_both_arms_passes_where_the_stored_baseline_fails() -> None:
    """The host's pace drops 10 % between the stored baseline and this run, for both arms alike: the pair
    judges B against A (passes); today's gate against the stored baseline fails the same figures."""
    slow = [90.0 * j for j in JITTER]
    gate = same_window.gate_result(
        runs({4: slow}), runs({4: [90.4, 89.7, 90.1]}), shortfall_pct=5, max_pairs=6, seed=1, final=False
    )
    assert gate["status"] == "passed", gate
    stored = {"source": "recorded", "table": {4: 100.0}, "band": {4: 1.0}, "repetitions": 3}
    levels = [{"level": 4, "output_tps": 90.1, "errors": 0, "repetitions": 3}]
    assert verify_gate.gate(levels, stored, 5.0, 3.0)["status"] == "failed"


def test_an_undecided_level_asks_for_more_then_is_inconclusive_at_the_cap() -> None:
    arm_a = runs({4: [100.0, 104.0, 97.0, 101.0, 99.0, 102.0]})
    arm_b = runs({4: [95.0, 101.0, 92.0]})  # about -4 % with a wide spread: neither bound clears -5 %
    first = same_window.gate_result(arm_a, arm_b, shortfall_pct=5, max_pairs=6, seed=1, final=False)
    assert first["status"] == "more", first
    assert first["more_levels"] == [4]
    last = same_window.gate_result(
        arm_a,
        runs({4: [95.0, 101.0, 92.0, 99.0, 93.0, 98.0]}),
        shortfall_pct=5,
        max_pairs=6,
        seed=1,
        final=True,
    )
    assert last["status"] == "inconclusive", last
    assert last["rows"][0]["verdict"] == "inconclusive"
    assert last["rows"][0]["pairs"] == 6
    assert "neither passed nor failed" in last["reason"]


def test_errors_in_arm_b_fail_and_no_figure_in_arm_a_is_ungated() -> None:
    arm_a = runs({1: [100.0] * 3, 4: [380.0] * 3})
    errors = same_window.gate_result(
        arm_a, runs({1: [100.0] * 3, 4: [380.0] * 3}, errors={4: 2}), shortfall_pct=5, max_pairs=6, seed=1,
        final=True,
    )  # fmt: skip
    assert errors["status"] == "failed"
    assert errors["rows"][1]["verdict"] == "FAIL (errors)"
    no_a = same_window.gate_result(
        runs({1: [100.0] * 3, 4: [380.0] * 3}, errors={4: 1}), runs({1: [100.0] * 3, 4: [380.0] * 3}),
        shortfall_pct=5, max_pairs=6, seed=1, final=True,
    )  # fmt: skip
    assert no_a["status"] == "ungated"
    assert "C=4" in no_a["reason"]


def test_the_capacity_control_reports_a_drop_that_hit_both_arms() -> None:
    reference = {"output_tps": 100.0, "at": "2026-12-05T07:00:00Z", "release": "r1"}
    changed = same_window.capacity(90.2, 89.8, reference, 0.05)
    assert changed["status"] == "changed"
    assert "hit both arms" in changed["reason"]
    assert changed["a_vs_reference_pct"] == -9.8
    steady = same_window.capacity(99.0, 86.0, reference, 0.05)  # only arm B's probe fell: not the host
    assert steady["status"] == "steady"
    assert same_window.capacity(99.0, 98.0, None, 0.05)["status"] == "unknown"
    assert same_window.capacity(None, 98.0, reference, 0.05)["status"] == "unknown"


def test_verify_records_the_same_window_gate_and_its_verdict() -> None:
    """gate_outcome keeps the pair's status (a passed pair without a comparable stored baseline is passed
    and recorded, never 'baseline recorded'); an inconclusive gate is the verdict 'inconclusive'; the
    table shows both arms, the bound and the pairs."""
    gate = same_window.gate_result(
        runs({4: [100.0 * j for j in JITTER]}), runs({4: [100.2, 99.9, 100.1]}), shortfall_pct=5, max_pairs=6,
        seed=3, final=False,
    )  # fmt: skip
    out = verify_gate.gate_outcome(gate, {"source": "none", "reason": "none"}, record="auto", layers_ok=True)
    assert out["status"] == "passed"
    assert out["record"] is True
    kept = verify_gate.gate_outcome(gate, {"source": "recorded"}, record="auto", layers_ok=True)
    assert kept["status"] == "passed"
    assert kept["record"] is False
    table = verify_gate.gate_table(gate)
    for column in ("arm A", "arm B", "bound", "pairs"):
        assert column in table
    inconclusive = {"status": "inconclusive", "reason": "undecided at C=4", "mode": "same_window"}
    verdict = verify_gate.verdict({"bench": {"status": "passed"}, "gate": inconclusive}, require_gate=True)
    assert verdict == {"status": "inconclusive", "reason": "undecided at C=4", "failed": []}
    failed = verify_gate.verdict(
        {"bench": {"status": "passed"}, "gate": inconclusive, "startup": {"status": "failed", "reason": "x"}},
        require_gate=True,
    )
    assert failed["status"] == "failed"


def test_the_report_says_what_decided_the_gate_and_the_pair_s_rule_seed_and_capacity() -> None:
    from sglang_deploy.verify_report import _same_window_lines  # noqa: PLC0415

    gate = same_window.gate_result(
        runs({4: [100.0 * j for j in JITTER]}), runs({4: [90.0, 89.5, 90.4]}), shortfall_pct=5, max_pairs=6,
        seed=42, final=False,
    )  # fmt: skip
    gate["decided_by"] = "same window: arm A, release r1 measured before the change (2026-12-05T07:00:00Z)"
    capacity = same_window.capacity(100.0, 90.0, {"output_tps": 100.0, "at": "t0"}, 0.05)
    text = "\n".join(_same_window_lines(gate, capacity))
    assert "Compared with: same window: arm A, release r1" in text
    assert "seed 42" in text
    assert "C=4: B/A -10.0%" in text
    assert "Capacity: steady" in text
    stored = {"decided_by": "recorded baseline (no same window: no release serves on this host)"}
    assert _same_window_lines(stored, None) == [f"Compared with: {stored['decided_by']}", ""]
    # a calibration that needs more pairs than the cap: the report says so and what to set
    record = {"false_alarm_rate": 0.01, "repetitions": 6, "detect_pct": 10.0, "recorded_at": "t1"}
    short = dict(gate, calibration={**record, "pairs_needed": 16, "power_at_cap": 0.62})
    text = "\n".join(_same_window_lines(short, capacity))
    assert "The cap of 6 pairs is below what this host's spread needs for 95 % power" in text
    assert "power at the cap 62.0 %" in text
    assert "set verify_same_window_max_repetitions to 16." in text
    wild = dict(gate, calibration={**record, "pairs_needed": None, "power_at_cap": 0.2})
    assert "too noisy for the pair at any cap up to 64" in "\n".join(_same_window_lines(wild, capacity))
    enough = dict(gate, calibration={**record, "pairs_needed": 4, "power_at_cap": 0.99})
    assert "The cap of" not in "\n".join(_same_window_lines(enough, capacity))
    older = dict(gate, calibration=record)  # a record from before pairs_needed: nothing said
    assert "The cap of" not in "\n".join(_same_window_lines(older, capacity))


def test_the_calibration_record_of_two_arms_of_the_same_release() -> None:
    """A/A pairs with about 1 % paired spread: few pairs suffice to fail a 10 % regression at 5 % allowed,
    the gate's repetitions are at least 3 and at most the cap; a noisy level needs the cap or more."""
    rng = random.Random(5)
    quiet_a = [100.0 * math.exp(rng.gauss(0, 0.007)) for _rep in range(6)]
    quiet_b = [100.0 * math.exp(rng.gauss(0, 0.007)) for _rep in range(6)]
    noisy_a = [100.0 * math.exp(rng.gauss(0, 0.06)) for _rep in range(6)]
    noisy_b = [100.0 * math.exp(rng.gauss(0, 0.06)) for _rep in range(6)]
    record = same_window.calibration_record(
        runs({1: quiet_a}), runs({1: quiet_b}), shortfall_pct=5, detect_pct=10, max_pairs=6, seed=1
    )
    assert record["repetitions"] == 3
    assert record["levels"]["1"]["pairs_needed"] == 3
    assert record["levels"]["1"]["power_at_cap"] > 0.95
    assert 0.0 <= record["false_alarm_rate"] <= 0.05
    noisy = same_window.calibration_record(
        runs({1: quiet_a, 4: noisy_a}), runs({1: quiet_b, 4: noisy_b}), shortfall_pct=5, detect_pct=10,
        max_pairs=6, seed=1,
    )  # fmt: skip
    assert noisy["levels"]["4"]["spread"] > noisy["levels"]["1"]["spread"]
    assert noisy["repetitions"] == 6  # the noisy level needs the cap (or more than it)
    assert noisy["levels"]["4"]["power_at_cap"] < 0.95
    # the record says what cap would give the power, and the weakest level's power at today's cap
    assert noisy["pairs_needed"] == noisy["levels"]["4"]["pairs_needed"] > 6
    assert noisy["power_at_cap"] == noisy["levels"]["4"]["power_at_cap"]
    assert record["pairs_needed"] == 3
    assert record["power_at_cap"] == record["levels"]["1"]["power_at_cap"]


def test_no_figure_of_the_gate_is_masked_by_the_secret_name_rule() -> None:
    """verify-results.json is scrubbed by field name (a word 'pass' is a secret's): the gate's fields
    must all stay readable."""
    secret_names = load_module("secret_names", REPO / "plugins/module_utils/secret_names.py")
    gate = same_window.gate_result(
        runs({4: [100.0] * 3}),
        runs({4: [100.1, 99.9, 100.0]}),
        shortfall_pct=5,
        max_pairs=6,
        seed=1,
        final=True,
    )
    names = set(gate) | {name for row in gate["rows"] for name in row}
    assert [name for name in names if secret_names.is_secret_name(name)] == []


def test_the_decide_filter_is_the_whole_gate_passed_failed_and_its_record() -> None:
    """verify_same_window_decide (plugins/filter/same_window.py): one call gives the gate (layer 7) and the
    document the decision, the capacity control, both orders, arm A's figures and the record; arm B's
    failed benchmark fails the gate by name."""
    sw_filters = load_module("same_window_filters", REPO / "plugins/filter/same_window.py")
    a_rows = runs({1: [100.0 * j for j in JITTER], 4: [380.0 * j for j in JITTER]})
    arm_a = {
        "seed": 7, "order": [[1, -1, 8], [1, 0]], "release": "r1", "at": "2026-12-06T10:00:00Z",
        "drained": False, "startup_s": 41.5, "bench": {"per_run": a_rows, "probe_tps": 95.0},
        "capacity_reference": {"output_tps": 100.0, "at": "2026-12-05T07:00:00Z", "release": "r0"},
    }  # fmt: skip
    b_rows = runs({1: [100.5, 99.6, 100.2], 4: [381.0, 379.0, 380.5]})
    bench = {"status": "passed", "reason": "", "per_run": b_rows, "order": [[1, -1, 8]], "probe_tps": 94.0}
    calibration = {"repetitions": 4, "shortfall_pct": 5.0, "levels": {"1": {}}, "recorded_at": "t"}
    kw = {"shortfall_pct": 5, "max_pairs": 6, "final": False, "repetitions_b": 3, "calibration": calibration}
    gate = sw_filters.verify_same_window_decide(bench, arm_a, **kw)
    assert gate["status"] == "passed", gate
    assert gate["capacity"]["status"] == "changed"  # both probes 5-6 % below the reference
    assert (gate["seed"], gate["order_a"], gate["order_b"], gate["repetitions_b"]) == (
        7, arm_a["order"], bench["order"], 3,
    )  # fmt: skip
    assert gate["arm_a"] == {
        "release": "r1", "at": "2026-12-06T10:00:00Z", "drained": False, "probe_tps": 95.0, "startup_s": 41.5,
    }  # fmt: skip
    assert gate["arm_baseline"]["source"] == "same window"
    assert gate["arm_baseline"]["startup_s"] == 41.5
    assert gate["calibration"] == {"repetitions": 4, "shortfall_pct": 5.0, "recorded_at": "t"}
    failed = sw_filters.verify_same_window_decide(
        {"status": "failed", "reason": "C=4: 2 errors", "per_run": b_rows, "probe_tps": None}, arm_a, **kw
    )
    assert failed["status"] == "failed"
    assert failed["reason"] == "arm B (the new state) failed its benchmark: C=4: 2 errors"
    assert (failed["rows"], failed["confirmable"], failed["tolerance_pct"]) == ([], False, 5.0)
    assert failed["capacity"]["status"] == "unknown"  # arm B measured no probe


def test_the_plan_records_the_seed_its_order_was_drawn_with() -> None:
    sw_filters = load_module("same_window_filters", REPO / "plugins/filter/same_window.py")
    fixed = sw_filters.verify_same_window_plan([1, 4], 3, "1234", 8)
    assert fixed == {"seed": 1234, "order": [[1, -1, 8], *same_window.run_order([1, 4], 3, 1234, "A")]}
    drawn = sw_filters.verify_same_window_plan([1, 4], 3, "", 8)
    assert 0 <= drawn["seed"] < 999999999
    assert drawn["order"][1:] == same_window.run_order([1, 4], 3, drawn["seed"], "A")


def test_loading_the_filter_file_does_not_import_scipy() -> None:
    """ansible-core's Jinja loader imports the collection's filter files one by one until one defines
    the filter a task names, in every ansible worker: loading plugins/filter/same_window.py must not
    import scipy (0.65 s of CPU per worker); the first decision does."""
    code = (
        "import sys\n"
        "import ansible_collections.sglang.deploy.plugins.filter.same_window as f\n"
        "assert 'scipy' not in sys.modules, 'loading the filter file imported scipy'\n"
        "f.FilterModule().filters()\n"
        "assert 'scipy' not in sys.modules, 'listing the filters imported scipy'\n"
        "from ansible_collections.sglang.deploy.plugins.plugin_utils import same_window as sw\n"
        "sw.decide({4: [(100.0, 100.5), (101.0, 100.0), (99.0, 99.2)]}, 0.05, max_pairs=10)\n"
        "assert 'scipy.stats' in sys.modules, 'the decision ran without scipy'\n"
    )
    env = {"PYTHONPATH": str(REPO / ".collections"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
