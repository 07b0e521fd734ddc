"""The verify role's input rules (plugins/plugin_utils/input_rules/verify.py), pure: called with plain
dicts as the action sglang.deploy.validate_inputs templates them (issue 33 item 4)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from test_input_rules import _defaults, _spec_values

verify = importlib.import_module("ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules.verify")


def _verify(**over: Any) -> dict[str, Any]:
    d = _defaults("verify")
    v = _spec_values("verify", d)
    v.update(
        verify_python="/opt/sglang/current/venv/bin/python",
        verify_nccl_env_file="/etc/sglang/nccl.env",
        verify_tokenizer="/opt/models/target",
        verify_router_url="",
        verify_require_gate=True,
        preflight_lab_mode=False,
        preflight_gpu_count=1,
        preflight_gpu_names=["NVIDIA H200"],
        preflight_gpu_compute_capability="9.0",
        preflight_driver_version="580.65.06",
        preflight_launch_spec={"endpoint": {"port": 30000}},
    )
    v.update(over)
    return v


def test_verify_defaults_pass() -> None:
    assert verify.errors(_verify()) == []
    assert verify.errors(_verify(verify_router_url="http://router.lab:30080/", verify_cuda_arch="90")) == []
    # the speculation target is checked only when the gain is required
    assert (
        verify.errors(_verify(verify_require_speculation_gain=False, verify_speculation_target_concurrency=7))
        == []
    )


def test_verify_needs_preflight_facts_and_the_launch_spec() -> None:
    v = _verify()
    del v["preflight_gpu_names"]
    assert verify.errors(v) == [verify.NEEDS]
    assert verify.errors(_verify(preflight_launch_spec={})) == [verify.NEEDS_SPEC]


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"verify_nccl_reps": 4}, "bad verify input: verify_nccl_reps=4: allowed an integer >= 5"),
        ({"verify_nccl_iters": 0}, "verify_nccl_iters=0: allowed an integer >= 1"),
        ({"verify_cuda_arch": "sm90"}, 'verify_cuda_arch="sm90": allowed'),
        ({"verify_python": "python3"}, 'verify_python="python3": allowed an absolute path'),
        ({"verify_nccl_env_file": "/etc/a b"}, 'verify_nccl_env_file="/etc/a b"'),
        ({"verify_router_url": "ftp://x"}, 'verify_router_url="ftp://x": allowed "" (no router benchmark)'),
        ({"verify_router_bench_repetitions": 0}, "verify_router_bench_repetitions=0"),
        ({"verify_levels": [0]}, "verify_levels=[0]: allowed a non-empty list of positive integers"),
        (
            {"verify_levels": [1, 5000]},
            "verify_levels=[1, 5000]: allowed a non-empty list of positive integers 1-4096",
        ),
        ({"verify_bench_warmup_requests": -1}, "verify_bench_warmup_requests=-1"),
        ({"verify_bench_output_len": 3}, "verify_bench_output_len=3: allowed an integer >= 4"),
        ({"verify_gate_tolerance_pct": 100}, "verify_gate_tolerance_pct=100: allowed a number 0 <= x < 100"),
        ({"verify_tokenizer": "Qwen/Qwen3-8B"}, 'verify_tokenizer="Qwen/Qwen3-8B": allowed an absolute path'),
        (
            {"verify_doc_path": "/tmp/doc dir/"},
            'verify_doc_path="/tmp/doc dir/": allowed an absolute file path',
        ),
        ({"verify_doc_path": "/var/lib/"}, 'verify_doc_path="/var/lib/"'),
        ({"verify_skip_layers": ["gpu", "router"]}, 'verify_skip_layers=["gpu", "router"]'),
        ({"verify_skip_layers": "gpu"}, 'verify_skip_layers="gpu"'),
        ({"verify_doc_write": "never"}, 'verify_doc_write="never": allowed auto'),
        ({"verify_bench_num_prompts": 1000000}, "verify_bench_num_prompts=1000000: allowed auto"),
        ({"verify_bench_prompts_mode": "fast"}, 'verify_bench_prompts_mode="fast": allowed scaled'),
        ({"verify_gate_noise_k": 21}, "verify_gate_noise_k=21: allowed a number 0 <= k <= 20"),
        ({"verify_gate_repetitions": 100}, "verify_gate_repetitions=100: allowed an integer 1..99"),
        ({"verify_gate_confirm": "maybe"}, 'verify_gate_confirm="maybe": allowed true or false'),
        ({"verify_baseline_repetitions": 2}, "verify_baseline_repetitions=2: allowed an integer 3..99"),
        ({"verify_record_baseline": "sometimes"}, 'verify_record_baseline="sometimes": allowed auto'),
        ({"verify_require_gate": "yes"}, 'verify_require_gate="yes": allowed true or false'),
        ({"verify_require_speculation_gain": 2}, "verify_require_speculation_gain=2"),
        (
            {"verify_require_speculation_gain": True, "verify_speculation_target_concurrency": 7},
            "verify_speculation_target_concurrency=7: allowed one of verify_levels (",
        ),
        ({"verify_speculation_baseline_preset": "Base"}, 'verify_speculation_baseline_preset="Base"'),
        ({"verify_gate_accept_tolerance_pct": "5%"}, 'verify_gate_accept_tolerance_pct="5%"'),
        ({"verify_startup_tolerance_pct": -1}, "verify_startup_tolerance_pct=-1"),
        ({"verify_startup_slack_s": "10s"}, 'verify_startup_slack_s="10s"'),
        ({"verify_baseline_records": ["a", "b"]}, 'verify_baseline_records="2 record(s)": allowed a mapping'),
        ({"verify_same_window": "often"}, 'verify_same_window="often": allowed auto, true or false'),
        ({"verify_same_window_repetitions": 2}, "verify_same_window_repetitions=2: allowed an integer 3..99"),
        (
            {"verify_same_window_repetitions": 4, "verify_same_window_max_repetitions": 3},
            "verify_same_window_max_repetitions=3: allowed an integer 3..99, at least",
        ),
        (
            {"verify_same_window_shortfall_pct": 0},
            "verify_same_window_shortfall_pct=0: allowed a number 0 < x",
        ),
        ({"verify_same_window_seed": "abc"}, 'verify_same_window_seed="abc": allowed "" (drawn per run)'),
        (
            {"verify_same_window_probe_prompts": 0},
            "verify_same_window_probe_prompts=0: allowed an integer 1..1000",
        ),
        (
            {"verify_same_window_inconclusive": "pass"},
            'verify_same_window_inconclusive="pass": allowed rollback',
        ),
        ({"verify_same_window_capacity_file": "rel/x.json"}, 'verify_same_window_capacity_file="rel/x.json"'),
        ({"verify_calibrate": "sometimes"}, 'verify_calibrate="sometimes": allowed true or false'),
        ({"verify_calibration_detect_pct": 5}, "verify_calibration_detect_pct=5: allowed a number above"),
        ({"verify_calibration_record": ["x"]}, 'verify_calibration_record="not a mapping"'),
    ],
)
def test_verify_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = verify.errors(_verify(**over))
    assert any(expected in e for e in errors), errors


def test_verify_reports_every_error_at_once() -> None:
    errors = verify.errors(_verify(verify_nccl_reps=2, verify_doc_write="x", verify_gate_noise_k=50))
    assert len(errors) == 3, errors
