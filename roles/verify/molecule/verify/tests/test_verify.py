"""verify scenario (testinfra): lab mode prints an explicit skip line per GPU layer and records
each as skipped in verify_results (also written as JSON on the controller); an nvidia-smi test
double that disagrees with preflight's GPU count fails layer 1 naming the layer; tp 1 skips the
NCCL layer saying why; verify_skip_layers + verify_doc_write=always write the production document
from layers 1-4 on a host without a release (with the autotune role's record, nccl_env_tuned, its
section 5 shows the NCCL choice and table); a bad verify_skip_layers entry fails naming it."""

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
        assert f'"verify layer {title} skipped: no GPU (lab mode)"' in out, out[-3000:]
    assert f'"verify layer 5 (HTTP) skipped: {HTTP_SKIP}"' in out, out[-3000:]
    assert f"verify layers 6-8 (benchmark, gate, rollback) skipped: {HTTP_SKIP}" in out, out[-3000:]
    assert "passed:" not in out
    doc: dict[str, Any] = json.loads(results.read_text())
    expected = {key: {"status": "skipped", "reason": "no GPU (lab mode)"} for key in LAYERS}
    assert doc["results"] == {**expected, "http": {"status": "skipped", "reason": HTTP_SKIP}}
    assert moltest.totals(out)["failed"] == 0


def test_check_mode_runs_no_gpu_work() -> None:
    """Check mode is light on a live server's GPUs: layers 2-4 (a kernel, a torch allocation, an
    all-reduce) are skipped for check mode, a reason that comes before lab mode's."""
    rc, out = moltest.run_playbook("converge.yml", "--check")
    assert rc == 0, out[-3000:]
    why = "check mode (read-only: no kernel, no allocation on the GPUs)"
    for key in ("cuda", "torch", "nccl"):
        assert f"verify layer {LAYERS[key]} skipped: {why}" in out, out[-3000:]
    assert '"verify layer 1 (GPU) skipped: no GPU (lab mode)"' in out, out[-3000:]


def test_gpu_count_differs_from_preflight_fails_layer_1(host: Any) -> None:
    rc, out = moltest.run_playbook("gpu_mismatch.yml")
    assert rc != 0, out[-3000:]
    assert MISMATCH in out, out[-3000:]
    assert "verify layer 2" not in out  # the run stopped at the failed layer
    assert not host.file("/usr/local/bin/nvidia-smi").exists  # the double is gone again


def test_tp1_skips_the_nccl_layer() -> None:
    rc, out = moltest.run_playbook("tp1.yml", "--tags", "verify_nccl")
    assert rc == 0, out[-3000:]
    assert '"verify layer 4 (NCCL) skipped: tp 1 (no all-reduce)"' in out, out[-3000:]
    assert "verify layer 1" not in out


def test_doc_written_from_layers_1_to_4_without_a_release(host: Any) -> None:
    rc, out = moltest.run_playbook("doc_only.yml")
    assert rc == 0, out[-3000:]
    assert '"verify layer 5 (HTTP) skipped: listed in verify_skip_layers"' in out, out[-3000:]
    doc = host.file("/var/lib/sglang-deploy/production_v2.md")
    assert doc.is_file
    assert doc.user == "root"
    assert doc.mode == 0o644
    text = doc.content_string
    headings = [ln for ln in text.splitlines() if ln.startswith("## ") and ln[3:4].isdigit()]
    assert len(headings) == 9, headings
    assert "No release receipt at `/opt/sglang/current/receipt.json`" in text
    assert "The benchmark (layer 6) did not run in this verify run: sglang-kimi" not in text
    assert "did not run in this verify run: listed in verify_skip_layers" in text
    assert "- gpu: skipped: no GPU (lab mode)" in text
    assert "Env file `/etc/sglang/nccl.env` is not on this host" in text
    # what /usr/bin/python3 really loads, asked live (a parse failure would have failed the play)
    assert "| torch (as loaded, live) | unknown (ModuleNotFoundError" in text
    assert "The versions below are what `/usr/bin/python3` loads (live)" in text
    assert "NCCL autotune" not in text  # no record of the autotune role on this host
    results = json.loads(host.file("/var/lib/sglang-deploy/verify-results.json").content_string)
    assert results["results"]["http"] == {"status": "skipped", "reason": "listed in verify_skip_layers"}
    assert "bench" not in results["results"]
    host.run_expect(
        [0], "rm -f /var/lib/sglang-deploy/production_v2.md /var/lib/sglang-deploy/verify-results.json"
    )


def test_doc_shows_the_nccl_autotune_record(host: Any) -> None:
    # the autotune role's record as host_vars/<host>/nccl_tuned.yml holds it (trimmed: two rows)
    tuned = {
        "choice": "defaults",
        "vars": {},
        "reason": "kept the NCCL defaults: no candidate's decode gain exceeded the measured noise",
        "recorded_at": "2026-11-30T19:12:51Z",
        "hardware": "2x NVIDIA H200",
        "torch": "2.11.0+cu130",
        "nccl": "2.28.9",
        "source": "measured on this host",
        "table": ["| candidate | decode mean us (spread) | verdict |", "|---|---|---|",
                  "| **defaults** | 17.6 (12%) | chosen (defaults kept) |"],
    }  # fmt: skip
    rc, out = moltest.run_playbook("doc_only.yml", extra=[{"nccl_env_tuned": tuned}])
    assert rc == 0, out[-3000:]
    text = host.file("/var/lib/sglang-deploy/production_v2.md").content_string
    section5 = text.split("## 5.", 1)[1].split("## 6.", 1)[0]
    assert (
        "NCCL autotune of this host (`playbooks/autotune.yml --tags autotune_nccl`, recorded 2026-11"
        in section5
    )
    assert ": recorded, not in use (the profile is auto, not tuned)." in section5
    assert "Choice **defaults**, no variables (NCCL defaults): kept the NCCL defaults" in section5
    assert "| **defaults** | 17.6 (12%) | chosen (defaults kept) |" in section5
    host.run_expect(
        [0], "rm -f /var/lib/sglang-deploy/production_v2.md /var/lib/sglang-deploy/verify-results.json"
    )


def test_bad_skip_layer_is_named() -> None:
    rc, out = moltest.run_playbook("doc_only.yml", extra=[{"verify_skip_layers": ["http", "gpus"]}])
    assert rc != 0
    assert "verify_skip_layers" in out, out[-3000:]
    assert "gpus" in out, out[-3000:]
