"""Pure tests of plugins/module_utils/verify_gate.py (layer 7) and verify_scrub.py (artifact scrubbing)."""

from __future__ import annotations

import json
from pathlib import Path

from modload import load_module

REPO = Path(__file__).resolve().parents[1]


G = load_module("verify_gate", REPO / "plugins" / "module_utils" / "verify_gate.py")
S = load_module("verify_scrub", REPO / "plugins" / "module_utils" / "verify_scrub.py")
KEY = "VerifyTestKey-0123456789abcdef"  # test-only value
SEED = {"production": {1: 86.8, 30: 759.3, 250: 754.4}, "baseline": {1: 92.7, 30: 689.4, 250: None}}
MATCH = {"gpu_count": 8, "tp_size": 8, "gpu_name_regex": "RTX PRO 6000"}
RTX = ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8


def levels(**tps: float) -> list[dict[str, object]]:
    return [{"level": int(k[1:]), "output_tps": v, "errors": 0} for k, v in tps.items()]


def seed_baseline(preset: str = "production") -> dict[str, object]:
    result: dict[str, object] = G.select_baseline(
        preset, recorded={}, recorded_meta={}, seed_table=SEED, seed_hardware="8x RTX PRO 6000",
        seed_match=MATCH, gpu_names=RTX, gpu_count=8, tp_size=8,
    )  # fmt: skip
    return result


def test_gate_passes_within_tolerance_and_records_c100() -> None:
    result = G.gate(levels(c1=80.0, c30=700.0, c100=740.0, c250=760.0), seed_baseline(), 10)
    assert result["status"] == "passed"
    verdicts = {row["level"]: row["verdict"] for row in result["rows"]}
    assert verdicts == {1: "ok", 30: "ok", 100: "recorded", 250: "ok"}


def test_gate_fails_too_slow_with_table() -> None:
    result = G.gate(levels(c1=40.0, c30=700.0), seed_baseline(), 10)
    assert result["status"] == "failed"
    assert result["failed_levels"] == [1]
    table = G.gate_table(result)
    for cell in ("C=1", "86.8", "40.0", "-53.9%", "FAIL"):
        assert cell in table


def test_gate_fails_on_errors_even_without_baseline() -> None:
    rows = [{"level": 100, "output_tps": 500.0, "errors": 2}]
    assert G.gate(rows, seed_baseline(), 10)["status"] == "failed"


def test_no_baseline_for_other_hardware_is_not_gated_explicitly() -> None:
    baseline = G.select_baseline(
        "production", recorded={}, recorded_meta={}, seed_table=SEED, seed_hardware="x",
        seed_match=MATCH, gpu_names=["NVIDIA H200"] * 2, gpu_count=2, tp_size=2,
    )  # fmt: skip
    assert baseline["source"] == "none"
    result = G.gate(levels(c1=10.0), baseline, 10)
    assert result["status"] == "not_gated"
    assert result["reason"].startswith("not gated: no baseline for 2x NVIDIA H200, tp 2/production")


def test_recorded_baseline_wins_and_round_trips() -> None:
    record = G.baseline_record(levels(c1=140.0, c4=390.0))
    baseline = G.select_baseline(
        "production", recorded={"production": record}, recorded_meta={"recorded_at": "t"}, seed_table=SEED,
        seed_hardware="x", seed_match=MATCH, gpu_names=[], gpu_count=0, tp_size=1,
    )  # fmt: skip
    assert baseline["source"] == "recorded"
    assert G.gate(levels(c1=139.0, c4=380.0), baseline, 10)["status"] == "passed"
    assert G.gate(levels(c1=14.0, c4=38.0), baseline, 10)["status"] == "failed"


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
