"""The same-window verdict's decision rule (issue 34, item 3): arm A (the serving release) and arm B
(the new one) benchmarked in one window, paired by repetition; per level the log ratios
d_i = log(B_i / A_i) of output throughput decide, against the allowed shortfall s (log(1 - s)):

- ``fail``: the one-sided 95 % upper bound of mean(d) lies below log(1 - s): B is slower than allowed.
  Across levels the fail p-values are Holm-adjusted, so the family-wise false-alarm rate (failing a
  release whose every level is within the allowance) stays at alpha however many levels run.
- ``pass``: the one-sided 95 % lower bound lies above log(1 - s) (a non-inferiority test; a release
  passes only when every level passes, which needs no adjustment: an intersection-union test).
- otherwise ``more`` (add repetitions to both arms) while a level has fewer than ``max_pairs`` pairs,
  then ``inconclusive``: a verdict of its own, never ``passed``.

Each extension is another look at the data, which raises the false-alarm rate above alpha by an
amount the A/A calibration (the serving release against itself as both arms) measures on the host.

The tests are scipy's one-sample t-tests on the paired log ratios (``scipy.stats.ttest_1samp`` with
``alternative``) below 5 pairs and, from 5 pairs, Yuen's trimmed t (20 % trimmed mean, winsorized
standard error: ``scipy.stats.trim_mean``, ``scipy.stats.mstats.trimmed_stde``), robust to one disturbed
repetition; the bounds scipy's t quantiles; Holm's step-down adjustment is the few lines of
``holm`` (scipy's ``false_discovery_control`` offers only Benjamini-Hochberg/Yekutieli, which bound
the false discovery rate, not the family-wise error). Pure: no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal


def scipy_stats(needed_by: str) -> ModuleType:
    """scipy.stats, imported at the first decision, not with this file: ansible-core's Jinja loader
    finds a collection filter by importing the filter files one by one until one defines the name, so
    every ansible worker that resolves a sglang.deploy filter defined after plugins/filter/same_window.py
    (alphabetically: the verify role's, the service's, the stack's) imported this file, and scipy's
    import was 0.65 s of CPU in each (a no-op site.yml run of the installed collection without the
    prefork callback: 28 CPU-s, 9.4 with it). A controller without scipy (the sglang-deploy package
    requires it) fails the decision that needs it, naming ``needed_by``."""
    try:
        from scipy import stats  # noqa: PLC0415 - see the docstring
    except ImportError as error:
        raise RuntimeError(f"{needed_by} needs scipy on the controller: {error}") from error
    return stats


Decision = Literal["pass", "fail", "more", "inconclusive"]
ALPHA = 0.05
MIN_PAIRS = 3  # a t bound from fewer pairs is too wide to decide anything at the shortfalls used
TRIM = 0.2  # Yuen's trimming from 5 pairs: floor(0.2 n) pairs off each end (Wilcox's usual 20 %)
# How far the calibration searches the pairs a level needs, beyond the role's cap: the record then says
# what cap would give the power (the cap stays the operator's knob: arm A runs it up front); None above
NEEDED_CEILING = 64


class PairError(ValueError):
    """Input the rule cannot judge (too few pairs, a non-positive or non-finite throughput)."""


@dataclass(frozen=True)
class LevelVerdict:
    """One level: its pairs, the centre ratio B/A (the mean of the log ratios, the 20 % trimmed mean from
    5 pairs) and its one-sided (1 - alpha) bounds (as ratios), the raw
    and Holm-adjusted fail p-values, the pass p-value and the decision."""

    level: int
    pairs: int
    ratio: float
    lower: float
    upper: float
    p_fail: float
    p_fail_holm: float
    p_pass: float
    decision: Decision


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    levels: tuple[LevelVerdict, ...]
    shortfall: float
    alpha: float

    @property
    def more(self) -> tuple[int, ...]:
        """The levels that need more repetitions (decision ``more``)."""
        return tuple(level.level for level in self.levels if level.decision == "more")


def log_ratios(pairs: Sequence[tuple[float, float]]) -> list[float]:
    """log(B/A) of each (A, B) pair; refuses what is not a positive finite throughput."""
    ratios = []
    for a, b in pairs:
        for value in (a, b):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise PairError(f"a throughput must be a positive finite number, got {value!r}")
        ratios.append(math.log(b / a))
    return ratios


def trimmed(n: int) -> int:
    """How many pairs Yuen's test trims from each end of ``n``: floor(TRIM x n), 0 below 5 pairs."""
    return int(TRIM * n + 1e-9)


Bounds = tuple[float, float, float, float, float]  # centre, p_fail, p_pass, lower, upper


def _outright(centre: float, threshold: float) -> Bounds:
    below = centre < threshold
    return centre, (0.0 if below else 1.0), (1.0 if below or centre == threshold else 0.0), centre, centre


def one_sided(
    diffs: Sequence[float], threshold: float, alpha: float
) -> tuple[float, float, float, float, float]:
    """(centre, p_fail, p_pass, lower, upper): one-sided tests of the centre of diffs against threshold
    and its one-sided (1 - alpha) bounds. Below 5 pairs the plain one-sample t-test of the mean
    (``scipy.stats.ttest_1samp``); from 5 pairs Yuen's trimmed t (the 20 % trimmed mean, its standard
    error from the winsorized spread: ``scipy.stats.trim_mean`` and ``scipy.stats.mstats.trimmed_stde``,
    n - 2g - 1 degrees of freedom), so that one disturbed repetition (measured on the lab: one arm-B
    run at C=4 11 % under five others within 0.7 %) cannot hold a level undecided to the cap. Identical
    differences have no spread: the centre decides outright."""
    stats = scipy_stats("the same-window verdict")
    n, g = len(diffs), trimmed(len(diffs))
    cut = g / n + 1e-12 if g else 0.0  # scipy counts int(cut x n) values off each end: exactly g
    centre = float(stats.trim_mean(diffs, cut)) if g else math.fsum(diffs) / n
    if max(diffs) - min(diffs) <= 1e-12 * max(1.0, abs(centre)):
        return _outright(centre, threshold)
    if g == 0:
        p_fail = float(stats.ttest_1samp(diffs, threshold, alternative="less").pvalue)
        p_pass = float(stats.ttest_1samp(diffs, threshold, alternative="greater").pvalue)
        sem = float(stats.sem(diffs))
    else:
        sem = float(stats.mstats.trimmed_stde(diffs, limits=(cut, cut)))
        if sem <= 1e-12 * max(1.0, abs(centre)):  # the winsorized pairs agree exactly
            return _outright(centre, threshold)
        t = (centre - threshold) / sem
        p_fail, p_pass = float(stats.t.cdf(t, n - 2 * g - 1)), float(stats.t.sf(t, n - 2 * g - 1))
    quantile = float(stats.t.ppf(1.0 - alpha, n - 2 * g - 1))
    return centre, p_fail, p_pass, centre - quantile * sem, centre + quantile * sem


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (monotone, capped at 1), in the input order."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def decide(
    pairs: Mapping[int, Sequence[tuple[float, float]]],
    shortfall: float,
    *,
    max_pairs: int,
    alpha: float = ALPHA,
) -> Verdict:
    """The verdict over all levels. ``pairs``: {concurrency level: [(A tok/s, B tok/s), ...]} in the
    order they ran; ``shortfall``: the allowed fraction B may fall short of A (0.05 = 5 %)."""
    scipy_stats("the same-window verdict")
    if not pairs:
        raise PairError("no level to judge")
    if not 0.0 < shortfall < 1.0:
        raise PairError(f"the allowed shortfall must lie in (0, 1), got {shortfall!r}")
    if max_pairs < MIN_PAIRS:
        raise PairError(f"max_pairs must be at least {MIN_PAIRS}, got {max_pairs}")
    if not 0.0 < alpha < 0.5:
        raise PairError(f"alpha must lie in (0, 0.5), got {alpha!r}")
    threshold = math.log(1.0 - shortfall)
    rows = []
    for level, level_pairs in sorted(pairs.items()):
        if len(level_pairs) < MIN_PAIRS:
            raise PairError(f"level {level}: {len(level_pairs)} pair(s), at least {MIN_PAIRS} needed")
        diffs = log_ratios(level_pairs)
        rows.append((level, len(diffs), *one_sided(diffs, threshold, alpha)))
    adjusted = holm([row[3] for row in rows])
    levels = []
    for (level, n, mean, p_fail, p_pass, lower, upper), p_holm in zip(rows, adjusted, strict=True):
        decision: Decision
        if p_holm <= alpha:
            decision = "fail"
        elif p_pass <= alpha:
            decision = "pass"
        else:
            decision = "more" if n < max_pairs else "inconclusive"
        verdict = LevelVerdict(
            level=level, pairs=n, ratio=math.exp(mean), lower=math.exp(lower), upper=math.exp(upper),
            p_fail=p_fail, p_fail_holm=p_holm, p_pass=p_pass, decision=decision,
        )  # fmt: skip
        levels.append(verdict)
    decisions = {level.decision for level in levels}
    overall: Decision = (
        "fail" if "fail" in decisions
        else "more" if "more" in decisions
        else "inconclusive" if "inconclusive" in decisions
        else "pass"
    )  # fmt: skip
    return Verdict(decision=overall, levels=tuple(levels), shortfall=shortfall, alpha=alpha)


