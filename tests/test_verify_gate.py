"""Pure tests of plugins/module_utils/verify_gate.py (layer 7) and verify_scrub.py (artifact scrubbing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from modload import load_module

REPO = Path(__file__).resolve().parents[1]


G = load_module("verify_gate", REPO / "plugins" / "module_utils" / "verify_gate.py")
S = load_module("verify_scrub", REPO / "plugins" / "module_utils" / "verify_scrub.py")
KEY = "VerifyTestKey-0123456789abcdef"  # test-only value
SEED = {"production": {1: 86.8, 30: 759.3, 250: 754.4}, "baseline": {1: 92.7, 30: 689.4, 250: None}}
RTX = ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8


def levels(**tps: float) -> list[dict[str, object]]:
    return [{"level": int(k[1:]), "output_tps": v, "errors": 0} for k, v in tps.items()]


SEED_FP = {"gpu_count": 8, "tp_size": 8, "gpu_name_regex": "RTX PRO 6000", "prompts_mode": "seed",
           "output_len": 200, "warmup_requests": 5, "dataset": "coding"}  # fmt: skip
FIELDS: dict[str, object] = {
    "model_path": "/models/Kimi-K2", "model_config_sha256": "aa" * 32,
    "drafter_path": "/models/eagle3", "drafter_config_sha256": "bb" * 32,
    "preset": "production", "launch_spec_sha256": "cc" * 32, "levels": [1, 30, 100, 250],
    "prompts_sha256": "dd" * 32, "dataset": "coding", "input_len": 256, "output_len": 200,
    "warmup_requests": 5, "prompts_per_level": {1: 30, 30: 60, 100: 200, 250: 500},
    "prompts_mode": "scaled", "gpu_names": ["NVIDIA H200"] * 2, "gpu_count": 2, "tp_size": 2,
    "driver": "580.159.04", "release_id": "r1", "nccl_env_sha256": "ee" * 32,
}  # fmt: skip
# one changed value per field of the match
CHANGED: dict[str, object] = {
    "model_path": "/models/other", "model_config_sha256": "missing", "drafter_path": "/models/eagle3-b",
    "drafter_config_sha256": "ff" * 32, "preset": "tree", "launch_spec_sha256": "00" * 32,
    "levels": [1, 30], "prompts_sha256": "11" * 32, "dataset": "random", "input_len": 512,
    "output_len": 100, "warmup_requests": 1, "prompts_per_level": {1: 30, 30: 30, 100: 30, 250: 30},
    "prompts_mode": "seed", "gpu_names": ["NVIDIA H100"] * 2, "gpu_count": 1, "tp_size": 1,
    "driver": "575.00",
}  # fmt: skip


def fp(**change: object) -> dict[str, Any]:
    result: dict[str, Any] = G.fingerprint({**FIELDS, **change})
    return result


def seed_fp(preset: str = "production", **change: object) -> dict[str, Any]:
    seed = {"preset": preset, "gpu_names": RTX, "gpu_count": 8, "tp_size": 8, "prompts_mode": "seed",
            "warmup_requests": 5, "output_len": 200, "dataset": "coding"}  # fmt: skip
    return fp(**{**seed, **change})


def seed_baseline(preset: str = "production") -> dict[str, object]:
    result: dict[str, object] = G.select_baseline(
        seed_fp(preset), records={}, seed_table=SEED, seed_match=SEED_FP, seed_hardware="8x RTX PRO 6000"
    )
    return result


def reps(per_level: dict[int, list[float]], accept: float | None = None) -> list[dict[str, Any]]:
    """Rows of several repetitions, combined as the role does (verify_summarize)."""
    rows = [
        {"level": lv, "output_tps": v, "errors": 0, "ok": True, "accept_length": accept, "completed": 30}
        for lv, values in per_level.items()
        for v in values
    ]
    combined: list[dict[str, Any]] = G.combine_repetitions(rows)
    return combined


def recorded(
    per_level: dict[int, list[float]], accept: float | None = None, **change: object
) -> dict[str, object]:
    record = G.baseline_record(
        reps(per_level, accept), fp(**change), startup_s=120.0, recorded_at="t", release_id="r1"
    )
    selected: dict[str, object] = G.select_baseline(
        fp(**change), records=G.records_with({}, record), seed_table=SEED, seed_match=SEED_FP
    )
    return selected


@pytest.mark.parametrize("field", G.FINGERPRINT_MATCH)
def test_every_match_field_breaks_the_match(field: str) -> None:
    assert field in CHANGED  # every match field has a changed value in this test
    base, other = fp(), fp(**{field: CHANGED[field]})
    assert base["hash"] != other["hash"]
    assert G.fingerprint_diff(base, other) == [field]
    record = G.baseline_record(reps({1: [10.0, 10.0, 10.0]}), base, recorded_at="t")
    assert (
        G.select_baseline(other, records=G.records_with({}, record), seed_table={}, seed_match=SEED_FP)[
            "source"
        ]
        == "none"
    )


@pytest.mark.parametrize("field", ["release_id", "nccl_env_sha256"])
def test_release_and_nccl_env_are_recorded_not_matched(field: str) -> None:
    """A new release (or NCCL env) must be gated against the old one's baseline: that is the gate."""
    base, other = fp(), fp(**{field: "changed"})
    assert base["hash"] == other["hash"]
    assert other["fields"][field] == "changed"
    record = G.baseline_record(reps({1: [10.0, 10.0, 10.0]}), base, recorded_at="t")
    assert (
        G.select_baseline(other, records=G.records_with({}, record), seed_table={}, seed_match={})["source"]
        == "recorded"
    )


