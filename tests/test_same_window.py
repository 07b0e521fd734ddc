"""The same-window decision rule (plugins/plugin_utils/same_window.py) on fixed samples with known
answers: pass, fail, more repetitions, inconclusive at the cap, Holm across levels, a host whose speed
drifts under both arms, and the inputs it refuses. The t statistics are checked against the formula."""

from __future__ import annotations

import math
import random

import pytest
from modload import REPO, load_module
from scipy import stats

same_window = load_module("same_window", REPO / "plugins/plugin_utils/same_window.py")
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
    assert n.pairs_needed is None  # 12 % paired spread: 10 pairs cannot catch 10 % with 95 % power
    assert n.power_at_cap < 0.95


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
