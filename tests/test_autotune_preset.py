"""The preset choice of the autotune role (plugins/module_utils/autotune_preset.py): the target
concurrency decides, the current configuration is kept unless another one beats it by more than the
declared noise, ties, drafter drift, failed candidates. Figures: the seed's recorded table
(group_vars/all/baseline.yml: 8x RTX PRO 6000, output tok/s at C=1/30/250)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from modload import REPO, load_module

preset = load_module("autotune_preset", REPO / "plugins" / "module_utils" / "autotune_preset.py")
PRESETS = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())["sglang_presets"]
CURRENT = {"preset": "production", "cuda_graph_max_bs": 128}


def entry(name: str, bs: int, tps: dict[int, float | None], errors: int = 0) -> dict[str, Any]:
    levels = [
        {"level": lv, "output_tps": v, "errors": errors, "ok": v is not None and errors == 0}
        for lv, v in tps.items()
    ]
    return {"preset": name, "cuda_graph_max_bs": bs, "status": "passed", "reason": "", "levels": levels}


# The seed's table: production (EAGLE-3 topk=1 + spec v2) 86.8 / 759.3 / 754.4, baseline 92.7 / 689.4 / -,
# tree (topk=4, v1) 80.9 / 313.3 / 353.8.
SEED = [
    entry("baseline", 128, {1: 92.7, 30: 689.4}),
    entry("tree", 128, {1: 80.9, 30: 313.3}),
    entry("production", 128, {1: 86.8, 30: 759.3}),
]


def test_seed_table_at_c30_keeps_production() -> None:
    result = preset.choose(SEED, CURRENT, 30, PRESETS)
    assert result["choice"] == {"name": "production/bs128", "preset": "production", "cuda_graph_max_bs": 128}
    assert not result["changed"]
    assert result["reason"].startswith("kept production/bs128 (759.3 tok/s at C=30)")
    assert result["drift"] == ""
    assert result["per_level"] == {1: "baseline/bs128", 30: "production/bs128"}


def test_seed_table_at_c1_switches_to_baseline_and_says_speculation_stopped_paying() -> None:
    # baseline 92.7 vs production 86.8 at C=1: +6.8% > 5%
    result = preset.choose(SEED, CURRENT, 1, PRESETS)
    assert result["choice"]["preset"] == "baseline"
    assert result["changed"]
    assert "+6.8%" in result["reason"]
    assert "speculation no longer pays off at C=1" in result["drift"]
    assert result["drift"] in result["reason"]


def test_gain_within_the_declared_noise_keeps_current() -> None:
    # the same +6.8% with a 10% noise threshold: kept, and the best other is named
    result = preset.choose(SEED, CURRENT, 1, PRESETS, min_gain_pct=10)
    assert result["choice"]["preset"] == "production"
    assert not result["changed"]
    assert "baseline/bs128, gains +6.8% (switching needs more than 10%)" in result["reason"]
    assert result["drift"] == ""  # drift is judged with the same threshold


def test_tie_prefers_current_then_no_speculation_then_smaller_bs() -> None:
    rows = [
        entry("tree", 64, {30: 700.0}),
        entry("baseline", 256, {30: 701.0}),
        entry("baseline", 128, {30: 700.5}),
    ]
    # current not among the tied (not measured): no speculation, then the smaller max-bs
    result = preset.choose(rows, {"preset": "tree", "cuda_graph_max_bs": 999}, 30, PRESETS)
    assert result["choice"]["name"] == "baseline/bs128"
    assert "was not measured" in result["reason"]
    # current among the tied: it wins although 1 tok/s slower (inside tie_pct 2%)
    result = preset.choose(rows, {"preset": "tree", "cuda_graph_max_bs": 64}, 30, PRESETS)
    assert result["choice"]["name"] == "tree/bs64"
    assert not result["changed"]
    assert "no other candidate is faster beyond the tie margin" in result["reason"]


def test_cuda_graph_max_bs_switch_beyond_noise() -> None:
    rows = [entry("production", 256, {1: 86.0, 30: 830.0}), entry("production", 128, {1: 86.8, 30: 759.3})]
    result = preset.choose(rows, CURRENT, 30, PRESETS)
    assert result["choice"] == {"name": "production/bs256", "preset": "production", "cuda_graph_max_bs": 256}
    assert "(+9.3%, more than 5%)" in result["reason"]


def test_failed_candidates_do_not_count_and_current_failing_picks_the_best() -> None:
    rows = [
        entry("baseline", 128, {30: 9999.0}, errors=3),  # fast but with errors: does not count
        entry("tree", 128, {30: 313.3}),
        entry("production", 128, {30: None}),  # no result at the target
    ]
    result = preset.choose(rows, CURRENT, 30, PRESETS)
    assert result["choice"]["preset"] == "tree"
    assert result["changed"]
    assert "has no error-free result at C=30" in result["reason"]
    table = preset.table(result, test_numbers=True)
    assert table.startswith("TEST NUMBERS")
    assert "| **tree/bs128** |" in table


def test_nothing_counts_is_an_error() -> None:
    with pytest.raises(
        ValueError, match="no candidate has an error-free result at the target concurrency 30"
    ):
        preset.choose([entry("production", 128, {30: None})], CURRENT, 30, PRESETS)
    with pytest.raises(ValueError, match="no candidate was measured"):
        preset.choose([], CURRENT, 30, PRESETS)


def test_table_columns() -> None:
    result = preset.choose(SEED, CURRENT, 30, PRESETS)
    lines = preset.table(result).splitlines()
    assert lines[0] == "| candidate | C=1 | C=30 (target) | vs current at target | verdict |"
    assert "| baseline/bs128 | 92.7 | 689.4 | -9.2% |  |" in lines
    assert "| **production/bs128 (current)** | 86.8 | 759.3 | - | chosen |" in lines
    assert lines[-1] == "Best per level: C=1: baseline/bs128, C=30: production/bs128 (output tok/s)"


def test_choice_schema_accepts_a_controller_candidate() -> None:
    assert preset.choice_errors({"preset": "production", "cuda_graph_max_bs": 128}, PRESETS) == ""
    assert preset.choice_errors(preset.choose(SEED, CURRENT, 30, PRESETS)["choice"], PRESETS) == ""


@pytest.mark.parametrize(
    "choice",
    [
        {"preset": "unknown", "cuda_graph_max_bs": 128},
        {"preset": "production{{ 7 * 7 }}", "cuda_graph_max_bs": 128},
        {"preset": "production", "cuda_graph_max_bs": 0},
        {"preset": "production", "cuda_graph_max_bs": "128\n"},
        {"preset": "production", "cuda_graph_max_bs": 1234567},
        {"preset": None, "cuda_graph_max_bs": 128},
    ],
)
def test_choice_schema_refuses_what_is_no_candidate(choice: dict[str, Any]) -> None:
    why = preset.choice_errors(choice, PRESETS)
    assert why.startswith("autotune preset choice refused: ")
    assert "allowed a preset of sglang_presets (" in why
