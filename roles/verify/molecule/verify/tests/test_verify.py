"""verify scenario (testinfra): lab mode prints an explicit skip line per GPU layer and records
each as skipped in verify_results (also written as JSON on the controller); an nvidia-smi test
double that disagrees with preflight's GPU count fails layer 1 naming the layer; tp 1 skips the
NCCL layer saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import moltest

MISMATCH = "verify layer 1 (GPU) failed: nvidia-smi reports 1 GPU(s), preflight_gpu_count=2"
LAYERS = {"gpu": "1 (GPU)", "cuda": "2 (CUDA)", "torch": "3 (torch)", "nccl": "4 (NCCL)"}
HTTP_SKIP = "sglang-kimi not running: not started in lab mode"


def test_lab_mode_skip_lines_and_results(tmp_path: Path) -> None:
    results = tmp_path / "verify-results.json"
    rc, out = moltest.run_playbook("converge.yml", extra=[{"verify_results_file": str(results)}])
    assert rc == 0, out[-3000:]
    for title in LAYERS.values():
        assert f'"msg": "verify layer {title} skipped: no GPU (lab mode)"' in out, out[-3000:]
    assert f'"msg": "verify layer 5 (HTTP) skipped: {HTTP_SKIP}"' in out, out[-3000:]
    assert f"verify layers 6-8 (benchmark, gate, rollback) skipped: {HTTP_SKIP}" in out, out[-3000:]
    assert "passed:" not in out
    doc: dict[str, Any] = json.loads(results.read_text())
    expected = {key: {"status": "skipped", "reason": "no GPU (lab mode)"} for key in LAYERS}
    assert doc["results"] == {**expected, "http": {"status": "skipped", "reason": HTTP_SKIP}}
    assert moltest.totals(out)["failed"] == 0


def test_gpu_count_differs_from_preflight_fails_layer_1(host: Any) -> None:
    rc, out = moltest.run_playbook("gpu_mismatch.yml")
    assert rc != 0, out[-3000:]
    assert MISMATCH in out, out[-3000:]
    assert "verify layer 2" not in out  # the run stopped at the failed layer
    assert not host.file("/usr/local/bin/nvidia-smi").exists  # the double is gone again


def test_tp1_skips_the_nccl_layer() -> None:
    rc, out = moltest.run_playbook("tp1.yml", "--tags", "verify_nccl")
    assert rc == 0, out[-3000:]
    assert '"msg": "verify layer 4 (NCCL) skipped: tp 1 (no all-reduce)"' in out, out[-3000:]
    assert "verify layer 1" not in out
