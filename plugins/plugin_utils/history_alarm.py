"""The long-term alarm over a host's gated runs (issue 34, item 5): every gated run appends its figures
to the host's history, and a change point over that history (the drafter stopped paying, a driver
update, a clock or thermal limit) is reported for a human, in ``status`` and the report. It never
gates and never rolls back: the same-window pair (``same_window.decide``) decides a deployment; this
only says that the host's level moved, when, and by how much.

The method is MongoDB's for its performance history (Daly et al., ICPE 2020: E-Divisive means with a
permutation test), reduced to one statistic: for a series x_1..x_n (log throughput, so a shift is a
ratio) and each interval [i, j) with at least ``min_segment`` points inside and outside it, the
standardised difference of the means inside and outside (an interval from the start or to the end is
a single split; one inside is a shift that came and went); the best single split and the best
interval are the candidates (each at alpha / 2), and each one's p-value is a permutation test of that
maximum over shuffles of the time order
(``scipy.stats.permutation_test``, ``permutation_type='pairings'`` on one sample, which permutes the
order), so the search over splits is paid for. Binary segmentation repeats the search inside each
segment while a candidate is significant at ``alpha``. Pure: no I/O.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    import numpy as np
    from scipy import stats

    SCIPY_ERROR: ImportError | None = None
except ImportError as error:  # a controller without scipy (the sglang-deploy package requires it)
    SCIPY_ERROR = error

ALPHA = 0.01
MIN_SEGMENT = 4
PERMUTATIONS = 1999
# The series the alarm watches in a history entry: per-level output throughput, the accept length,
# the start-up time (a value that is absent or not positive in an entry leaves that entry out of
# that series only).
SERIES = ("output_tps", "accept_length", "startup_s")


class HistoryError(ValueError):
    """A history or entry the alarm cannot read."""


@dataclass(frozen=True)
class ChangePoint:
    """A level shift in one series: the first entry after it (index into the series and its ``at``),
    the medians before and after (in the series' unit), their ratio and the permutation p-value."""

    series: str
    index: int
    at: str
    release_before: str
    release_after: str
    before: float
    after: float
    ratio: float
    p_value: float

    def describe(self) -> str:
        change = (self.ratio - 1.0) * 100.0
        release = (
            f", with the release {self.release_before} -> {self.release_after}"
            if self.release_before != self.release_after
            else f", the release unchanged ({self.release_after})"
        )
        return (
            f"{self.series}: {change:+.1f} % from {self.at} on (median {self.before:.4g} -> "
            f"{self.after:.4g}, p={self.p_value:.3g}){release}"
        )


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None


def series_of(history: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """{series name: [(entry index, value), ...]} from history entries: ``output_tps`` per level
    (``output_tps@C``), ``accept_length`` and ``startup_s``."""
    out: dict[str, list[tuple[int, float]]] = {}
    for index, entry in enumerate(history):
        if not isinstance(entry, Mapping):
            raise HistoryError(f"history entry {index} is not a mapping: {entry!r}")
        levels = entry.get("output_tps", {})
        if not isinstance(levels, Mapping):
            raise HistoryError(f"history entry {index}: output_tps is not a mapping of level to tok/s")
        for level, value in levels.items():
            number = _positive(value)
            if number is not None:
                out.setdefault(f"output_tps@{int(level)}", []).append((index, number))
        for name in SERIES[1:]:
            number = _positive(entry.get(name))
            if number is not None:
                out.setdefault(name, []).append((index, number))
    return out


@functools.lru_cache(maxsize=64)
def _candidates(n: int, min_segment: int, intervals: bool) -> tuple[Any, Any]:
    """(i, j) of every candidate [i, j) of a series of n: the single splits [0, k) when not
    ``intervals``, else the intervals with at least ``min_segment`` points inside and outside."""
    i, j = np.triu_indices(n + 1, k=1)
    m = j - i
    keep = (m >= min_segment) & (n - m >= min_segment)
    if not intervals:
        keep &= i == 0
    return i[keep], j[keep]


def _statistics(logs: Any, min_segment: int, intervals: bool) -> Any:
    """The standardised difference between each candidate [i, j) and the rest, over the last axis
    (a batch of series at once: ``scipy.stats.permutation_test`` passes its resamples so)."""
    logs = np.asarray(logs, dtype=float)
    n = logs.shape[-1]
    i, j = _candidates(n, min_segment, intervals)
    sums = np.concatenate((np.zeros((*logs.shape[:-1], 1)), np.cumsum(logs, axis=-1)), axis=-1)
    m = j - i
    inside = sums[..., j] - sums[..., i]
    difference = inside / m - (sums[..., n : n + 1] - inside) / (n - m)
    scale = np.maximum(np.std(logs, axis=-1, keepdims=True), 1e-12)
    return np.abs(difference) / scale * np.sqrt(m * (n - m) / n)


def _max_statistic(min_segment: int, intervals: bool) -> Any:
    """The statistic permutation_test resamples: the largest candidate's, per series of a batch."""

    def statistic(x: Any, axis: int) -> Any:
        return np.max(_statistics(np.moveaxis(x, axis, -1), min_segment, intervals), axis=-1)

    return statistic


def _search(
    values: Sequence[float],
    span: tuple[int, int],
    *,
    options: tuple[int, float, int],
    found: list[tuple[int, float]],
) -> None:
    """Binary segmentation. Two candidates per segment, each tested at alpha / 2 (Bonferroni): the
    best single split (a step: the most power for it) and the best interval (a shift that came and
    went, which no single split sees: its halves have the same mean)."""
    start, stop = span
    min_segment, alpha, seed = options
    segment = np.log(np.asarray(values[start:stop], dtype=float))
    if len(segment) < 2 * min_segment or float(np.ptp(segment)) <= 1e-12:
        return
    for intervals in (False, True):
        i, j = _candidates(len(segment), min_segment, intervals)
        if not len(i):
            continue
        best = int(np.argmax(_statistics(segment, min_segment, intervals)))
        test = stats.permutation_test(
            (segment,),
            _max_statistic(min_segment, intervals),
            permutation_type="pairings",
            vectorized=True,
            n_resamples=PERMUTATIONS,
            alternative="greater",
            rng=np.random.default_rng(seed + start),
        )
        p_value = float(test.pvalue)
        if p_value > alpha / 2:
            continue
        cuts = [int(cut) for cut in (i[best], j[best]) if 0 < cut < len(segment)]
        found.extend((start + cut, p_value) for cut in cuts)
        edges = [0, *cuts, len(segment)]
        for left, right in itertools.pairwise(edges):
            _search(values, (start + left, start + right), options=options, found=found)
        return


def change_points(
    history: Sequence[Mapping[str, Any]],
    *,
    alpha: float = ALPHA,
    min_segment: int = MIN_SEGMENT,
    seed: int = 0,
) -> list[ChangePoint]:
    """Every significant level shift in every series of ``history`` (oldest entry first), in the
    order of the series' names and then of time. ``seed`` makes the permutation test repeatable."""
    if SCIPY_ERROR is not None:
        raise RuntimeError(f"the history alarm needs scipy on the controller: {SCIPY_ERROR}")
    if not 0.0 < alpha < 0.5:
        raise HistoryError(f"alpha must lie in (0, 0.5), got {alpha!r}")
    if min_segment < 2:
        raise HistoryError(f"min_segment must be at least 2, got {min_segment}")
    found_all: list[ChangePoint] = []
    for name, points in sorted(series_of(history).items()):
        values = [point[1] for point in points]
        found: list[tuple[int, float]] = []
        _search(values, (0, len(values)), options=(min_segment, alpha, seed), found=found)
        cuts = sorted(found)
        edges = [0, *(found_cut[0] for found_cut in cuts), len(values)]
        for number, (cut, p_value) in enumerate(cuts, start=1):
            before = values[edges[number - 1] : cut]
            after = values[cut : edges[number + 1]]
            entry_before, entry_after = history[points[cut - 1][0]], history[points[cut][0]]
            median_before, median_after = float(np.median(before)), float(np.median(after))
            found_all.append(
                ChangePoint(
                    series=name,
                    index=points[cut][0],
                    at=str(entry_after.get("at", f"entry {points[cut][0]}")),
                    release_before=str(entry_before.get("release", "?")),
                    release_after=str(entry_after.get("release", "?")),
                    before=median_before,
                    after=median_after,
                    ratio=median_after / median_before,
                    p_value=p_value,
                )
            )
    return found_all


def appended(
    history: Sequence[Mapping[str, Any]], entry: Mapping[str, Any], *, keep: int
) -> list[dict[str, Any]]:
    """``history`` with ``entry`` at the end, the oldest entries dropped beyond ``keep``."""
    if keep < 1:
        raise HistoryError(f"keep must be at least 1, got {keep}")
    series_of([entry])  # refuses an entry the alarm could not read
    return [dict(item) for item in [*history, entry]][-keep:]