def test_no_match_names_the_closest_records_differing_fields() -> None:
    record = G.baseline_record(reps({1: [10.0]}), fp(), recorded_at="t")
    chosen = G.select_baseline(fp(driver="575.00", levels=[1]), records=G.records_with({}, record),
                               seed_table={}, seed_match=SEED_FP)  # fmt: skip
    assert chosen["source"] == "none"
    assert "differs in levels, driver" in chosen["reason"]


def test_launch_spec_hash_leaves_out_secrets() -> None:
    spec = {
        "server_args": ["--model-path", "/m", "--api-key", "k-one"],
        "environment": {"SGLANG_ENABLE_SPEC_V2": "1", "HF_TOKEN": "t1"},
    }
    same = {
        "server_args": ["--model-path", "/m", "--api-key", "k-two"],
        "environment": {"SGLANG_ENABLE_SPEC_V2": "1", "HF_TOKEN": "t2"},
    }
    other = {
        "server_args": ["--model-path", "/m", "--tp-size", "2"],
        "environment": {"SGLANG_ENABLE_SPEC_V2": "1"},
    }
    assert G.launch_spec_hash(spec) == G.launch_spec_hash(same)
    assert G.launch_spec_hash(spec) != G.launch_spec_hash(other)
    assert G.launch_spec_hash(spec) != G.launch_spec_hash({**spec, "environment": {}})


def test_prompts_per_level_keep_every_level_loaded() -> None:
    assert G.prompts_per_level([1, 30, 100, 250], "auto") == {1: 30, 30: 60, 100: 200, 250: 500}
    assert G.prompts_per_level([1, 30, 100, 250], "auto", "seed") == {1: 30, 30: 30, 100: 30, 250: 30}
    assert G.prompts_per_level([1, 4], 6) == {1: 6, 4: 6}


def test_spread_and_repetitions() -> None:
    band = G.spread([100.0, 103.0, 97.0])
    assert band["median"] == 100.0
    assert band["stdev"] == 3.0
    assert band["cv_pct"] == 3.0
    rows = reps({1: [100.0, 103.0, 97.0], 30: [600.0, 600.0, 600.0]}, accept=2.0)
    assert [r["output_tps"] for r in rows] == [100.0, 600.0]
    assert rows[0]["repetitions"] == 3
    assert rows[0]["output_tps_spread"]["cv_pct"] == 3.0
    assert rows[1]["output_tps_spread"]["cv_pct"] == 0.0
    assert G.spread([100.0])["stdev"] == 0.0


def test_band_pools_the_levels_and_keeps_a_noisier_one() -> None:
    assert G.pooled_band({1: 3.0, 30: 4.0}) == {1: 3.536, 30: 4.0}
    assert G.pooled_band({1: None}) == {1: None}