@dataclass(frozen=True)
class LevelCalibration:
    """One level of an A/A calibration: the pairs, the paired spread (standard deviation of log(A2/A1)),
    the pairs the rule needs to fail a ``detect`` regression with ``power`` (None: more than
    NEEDED_CEILING), the power it has at ``max_pairs``, and the share of resampled A/A runs the rule
    failed (the measured false-alarm rate of an identical release)."""

    level: int
    pairs: int
    spread: float
    pairs_needed: int | None
    power_at_cap: float
    false_alarm_rate: float


def fail_power(spread: float, pairs: int, shortfall: float, detect: float, alpha: float = ALPHA) -> float:
    """The probability that ``decide`` fails a level whose true ratio B/A is 1 - ``detect``, from
    ``pairs`` pairs with paired spread ``spread`` (log scale): the paired t-test's power, from the
    noncentral t distribution (scipy.stats.nct)."""
    stats = scipy_stats("the calibration")
    if pairs < MIN_PAIRS or spread <= 0.0:
        raise PairError(f"fail_power needs at least {MIN_PAIRS} pairs and a positive spread")
    df = pairs - 1
    noncentrality = (math.log(1.0 - detect) - math.log(1.0 - shortfall)) / (spread / math.sqrt(pairs))
    return float(stats.nct.cdf(-float(stats.t.ppf(1.0 - alpha, df)), df, noncentrality))


