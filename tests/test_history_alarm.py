"""The history alarm (plugins/plugin_utils/history_alarm.py) on histories with known answers: a
steady host has no change point; a 12 % drop in throughput is found at the entry where it happened,
with its size and the release change beside it; two shifts are both found; a drifting-but-noisy host
whose runs scatter by 3 % is not flagged (the false-alarm rate of the permutation test is measured
over 200 steady histories); entries without a figure are left out of that series only; and the
inputs it refuses."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module

from sglang_deploy import commands_verify, host_history
from sglang_deploy.cli import build_parser
from sglang_deploy.runner import RunResult

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


# -- the controller's part (src/sglang_deploy/host_history.py): verify runs -> history -> alarm lines


def results_doc(
    tps: dict[int, float], gate: str = "passed", at: str = "t", release: str = "r1"
) -> dict[str, object]:
    return {
        "generated_at": at,
        "release_id": release,
        "results": {
            "bench": {
                "levels": [
                    {"level": level, "output_tps": value, "accept_length": 3.0}
                    for level, value in tps.items()
                ]
            },
            "gate": {"status": gate},
            "startup": {"status": "passed", "measured_s": 61.0},
        },
    }


def test_a_gated_run_becomes_an_entry_and_an_ungated_one_does_not() -> None:
    entry = host_history.entry_of(results_doc({1: 100.0, 30: 2000.0}, release="r7"), "run-1")
    assert entry == {
        "run_id": "run-1",
        "at": "t",
        "release": "r7",
        "gate": "passed",
        "output_tps": {"1": 100.0, "30": 2000.0},
        "accept_length": 3.0,
        "startup_s": 61.0,
    }
    assert host_history.entry_of(results_doc({1: 100.0}, gate="baseline recorded"), "r")
    for gate in ("ungated", "skipped"):
        assert host_history.entry_of(results_doc({1: 100.0}, gate=gate), "r") is None
    assert host_history.entry_of({"results": {"gate": {"status": "passed"}}}, "r") is None  # no benchmark
    assert host_history.entry_of(results_doc({1: 0.0}), "r") is None  # no figure


def test_runs_append_once_and_a_drop_is_an_alarm_in_status_and_the_report(tmp_path: Path) -> None:
    rng = random.Random(7)
    values = noisy(8, 1000.0, 0.01, rng) + noisy(8, 850.0, 0.01, rng)
    for index, value in enumerate(values):
        doc = results_doc(
            {16: value}, at=f"2026-11-{index + 1:02d}T00:00:00Z", release="r1" if index < 8 else "r2"
        )
        assert host_history.record_runs(
            tmp_path, {"gpu1": doc, "gpu2": results_doc({16: 1000.0}, gate="ungated")}, f"run-{index}"
        ) == ["gpu1"]
    # the same run again (a report built twice) is not a second entry
    assert host_history.record_runs(tmp_path, {"gpu1": results_doc({16: 1.0})}, "run-3") == []
    assert len(host_history.read(tmp_path, "gpu1")) == 16
    assert host_history.read(tmp_path, "gpu2") == []
    lines = host_history.status_lines(tmp_path, ["gpu1", "gpu2", "gpu1"])
    assert list(lines) == ["gpu1"]
    [line] = lines["gpu1"]
    assert line.startswith("output_tps@16: -1")
    assert "from 2026-11-09T00:00:00Z on" in line
    assert "r1 -> r2" in line
    section = "\n".join(host_history.report_section(["gpu1", "gpu2"], tmp_path))
    assert "## History alarm" in section
    assert "- gpu1: 16 gated run(s) on record, **1 change point(s)**:" in section
    assert "- gpu2: no gated run on record" in section
    assert host_history.report_section(["gpu1"], None) == []


def test_a_steady_history_has_no_alarm_and_a_broken_file_reads_as_none(tmp_path: Path) -> None:
    # the same level throughout, wobbling by 1-2 % with no step in it
    wobble = [1000.0, 1012.0, 991.0, 1005.0, 987.0, 1010.0, 996.0, 1003.0, 989.0, 1014.0, 993.0, 1001.0]
    for index, value in enumerate(wobble):
        host_history.record_runs(tmp_path, {"gpu1": results_doc({16: value})}, f"run-{index}")
    assert host_history.status_lines(tmp_path, ["gpu1"]) == {}
    assert "12 gated run(s) on record, no change point" in "\n".join(
        host_history.report_section(["gpu1"], tmp_path)
    )
    (tmp_path / "gpu3.json").write_text("{not json")
    assert host_history.read(tmp_path, "gpu3") == []
    with pytest.raises(ValueError, match="not a host name"):
        host_history.history_file(tmp_path, "../etc/passwd")


def test_verify_records_each_gated_run_and_its_report_has_the_alarm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`sglang-deploy verify` (its playbook faked: the results put where the role's fetch puts them)
    appends every run to the host's history, and the report's history section shows the drop."""
    values = [1000.0, 1006.0, 996.0, 1003.0, 999.0, 1005.0, 880.0, 884.0, 877.0, 882.0, 879.0, 885.0]
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all: {}\n")
    for index, value in enumerate(values):

        def execute(
            request: Any, args: Any, title: str, value: float = value, index: int = index
        ) -> RunResult:
            fetch = Path(json.loads(request.extra_vars[0])["verify_fetch_dir"])
            dest = fetch / "gpu1" / "var" / "lib" / "sglang-deploy"
            dest.mkdir(parents=True)
            doc = results_doc({16: value}, at=f"2026-11-{index + 1:02d}T00:00:00Z")
            (dest / "verify-results.json").write_text(json.dumps(doc))
            summary = {"hosts": {"gpu1": {}}, "failed_tasks": []}
            return RunResult(
                rc=0, status="successful", ident=request.ident, artifact_dir=tmp_path, summary=summary,
                run_dir=tmp_path, summary_path=tmp_path / "s.json", junit_path=tmp_path / "j.xml",
            )  # fmt: skip

        monkeypatch.setattr(commands_verify, "execute", execute)
        report_dir = tmp_path / f"report-{index}"
        args = build_parser().parse_args(
            [
                "verify",
                "-i",
                str(inventory),
                "--artifacts",
                str(tmp_path / "state"),
                "--report-dir",
                str(report_dir),
            ]
        )
        assert commands_verify.run(args) == 0
    assert len(host_history.read(tmp_path / "state" / "history", "gpu1")) == 12
    text = (tmp_path / "report-11" / "report.md").read_text()
    assert "## History alarm" in text
    assert "- gpu1: 12 gated run(s) on record, **1 change point(s)**:" in text
    assert "output_tps@16: -1" in text
    assert "from 2026-11-07T00:00:00Z on" in text
    early = (tmp_path / "report-2" / "report.md").read_text()
    assert "- gpu1: 3 gated run(s) on record, no change point" in early