def test_threshold_is_max_of_floor_and_k_times_the_spread() -> None:
    # CV 4 % of 3 vs 3 repetitions: spread of the comparison 4 x sqrt(2/3) = 3.27 %; k 3 -> 9.8 %
    assert round(G.allowed_shortfall(5, 3, 4.0, 3, 3), 1) == 9.8
    assert G.allowed_shortfall(5, 3, 0.5, 3, 3) == 5.0  # the floor
    assert G.allowed_shortfall(5, 3, None) == 5.0
    baseline = recorded({1: [96.0, 100.0, 104.0], 30: [576.0, 600.0, 624.0]})
    assert baseline["band"] == {1: 4.0, 30: 4.0}
    # allowed 9.8 %: 90.3 passes at C=1, 90.1 fails
    ok = G.gate(reps({1: [90.3] * 3, 30: [600.0] * 3}), baseline, 5, 3)
    assert ok["status"] == "passed", G.gate_table(ok)
    row = ok["rows"][0]
    assert (row["expected"], row["allowed_pct"], row["delta_pct"], row["margin_pct"]) == (
        100.0,
        9.8,
        -9.7,
        0.1,
    )
    bad = G.gate(reps({1: [90.1] * 3, 30: [600.0] * 3}), baseline, 5, 3)
    assert bad["status"] == "failed"
    assert bad["failed_levels"] == [1]
    table = G.gate_table(bad)
    for cell in ("allowed", "margin", "C=1", "100.0", "90.1", "-9.9%", "-9.8%", "FAIL"):
        assert cell in table


def test_pooled_levels_take_the_median_of_every_repetition() -> None:
    first = reps({1: [90.0, 91.0, 92.0], 30: [600.0, 610.0, 620.0]})
    second = reps({1: [99.0, 100.0, 101.0], 30: [605.0, 615.0, 625.0]})
    pooled = G.pool_levels(first, second)
    assert [r["level"] for r in pooled] == [1, 30]
    one = pooled[0]
    assert one["repetitions"] == 6
    assert one["completed"] == 180
    assert one["output_tps"] == 95.5  # median of 90 91 92 99 100 101
    assert one["output_tps_spread"]["n"] == 6
    assert one["ok"] is True
    # a level with errors in either measurement stays not ok, its errors summed
    broken = [dict(r, errors=2, ok=False) for r in second]
    assert [r["errors"] for r in G.pool_levels(first, broken)] == [2, 2]
    assert not any(r["ok"] for r in G.pool_levels(first, broken))


def test_a_throughput_shortfall_is_confirmable_errors_are_not() -> None:
    baseline = recorded({1: [96.0, 100.0, 104.0], 30: [576.0, 600.0, 624.0]})
    short = G.gate(reps({1: [88.0] * 3, 30: [600.0] * 3}), baseline, 5, 3)
    assert short["status"] == "failed"
    assert short["confirmable"] is True
    errors = reps({1: [88.0] * 3, 30: [600.0] * 3})
    errors[1] = dict(errors[1], errors=1)
    assert G.gate(errors, baseline, 5, 3)["confirmable"] is False
    assert G.gate(reps({1: [100.0] * 3, 30: [600.0] * 3}), baseline, 5, 3)["confirmable"] is False


def test_a_confirmation_judges_both_measurements() -> None:
    """A first measurement 12 % short at C=1 (allowed 9.8 %): measured again at the baseline's pace, the
    pooled six repetitions (allowed 4 x sqrt(1/6 + 1/3) x 3 = 8.5 %) pass and the reason names both; a
    regression that holds fails the pooled gate too."""
    baseline = recorded({1: [96.0, 100.0, 104.0], 30: [576.0, 600.0, 624.0]})
    first_run = reps({1: [88.0] * 3, 30: [600.0] * 3})
    first = G.gate(first_run, baseline, 5, 3)
    assert first["status"] == "failed"
    healthy = G.gate(
        G.pool_levels(first_run, reps({1: [100.0] * 3, 30: [600.0] * 3})), baseline, 5, 3, first=first
    )
    assert healthy["status"] == "passed", G.gate_table(healthy)
    assert healthy["rows"][0]["allowed_pct"] == 8.5
    assert healthy["confirmation"]["first_failed_levels"] == [1]
    assert healthy["confirmation"]["repetitions"] == 6
    assert healthy["reason"].startswith("the first measurement fell short at C=1 -12.0% (allowed -9.8%)")
    assert healthy["confirmable"] is False
    slow = G.gate(
        G.pool_levels(first_run, reps({1: [89.0] * 3, 30: [600.0] * 3})), baseline, 5, 3, first=first
    )
    assert slow["status"] == "failed"
    assert slow["failed_levels"] == [1]
    assert G.gate_outcome(slow, baseline, record="auto", layers_ok=True)["record"] is False


