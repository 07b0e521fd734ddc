"""The history alarm (plugins/plugin_utils/history_alarm.py) on histories with known answers: a
steady host has no change point; a 12 % drop in throughput is found at the entry where it happened,
with its size and the release change beside it; two shifts are both found; a drifting-but-noisy host
whose runs scatter by 3 % is not flagged (the false-alarm rate of the permutation test is measured
over 200 steady histories); entries without a figure are left out of that series only; and the
inputs it refuses."""

from __future__ import annotations

import random

import pytest
from modload import REPO, load_module

history_alarm = load_module("history_alarm", REPO / "plugins/plugin_utils/history_alarm.py")
change_points = history_alarm.change_points
HistoryError = history_alarm.HistoryError


def history(
    values: list[float], *, level: int = 16, release_from: int | None = None
) -> list[dict[str, object]]:
    return [
        {
            "at": f"2026-11-{index + 1:02d}T00:00:00Z",
            "release": "r2" if release_from is not None and index >= release_from else "r1",
            "output_tps": {level: value},
        }
        for index, value in enumerate(values)
    ]


def noisy(n: int, level: float, cv: float, rng: random.Random) -> list[float]:
    return [level * (1.0 + rng.gauss(0.0, cv)) for _draw in range(n)]


def test_a_steady_host_has_no_change_point() -> None:
    rng = random.Random(1)
    assert change_points(history(noisy(20, 1000.0, 0.02, rng))) == []


def test_a_drop_is_found_where_it_happened_with_its_size_and_the_release() -> None:
    rng = random.Random(2)
    values = noisy(10, 1000.0, 0.02, rng) + noisy(10, 880.0, 0.02, rng)
    [point] = change_points(history(values, release_from=10))
    assert point.series == "output_tps@16"
    assert point.index == 10
    assert point.at == "2026-11-11T00:00:00Z"
    assert 0.84 < point.ratio < 0.92
    assert point.p_value <= history_alarm.ALPHA
    assert (point.release_before, point.release_after) == ("r1", "r2")
    assert "-1" in point.describe()
    assert "r1 -> r2" in point.describe()


def test_a_drop_with_the_release_unchanged_says_so() -> None:
    rng = random.Random(3)
    values = noisy(8, 1000.0, 0.01, rng) + noisy(8, 900.0, 0.01, rng)
    [point] = change_points(history(values))
    assert "the release unchanged (r1)" in point.describe()


def test_two_shifts_are_both_found() -> None:
    rng = random.Random(4)
    values = noisy(10, 1000.0, 0.01, rng) + noisy(10, 850.0, 0.01, rng) + noisy(10, 1000.0, 0.01, rng)
    points = change_points(history(values))
    assert [point.index for point in points] == [10, 20]
    assert points[0].ratio < 0.9
    assert points[1].ratio > 1.1


def test_the_false_alarm_rate_of_steady_histories_stays_near_alpha() -> None:
    rng = random.Random(5)
    alarms = sum(bool(change_points(history(noisy(16, 1000.0, 0.03, rng)), seed=i)) for i in range(200))
    # alpha = 1 %: 2 expected of 200; 8 or more would mean the search over splits is not paid for
    assert alarms <= 7


def test_accept_length_and_start_up_are_series_too_and_gaps_are_left_out() -> None:
    entries = history([1000.0] * 12)
    for index, entry in enumerate(entries):
        entry["accept_length"] = 3.1 if index < 6 else 2.0  # the drafter stopped paying
        entry["startup_s"] = None if index == 3 else 60.0
    points = change_points(entries)
    assert [(point.series, point.index) for point in points] == [("accept_length", 6)]


def test_levels_are_separate_series() -> None:
    rng = random.Random(6)
    entries = history(noisy(12, 1000.0, 0.01, rng), level=1)
    for index, entry in enumerate(entries):
        entry["output_tps"] = {1: entry["output_tps"][1], 64: 5000.0 if index < 6 else 4000.0}  # type: ignore[index]
    assert [point.series for point in change_points(entries)] == ["output_tps@64"]


def test_appended_keeps_the_newest_entries() -> None:
    entries = history([1.0, 2.0, 3.0])
    out = history_alarm.appended(entries, {"at": "x", "output_tps": {16: 4.0}}, keep=3)
    assert [entry["output_tps"][16] for entry in out] == [2.0, 3.0, 4.0]
    assert entries[0]["output_tps"] == {16: 1.0}  # the input is not changed


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: change_points([{"output_tps": [1, 2]}]), "output_tps is not a mapping"),
        (lambda: change_points(["x"]), "history entry 0 is not a mapping"),
        (lambda: change_points([], alpha=0.7), "alpha must lie in"),
        (lambda: change_points([], min_segment=1), "min_segment must be at least 2"),
        (lambda: history_alarm.appended([], {"output_tps": {}}, keep=0), "keep must be at least 1"),
    ],
)
def test_what_it_refuses(call: object, message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        call()  # type: ignore[operator]
