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
``alternative``), the bounds scipy's t quantiles; Holm's step-down adjustment is the few lines of
``holm`` (scipy's ``false_discovery_control`` offers only Benjamini-Hochberg/Yekutieli, which bound
the false discovery rate, not the family-wise error). Pure: no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

try:
    from scipy import stats

    SCIPY_ERROR: ImportError | None = None
except ImportError as error:  # a controller without scipy (the sglang-deploy package requires it)
    SCIPY_ERROR = error

Decision = Literal["pass", "fail", "more", "inconclusive"]
ALPHA = 0.05
MIN_PAIRS = 3  # a t bound from fewer pairs is too wide to decide anything at the shortfalls used


class PairError(ValueError):
    """Input the rule cannot judge (too few pairs, a non-positive or non-finite throughput)."""


@dataclass(frozen=True)
class LevelVerdict:
    """One level: its pairs, the mean ratio B/A and its one-sided (1 - alpha) bounds (as ratios), the raw
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


def _one_sided(diffs: Sequence[float], threshold: float, alpha: float) -> tuple[float, float, float, float]:
    """(p_fail, p_pass, lower, upper): t-tests of mean(diffs) against threshold and the one-sided
    (1 - alpha) bounds of the mean. Identical differences have no spread: the mean decides outright."""
    mean = math.fsum(diffs) / len(diffs)
    if max(diffs) - min(diffs) <= 1e-12 * max(1.0, abs(mean)):
        below = mean < threshold
        return (0.0 if below else 1.0), (1.0 if below or mean == threshold else 0.0), mean, mean
    p_fail = float(stats.ttest_1samp(diffs, threshold, alternative="less").pvalue)
    p_pass = float(stats.ttest_1samp(diffs, threshold, alternative="greater").pvalue)
    sem = float(stats.sem(diffs))
    quantile = float(stats.t.ppf(1.0 - alpha, len(diffs) - 1))
    return p_fail, p_pass, mean - quantile * sem, mean + quantile * sem


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
    if SCIPY_ERROR is not None:
        raise RuntimeError(f"the same-window verdict needs scipy on the controller: {SCIPY_ERROR}")
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
        rows.append((level, len(diffs), math.fsum(diffs) / len(diffs), *_one_sided(diffs, threshold, alpha)))
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
    ``max_pairs``), the power it has at ``max_pairs``, and the share of resampled A/A runs the rule
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
    if SCIPY_ERROR is not None:
        raise RuntimeError(f"the calibration needs scipy on the controller: {SCIPY_ERROR}")
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
    ``detect`` regression (0.10 = 10 %) with ``power`` at the allowed ``shortfall``, and the measured
    false-alarm rate: the share of ``resamples`` A/A runs of ``max_pairs`` pairs drawn with replacement
    from the measured ones that ``decide`` failed (an identical release, judged as the gate judges). The
    resampling keeps the measured pairs' own mean: an order effect of the host (the second arm always a
    little faster or slower) is part of the rate, as it is part of every real pair."""
    if SCIPY_ERROR is not None:
        raise RuntimeError(f"the calibration needs scipy on the controller: {SCIPY_ERROR}")
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
                for n in range(MIN_PAIRS, max_pairs + 1)
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