def test_seeds_baseline_preset_numbers_fail_as_production() -> None:
    """Issue 20: the seed's no-speculation figures fed as the production run's result passed at 10 %."""
    result = G.gate(levels(c1=92.7, c30=689.4), seed_baseline("production"), 5, 3)
    assert result["status"] == "failed"
    assert result["failed_levels"] == [30]


def test_seed_gates_only_its_exact_fingerprint() -> None:
    assert seed_baseline()["source"] == "seed"
    for change in ({"prompts_mode": "scaled"}, {"output_len": 100}, {"gpu_count": 4}, {"tp_size": 4}):
        chosen = G.select_baseline(seed_fp(**change), records={}, seed_table=SEED, seed_match=SEED_FP)
        assert chosen["source"] == "none", change
    h200 = G.select_baseline(fp(), records={}, seed_table=SEED, seed_match=SEED_FP)
    assert h200["source"] == "none"
    assert "2 GPU(s), the seed's table is for 8" in h200["reason"]


def test_seed_levels_without_a_value_are_not_passed_silently() -> None:
    result = G.gate(levels(c1=86.0, c100=10.0), seed_baseline(), 5, 3)
    assert result["status"] == "passed"
    assert {r["level"]: r["verdict"] for r in result["rows"]} == {1: "ok", 100: "no reference"}
    assert "1 level(s) without a reference value" in result["reason"]


def test_gate_fails_on_errors_even_without_baseline() -> None:
    rows = [{"level": 100, "output_tps": 500.0, "errors": 2}]
    assert G.gate(rows, seed_baseline(), 5)["status"] == "failed"


def test_no_baseline_is_recorded_or_ungated_never_passed() -> None:
    none = G.select_baseline(fp(), records={}, seed_table=SEED, seed_match=SEED_FP)
    gated = G.gate(levels(c1=10.0), none, 5, 3)
    assert gated["status"] == "ungated"
    auto = G.gate_outcome(gated, none, record="auto", layers_ok=True)
    assert (auto["status"], auto["record"]) == ("baseline_recorded", True)
    off = G.gate_outcome(gated, none, record=False, layers_ok=True)
    assert (off["status"], off["record"]) == ("ungated", False)
    assert "verify_record_baseline is false" in off["reason"]
    broken = G.gate_outcome(gated, none, record="auto", layers_ok=False)
    assert (broken["status"], broken["record"]) == ("ungated", False)


def test_a_baseline_is_written_only_from_a_passed_gate_or_the_first_record() -> None:
    baseline = recorded({1: [100.0, 100.0, 100.0]})
    failed = G.gate(reps({1: [50.0]}), baseline, 5, 3)
    assert G.gate_outcome(failed, baseline, record=True, layers_ok=True)["record"] is False
    passed = G.gate(reps({1: [99.0]}), baseline, 5, 3)
    assert G.gate_outcome(passed, baseline, record="auto", layers_ok=True)["record"] is False
    refresh = G.gate_outcome(passed, baseline, record="true", layers_ok=True)
    assert (refresh["status"], refresh["record"]) == ("passed", True)


def test_record_round_trips_through_records() -> None:
    rows = reps({1: [140.0, 141.0, 139.0], 4: [390.0, 400.0, 410.0]}, accept=2.0)
    record = G.baseline_record(
        rows, fp(), startup_s=88.04, recorded_at="2026-12-01T00:00:00Z", release_id="r9"
    )
    assert record["fingerprint"] == fp()["hash"]
    assert record["levels"]["4"]["output_tps"] == 400.0
    assert record["levels"]["4"]["n"] == 3
    assert record["levels"]["1"]["accept_length"] == 2.0
    assert (record["startup_s"], record["release_id"], record["repetitions"]) == (88.0, "r9", 3)
    records = G.records_with(
        G.records_with({}, record), G.baseline_record(rows, fp(preset="tree"), recorded_at="t")
    )
    assert len(records) == 2


def test_accept_length_gate_for_speculative_presets() -> None:
    baseline = recorded({1: [100.0] * 3}, accept=2.4)
    assert G.check_accept(reps({1: [100.0]}, accept=2.35), baseline, 5, 3, True)["status"] == "passed"
    low = G.check_accept(reps({1: [100.0]}, accept=1.9), baseline, 5, 3, True)
    assert low["status"] == "failed"
    assert "accept length below" in low["reason"]
    assert G.check_accept(reps({1: [100.0]}, accept=1.0), baseline, 5, 3, False)["status"] == "skipped"