def calibrate(
    pairs: Mapping[int, Sequence[tuple[float, float]]],
    shortfall: float,
    *,
    detect: float,
    max_pairs: int,
    power: float = 0.95,
    alpha: float = ALPHA,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[LevelCalibration, ...]:
    """The A/A calibration: ``pairs`` are the serving release benchmarked against itself as both arms
    ({level: [(A1, A2), ...]}). Per level, the paired spread, the repetitions the rule needs to fail a
    ``detect`` regression (0.10 = 10 %) with ``power`` at the allowed ``shortfall`` (searched up to
    NEEDED_CEILING, beyond ``max_pairs``: None above it), the power at ``max_pairs``, and the measured
    false-alarm rate: the share of ``resamples`` A/A runs of ``max_pairs`` pairs drawn with replacement
    from the measured ones that ``decide`` failed (an identical release, judged as the gate judges). The
    resampling keeps the measured pairs' own mean: an order effect of the host (the second arm always a
    little faster or slower) is part of the rate, as it is part of every real pair."""
    stats = scipy_stats("the calibration")
    if not 0.0 < shortfall < detect < 1.0:
        raise PairError(f"need 0 < shortfall < detect < 1, got shortfall={shortfall!r}, detect={detect!r}")
    rng = random.Random(seed)
    out = []
    for level, level_pairs in sorted(pairs.items()):
        if len(level_pairs) < MIN_PAIRS:
            raise PairError(f"level {level}: {len(level_pairs)} A/A pair(s), at least {MIN_PAIRS} needed")
        diffs = log_ratios(level_pairs)
        spread = max(float(stats.tstd(diffs)), 1e-6)
        needed = next(
            (
                n
                for n in range(MIN_PAIRS, NEEDED_CEILING + 1)
                if fail_power(spread, n, shortfall, detect, alpha) >= power
            ),
            None,
        )
        failed = 0
        for _run in range(resamples):
            drawn = [rng.choice(diffs) for _pair in range(max_pairs)]
            failed += (
                decide(
                    {level: [(1.0, math.exp(d)) for d in drawn]}, shortfall, max_pairs=max_pairs, alpha=alpha
                ).decision
                == "fail"
            )
        out.append(
            LevelCalibration(
                level=level,
                pairs=len(diffs),
                spread=spread,
                pairs_needed=needed,
                power_at_cap=fail_power(spread, max_pairs, shortfall, detect, alpha),
                false_alarm_rate=failed / resamples,
            )
        )
    return tuple(out)


# ---- the wiring into verify's transaction (issue 34 items 1-3, 5): pure, called by the filters of ----
# ---- plugins/filter/same_window.py ---------------------------------------------------------------

PROBE_REP = -1  # the capacity probe's repetition number in an arm's run order (it runs first)


def run_order(
    levels: Sequence[int], repetitions: int, seed: int, arm: str, first: int = 0
) -> list[list[int]]:
    """Every (level, repetition) of one arm from repetition ``first`` up to ``repetitions`` - 1, in a
    random order drawn from ``seed`` and the arm's name (arm A and arm B get different orders, each
    reproducible from the seed in the record)."""
    items = [[int(level), rep] for rep in range(int(first), int(repetitions)) for level in levels]
    random.Random(f"{int(seed)}:{arm}").shuffle(items)
    return items


def _per_level(rows: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """An arm's per-run rows ({level, rep, output_tps, errors, ...}) by level, in repetition order,
    the probe left out."""
    out: dict[int, list[Mapping[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (int(r["level"]), int(r["rep"]))):
        if int(row["rep"]) >= 0:
            out.setdefault(int(row["level"]), []).append(row)
    return out


def _tps(row: Mapping[str, Any]) -> float | None:
    value = row.get("output_tps")
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        return None
    return float(value) if int(row.get("errors") or 0) == 0 else None


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def capacity(
    probe_a: float | None, probe_b: float | None, reference: Mapping[str, Any] | None, shortfall: float
) -> dict[str, Any]:
    """The capacity control: the fixed probe (a short decode at concurrency 1) before each arm, against
    the host's last recorded probe (``reference``: {output_tps, at, release}). Both probes off that
    reference by more than the allowed shortfall, in the same direction: the host's capacity changed,
    and since it hit both arms the pair still judges the release (status ``changed``); otherwise
    ``steady`` (or ``unknown`` without a probe figure or a reference)."""
    ref = (reference or {}).get("output_tps")
    ref_value = float(ref) if isinstance(ref, int | float) and not isinstance(ref, bool) and ref > 0 else None
    out: dict[str, Any] = {
        "probe_a": probe_a,
        "probe_b": probe_b,
        "reference": dict(reference) if reference else None,
        "probe_ratio_pct": None,
        "a_vs_reference_pct": None,
        "b_vs_reference_pct": None,
        "status": "unknown",
    }
    if probe_a and probe_b:
        out["probe_ratio_pct"] = round((probe_b / probe_a - 1.0) * 100.0, 1)
    if ref_value is None or not probe_a or not probe_b:
        have = (
            f"probe A {probe_a} tok/s, probe B {probe_b} tok/s" if probe_a or probe_b else "no probe figure"
        )
        out["reason"] = f"{have}; no earlier probe on this host to compare with (recorded now)"
        return out
    delta_a = (probe_a / ref_value - 1.0) * 100.0
    delta_b = (probe_b / ref_value - 1.0) * 100.0
    out["a_vs_reference_pct"], out["b_vs_reference_pct"] = round(delta_a, 1), round(delta_b, 1)
    limit = shortfall * 100.0
    since = f"the host's last probe ({ref_value:.1f} tok/s, {(reference or {}).get('at') or 'time unknown'})"
    if abs(delta_a) > limit and abs(delta_b) > limit and (delta_a > 0) == (delta_b > 0):
        out["status"] = "changed"
        out["reason"] = (
            f"the host's capacity changed: probe A {delta_a:+.1f} %, probe B {delta_b:+.1f} % "
            f"against {since}; it hit both arms, so the same-window pair judges the release, not the host"
        )
    else:
        out["status"] = "steady"
        out["reason"] = f"probe A {delta_a:+.1f} %, probe B {delta_b:+.1f} % against {since}"
    return out


def gate_result(
    arm_a: Sequence[Mapping[str, Any]],
    arm_b: Sequence[Mapping[str, Any]],
    *,
    shortfall_pct: float,
    max_pairs: int,
    seed: int,
    final: bool,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """verify's gate from the same-window pair: ``arm_a``/``arm_b`` are per-run rows ({level, rep,
    output_tps, errors}) of the serving release measured right before the change and of the new one
    right after; repetition i of a level pairs with repetition i of the other arm. Per level the
    three-way ``decide`` (Holm across levels); ``final``: no more repetitions will come (a level still
    ``more`` is ``inconclusive``). A level with errors in arm B fails; one without a figure in arm A
    cannot be judged (the gate is ``ungated``: the serving release gave nothing to compare with).

    Returns the gate's dict as verify records it: ``{mode: same_window, status:
    passed|failed|more|inconclusive|ungated, reason, rows, failed_levels, more_levels, shortfall_pct,
    tolerance_pct, alpha, max_pairs, seed, confirmable: false}``; rows carry verify's table columns
    (expected = arm A's median, measured = arm B's, delta, allowed, margin = the one-sided bound's
    distance from the allowed shortfall) and the pairs, bounds and p-values (``p_within``: the pass test's,
    named so that the scrubber's secret-name rule, which masks a word ``pass``, leaves it readable)."""
    shortfall = float(shortfall_pct) / 100.0
    a_levels, b_levels = _per_level(arm_a), _per_level(arm_b)
    errors = [lv for lv, rows in b_levels.items() if any(_tps(r) is None for r in rows)]
    no_a = [lv for lv, rows in a_levels.items() if lv not in errors and any(_tps(r) is None for r in rows)]
    missing = sorted(lv for lv in b_levels if lv not in a_levels and lv not in errors)
    pairs: dict[int, list[tuple[float, float]]] = {}
    for level, rows in b_levels.items():
        if level in errors or level in no_a or level in missing:
            continue
        a_values = [_tps(r) for r in a_levels[level]]
        b_values = [_tps(r) for r in rows]
        pairs[level] = [(a, b) for a, b in zip(a_values, b_values, strict=False) if a and b]
    judged = {lv: p for lv, p in pairs.items() if len(p) >= MIN_PAIRS}
    too_few = sorted(lv for lv in pairs if lv not in judged)
    verdict = decide(judged, shortfall, max_pairs=max_pairs, alpha=alpha) if judged else None
    by_level = {lv.level: lv for lv in verdict.levels} if verdict else {}
    rows_out: list[dict[str, Any]] = []
    for level in sorted(b_levels):
        a_med = _median([v for v in (_tps(r) for r in a_levels.get(level, [])) if v])
        b_med = _median([v for v in (_tps(r) for r in b_levels[level]) if v])
        row: dict[str, Any] = {
            "level": level,
            "expected": round(a_med, 3) if a_med else None,
            "measured": round(b_med, 3) if b_med else None,
            "delta_pct": None,
            "allowed_pct": round(shortfall * 100.0, 1),
            "margin_pct": None,
            "errors": sum(int(r.get("errors") or 0) for r in b_levels[level]),
            "pairs": len(pairs.get(level, [])),
        }
        lv = by_level.get(level)
        if level in errors:
            row["verdict"] = "FAIL (errors)"
        elif lv is None:
            row["verdict"] = "ungated"
        else:
            decision = "inconclusive" if (final and lv.decision == "more") else lv.decision
            row.update(
                delta_pct=round((lv.ratio - 1.0) * 100.0, 1),
                lower_pct=round((lv.lower - 1.0) * 100.0, 1),
                upper_pct=round((lv.upper - 1.0) * 100.0, 1),
                margin_pct=round((lv.lower - (1.0 - shortfall)) * 100.0, 1),
                p_fail=round(lv.p_fail, 4),
                p_fail_holm=round(lv.p_fail_holm, 4),
                p_within=round(lv.p_pass, 4),
                decision=decision,
                verdict={"pass": "ok", "fail": "FAIL"}.get(decision, decision),
            )
        rows_out.append(row)
    failed = [r["level"] for r in rows_out if r["verdict"] in ("FAIL", "FAIL (errors)")]
    more = [r["level"] for r in rows_out if r.get("decision") == "more"]
    open_levels = [r["level"] for r in rows_out if r.get("decision") == "inconclusive"]
    unjudged = sorted(set(no_a) | set(missing) | set(too_few))
    bound = f"one-sided {100 * (1 - alpha):g} % bound of B/A, Holm across levels"
    if failed:
        status = "failed"
        reason = (
            f"the new release fell short of the serving one measured in the same window beyond the allowed "
            f"{shortfall_pct:g} % ({bound}) or had errors at C={', C='.join(map(str, failed))}"
        )
    elif unjudged:
        status = "ungated"
        reason = (
            f"no same-window pair at C={', C='.join(map(str, unjudged))} (arm A, the serving release, gave "
            f"no figure there, or fewer than {MIN_PAIRS} pairs)"
        )
    elif more:
        status = "more"
        reason = f"undecided at C={', C='.join(map(str, more))}: more repetitions per arm (cap {max_pairs})"
    elif open_levels:
        status = "inconclusive"
        reason = (
            f"undecided at C={', C='.join(map(str, open_levels))} after {max_pairs} pairs (the cap): the "
            f"{bound} straddles the allowed {shortfall_pct:g} % shortfall; neither passed nor failed"
        )
    else:
        lowest = min((r["margin_pct"] for r in rows_out if r["margin_pct"] is not None), default=0.0)
        status = "passed"
        reason = (
            f"{len(rows_out)} level(s) within the allowed {shortfall_pct:g} % of the serving release "
            f"measured in the same window ({bound}); smallest margin {lowest:+.1f}%"
        )
    return {
        "mode": "same_window",
        "status": status,
        "reason": reason,
        "rows": rows_out,
        "failed_levels": failed,
        "more_levels": more,
        "shortfall_pct": float(shortfall_pct),
        "tolerance_pct": float(shortfall_pct),
        "alpha": alpha,
        "max_pairs": int(max_pairs),
        "seed": int(seed),
        "confirmable": False,
    }


def calibration_record(
    arm_a: Sequence[Mapping[str, Any]],
    arm_b: Sequence[Mapping[str, Any]],
    *,
    shortfall_pct: float,
    detect_pct: float,
    max_pairs: int,
    seed: int,
) -> dict[str, Any]:
    """The host's A/A calibration record (issue 34 item 4) from two arms of the SAME serving release
    (per-run rows as ``gate_result`` takes them): per level the paired spread, the pairs the rule needs
    to fail a ``detect_pct`` regression with 95 % power at the allowed ``shortfall_pct``, the power at
    the cap and the measured false-alarm rate (``calibrate``); ``repetitions``: what the gate then runs
    per arm (the largest need over the levels, at least MIN_PAIRS, at most the cap); ``pairs_needed``:
    that largest need uncapped (None: more than NEEDED_CEILING), the cap that would give the power, and
    ``power_at_cap``: the weakest level's power at the cap."""
    a_levels, b_levels = _per_level(arm_a), _per_level(arm_b)
    pairs: dict[int, list[tuple[float, float]]] = {}
    for level, rows in b_levels.items():
        a_values = [_tps(r) for r in a_levels.get(level, [])]
        b_values = [_tps(r) for r in rows]
        pairs[level] = [(a, b) for a, b in zip(a_values, b_values, strict=False) if a and b]
    levels = calibrate(
        pairs,
        float(shortfall_pct) / 100.0,
        detect=float(detect_pct) / 100.0,
        max_pairs=int(max_pairs),
        seed=int(seed),
    )
    needed = [lv.pairs_needed if lv.pairs_needed is not None else NEEDED_CEILING + 1 for lv in levels]
    most = max([MIN_PAIRS, *needed])
    return {
        "shortfall_pct": float(shortfall_pct),
        "detect_pct": float(detect_pct),
        "max_pairs": int(max_pairs),
        "seed": int(seed),
        "repetitions": min(int(max_pairs), most),
        "pairs_needed": most if most <= NEEDED_CEILING else None,
        "power_at_cap": round(min((lv.power_at_cap for lv in levels), default=1.0), 4),
        "false_alarm_rate": max((lv.false_alarm_rate for lv in levels), default=0.0),
        "levels": {
            str(lv.level): {
                "pairs": lv.pairs,
                "spread": round(lv.spread, 5),
                "pairs_needed": lv.pairs_needed,
                "power_at_cap": round(lv.power_at_cap, 4),
                "false_alarm_rate": round(lv.false_alarm_rate, 4),
            }
            for lv in levels
        },
    }
