"""The autotune role's input rules (plugins/plugin_utils/input_rules/autotune.py), pure: called with
plain dicts as the action sglang.deploy.validate_inputs templates them (issue 33 item 4)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from test_input_rules import _defaults, _spec_values

autotune = importlib.import_module(
    "ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules.autotune"
)


def _autotune(**over: Any) -> dict[str, Any]:
    d = _defaults("autotune")
    v = _spec_values("autotune", d)
    v.update(
        autotune_python="/opt/sglang/current/venv/bin/python",
        autotune_record_dir="/srv/inventory/host_vars/h1",
        sglang_presets_allowed=d["sglang_presets_allowed"],
        preflight_lab_mode=False,
        preflight_gpu_count=2,
        preflight_launch_spec={"tp_per_node": 2},
    )
    v.update(over)
    return v


def test_autotune_defaults_pass() -> None:
    assert autotune.errors(_autotune()) == []
    assert autotune.errors(_autotune(autotune_parts=[], autotune_nccl_measurements_file="/tmp/m.json")) == []


def test_autotune_needs_preflight_facts() -> None:
    v = _autotune()
    del v["preflight_launch_spec"]
    assert autotune.errors(v) == [autotune.NEEDS]


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"autotune_parts": ["nccl", "bench"]}, 'autotune_parts=["nccl", "bench"]: allowed a list of nccl'),
        ({"autotune_parts": "nccl"}, 'autotune_parts="nccl": allowed'),
        ({"autotune_python": "python3"}, 'autotune_python="python3": allowed an absolute path'),
        ({"autotune_record_dir": "host_vars/x"}, 'autotune_record_dir="host_vars/x": allowed an absolute'),
        ({"autotune_report_dir": "relative"}, 'bad autotune input: autotune_report_dir="relative": allowed'),
        ({"autotune_report_dir": "/var/lib/x y"}, 'autotune_report_dir="/var/lib/x y"'),
        ({"autotune_nccl_candidates": [{"name": "x", "vars": {}}]}, "one of them named defaults"),
        ({"autotune_nccl_candidates": [{"name": "defaults"}]}, "autotune_nccl_candidates="),
        (
            {
                "autotune_nccl_candidates": [
                    {"name": "defaults", "vars": {}},
                    {"name": "defaults", "vars": {}},
                ]
            },
            "(unique)",
        ),
        ({"autotune_nccl_candidates": [{"name": "Defaults", "vars": {}}]}, "autotune_nccl_candidates="),
        (
            {"autotune_nccl_candidates": [{"name": "defaults", "vars": {"NCCL_PROTO": "Fast"}}]},
            "autotune_nccl_candidates (variables)=",
        ),
        (
            {"autotune_nccl_candidates": [{"name": "defaults", "vars": {"FOO": "1"}}]},
            "variable name 'FOO' is not allowed",
        ),
        ({"autotune_nccl_reps": 2}, "autotune_nccl_reps=2: allowed an integer >= 5"),
        ({"autotune_nccl_decode_sizes": []}, "autotune_nccl_decode_sizes=[]"),
        ({"autotune_nccl_decode_sizes": ["8G"]}, 'autotune_nccl_decode_sizes=["8G"]'),
        ({"autotune_nccl_prefill_sizes": ["32 M"]}, "autotune_nccl_prefill_sizes="),
        ({"autotune_nccl_iters": 0}, "autotune_nccl_iters / autotune_nccl_prefill_iters"),
        ({"autotune_nccl_warmup": -1}, "integers >= 1 (warm-up >= 0)"),
        ({"autotune_nccl_busbw_floor_pct": 100}, "the floor < 100"),
        ({"autotune_nccl_tie_pct": "1%"}, "autotune_nccl_busbw_floor_pct / autotune_nccl_min_gain_pct"),
        ({"autotune_nccl_measurements_file": "m.json"}, 'autotune_nccl_measurements_file="m.json"'),
        ({"autotune_preset_presets": []}, "autotune_preset_presets=[]: allowed a non-empty list"),
        ({"autotune_preset_presets": ["fast"]}, "sglang_presets_allowed (production, baseline, tree)"),
        ({"autotune_preset_cuda_graph_max_bs": [10000]}, "autotune_preset_cuda_graph_max_bs=[10000]"),
        ({"autotune_preset_levels": [1, 30, 10000]}, "autotune_preset_levels=[1, 30, 10000]: allowed"),
        ({"autotune_preset_levels": ["8\n"]}, "autotune_preset_levels="),
        ({"autotune_preset_target_concurrency": 16}, "one of autotune_preset_levels (1, 30)"),
        ({"autotune_preset_num_prompts": "auto"}, 'autotune_preset_num_prompts="auto"'),
        (
            {"autotune_preset_num_prompts": 200000},
            "autotune_preset_num_prompts=200000: allowed an integer 1-100000",
        ),
        ({"autotune_preset_tie_pct": -1}, "autotune_preset_min_gain_pct / autotune_preset_tie_pct="),
    ],
)
def test_autotune_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = autotune.errors(_autotune(**over))
    assert any(expected in e for e in errors), errors


def test_autotune_reports_every_error_at_once() -> None:
    errors = autotune.errors(
        _autotune(autotune_nccl_reps=2, autotune_report_dir="x", autotune_preset_presets=[])
    )
    assert len(errors) == 3, errors