def test_speculation_gain_opt_in() -> None:
    plain = fp(preset="baseline", launch_spec_sha256="99" * 32, drafter_path="")
    base_record = G.baseline_record(reps({30: [700.0] * 3}), plain, recorded_at="t")
    records = G.records_with({}, base_record)
    args = {"target": 30, "speculative": True, "required": True}
    assert G.check_speculation_gain(reps({30: [760.0]}), fp(), records, **args)["status"] == "passed"
    lost = G.check_speculation_gain(reps({30: [650.0]}), fp(), records, **args)
    assert lost["status"] == "failed"
    assert "no longer pays" in lost["reason"]
    assert G.check_speculation_gain(reps({30: [760.0]}), fp(), {}, **args)["status"] == "failed"
    off = {**args, "required": False}
    assert G.check_speculation_gain(reps({30: [650.0]}), fp(), records, **off)["status"] == "skipped"


def test_startup_gate() -> None:
    baseline = recorded({1: [100.0]})
    assert baseline["startup_s"] == 120.0
    assert G.check_startup(150.0, baseline, 25, 0)["status"] == "passed"
    slow = G.check_startup(151.0, baseline, 25, 0)
    assert slow["status"] == "failed"
    assert "start-up regressed" in slow["reason"]
    assert G.check_startup(None, baseline, 25, 0)["status"] == "skipped"
    assert G.check_startup(100.0, {"startup_s": None}, 25, 0)["status"] == "skipped"


def test_verdict() -> None:
    ok = {"http": {"status": "passed"}, "bench": {"status": "passed"}}
    gate = {"status": "passed", "reason": "fine"}
    assert G.verdict({**ok, "gate": gate}, require_gate=True) == {
        "status": "passed",
        "reason": "fine",
        "failed": [],
    }
    rec = G.verdict({**ok, "gate": {"status": "baseline_recorded", "reason": "r"}}, require_gate=True)
    assert rec["status"] == "baseline recorded"
    ungated = {**ok, "gate": {"status": "ungated", "reason": "no baseline"}}
    assert G.verdict(ungated, require_gate=False)["status"] == "ungated"
    strict = G.verdict(ungated, require_gate=True)
    assert (strict["status"], strict["failed"]) == ("failed", ["gate"])
    assert "verify_require_gate" in strict["reason"]
    slow = G.verdict({**ok, "gate": gate, "startup": {"status": "failed", "reason": "start-up regressed"}},
                     require_gate=True)  # fmt: skip
    assert (slow["status"], slow["failed"]) == ("failed", ["startup"])
    assert G.verdict({"http": {"status": "skipped"}}, require_gate=True)["status"] == "skipped"


def test_summarize_level_reads_bench_serving_keys() -> None:
    result = {"output_throughput": 101.5, "median_ttft_ms": 30.0, "p99_ttft_ms": 80.0, "median_itl_ms": 5.0,
              "p99_itl_ms": 9.0, "accept_length": 2.1, "completed": 29}  # fmt: skip
    summary = G.summarize_level(1, result, 30)
    assert summary["output_tps"] == 101.5
    assert summary["errors"] == 1
    assert not summary["ok"]
    assert G.summarize_level(4, None, 30)["errors"] == 30


def test_scrub_removes_key_from_bench_jsonl() -> None:
    info = {"api_key": KEY, "admin_api_key": None, "note": f"x {KEY} y", "max_total_tokens": 5}
    line = {"output_throughput": 1.0, "server_info": info}
    text = json.dumps(line) + "\n" + f"not json {KEY}\n"
    scrubbed = S.scrub_jsonl(text, KEY)
    assert KEY not in scrubbed
    assert S.find_leaks(scrubbed, KEY) == []
    first = json.loads(scrubbed.splitlines()[0])
    assert first["server_info"]["api_key"] == S.MASK
    assert first["server_info"]["admin_api_key"] is None
    assert first["server_info"]["max_total_tokens"] == 5
    assert S.find_leaks(text, KEY) == ["Ve..."]


def test_scrub_masks_secret_named_fields_even_with_unknown_value() -> None:
    data = S.scrub_data({"a": {"api_key": "some-other-key-value"}, "hf_token": "abc"}, None)
    assert data == {"a": {"api_key": S.MASK}, "hf_token": S.MASK}


def test_bench_bounds() -> None:
    """Issue 32 item 8: concurrency levels 1-4096, prompts per level auto or 1-100000
    (plugins/module_utils/bench_limits.py, the Jinja tests sglang.deploy.bench_levels/bench_prompts)."""
    from modload import REPO, load_module  # noqa: PLC0415

    limits = load_module("bench_limits", REPO / "plugins/module_utils/bench_limits.py")
    assert limits.valid_levels([1, 30, 100, 250])
    assert limits.valid_levels(["1", 4096])
    for bad in ([], [0], [4097], [1, 10**6], ["1\n"], [True], [1.5], "1,30", None, ["01"]):
        assert not limits.valid_levels(bad), bad
    assert limits.valid_prompts("auto")
    assert limits.valid_prompts(100000)
    assert limits.valid_prompts("30")
    for prompts in (0, 100001, "ten", True, None, -1, "1e3"):
        assert not limits.valid_prompts(prompts), prompts


def test_failure_lines_in_the_order_the_role_fails() -> None:
    """The one failure message of the verify role's end (tasks/main.yml): rollback first (both results),
    then a failed gate with its table, a failed layer 5/6, an inconclusive or failed verdict; none else."""
    table = "level  expected  measured\nC=4  100  80"
    gate = {"status": "failed", "reason": "C=4 short by 20 %", "table": table}
    results: dict[str, Any] = {
        "http": {"status": "passed", "reason": "200"},
        "bench": {"status": "passed", "reason": "C=4: 80 tok/s"},
        "gate": gate,
        "http_after_rollback": {"status": "passed", "reason": "200 again"},
        "gate_after_rollback": {"status": "passed", "reason": "held", "table": "C=4  100  99"},
        "rollback": {"from": "r2", "to": "r1", "key": "unchanged", "known_bad": "abc123"},
    }
    failed = {"status": "failed", "reason": "layer 7 (gate): C=4 short", "failed": ["gate"]}
    lines = G.failure_lines(results, failed, "sglang-kimi")
    assert lines[:5] == [
        "verify failed on release r2 and rolled back to r1:",
        "new release r2:",
        "  layer 5 (HTTP): passed - 200",
        "  layer 6 (benchmark): passed - C=4: 80 tok/s",
        "  layer 7 (gate): failed - C=4 short by 20 %",
    ]
    assert lines[5:7] == table.splitlines()
    assert lines[7:11] == [
        "previous release r1 (now current, sglang-kimi restarted):",
        "  layer 5 (HTTP): passed - 200 again",
        "  layer 6 (benchmark): not run - -",
        "  layer 7 (gate): passed - held",
    ]
    assert lines[-3:] == ["C=4  100  99", "API key: unchanged", "failed combination: abc123"]
    inconclusive = {"status": "inconclusive", "reason": "undecided", "failed": []}
    assert G.failure_lines(results, inconclusive, "u")[0].startswith("verify inconclusive on release r2")
    del results["rollback"]
    assert G.failure_lines(results, failed, "u") == [
        "verify layer 7 (gate) failed: C=4 short by 20 %",
        *table.splitlines(),
    ]
    results["gate"] = {"status": "passed", "reason": "held", "table": table}
    results["http"] = {"status": "failed", "reason": "no 200"}
    results["bench"] = {"status": "failed", "reason": "runner failed"}
    assert G.failure_lines(results, failed, "u") == [
        "verify layer 5 (HTTP) failed: no 200",
        "verify layer 6 (benchmark) failed: runner failed",
    ]
    results["http"] = results["bench"] = {"status": "passed", "reason": "ok"}
    assert G.failure_lines(results, inconclusive, "u") == [
        "verify verdict inconclusive (the new state keeps serving: verify_same_window_inconclusive=keep): "
        "undecided",
        *table.splitlines(),
    ]
    ungated = {"status": "failed", "reason": "layer 7 (start-up): slower", "failed": ["startup"]}
    assert G.failure_lines(results, ungated, "u") == ["verify verdict failed: layer 7 (start-up): slower"]
    assert G.failure_lines(results, {"status": "passed", "reason": "", "failed": []}, "u") == []
    assert G.failure_lines(results, None, "u") == []
