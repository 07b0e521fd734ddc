"""Layer 9 of the verify role without a host: roles/verify/templates/production_v2.md.j2 rendered
from fixed inputs through plugins/module_utils/verify_doc.py (+ verify_scrub.py, as the filter
``sglang.deploy.verify_doc_context`` composes them), one golden file per preset under
tests/data/verify_doc/. The launch spec is the real one (plugins/module_utils/launch_spec.py with the
shipped defaults of group_vars/all). Refresh the golden files with SGLANG_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from modload import load_module

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "verify_doc"
TEMPLATE = REPO / "roles" / "verify" / "templates" / "production_v2.md.j2"
KEY = "DocTestKey-0123456789-abcdefXYZ"  # test-only value
PRESETS = ("production", "baseline", "tree")
SECTIONS = [
    "## 1. Hardware",
    "## 2. Software Stack",
    "## 3. Configuration Rationale",
    "## 4. Key Flags Explained",
    "## 5. NCCL Tuning",
    "## 6. Exact Launch Command",
    "## 7. Systemd Service",
    "## 8. Patches Applied",
    "## 9. Model Paths and Benchmark Logs",
]


D = load_module("verify_doc", REPO / "plugins" / "module_utils" / "verify_doc.py")
S = load_module("verify_scrub", REPO / "plugins" / "module_utils" / "verify_scrub.py")
G = load_module("verify_gate", REPO / "plugins" / "module_utils" / "verify_gate.py")
L = load_module("launch_spec", REPO / "plugins" / "module_utils" / "launch_spec.py")
GV: dict[str, Any] = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())
BASE: dict[str, Any] = yaml.safe_load((REPO / "group_vars" / "all" / "baseline.yml").read_text())


def launch_spec(preset: str, *, api_key_required: bool = True) -> dict[str, Any]:
    """preflight's launch spec for ``preset`` (roles/preflight/vars/main.yml's inputs, shipped defaults)."""
    cfg = {
        "preset": preset,
        "presets": GV["sglang_presets"],
        "presets_allowed": GV["sglang_presets_allowed"],
        "num_steps": GV["sglang_speculative_num_steps"],
        "eagle_topk": GV["sglang_speculative_eagle_topk"],
        "num_draft_tokens": GV["sglang_speculative_num_draft_tokens"],
        "spec_v2": GV["sglang_spec_v2"],
        "speculative_disable_batch_threshold": GV["sglang_speculative_disable_batch_threshold"],
        "model_path": "/data/models/kimi",
        "draft_model_path": "/data/eagle3/output_100k_sglang/4",
        "served_model_name": "kimi",
        "trust_remote_code": GV["sglang_trust_remote_code"],
        "tp_size": 8,
        "tp_size_max": 64,
        "host": GV["sglang_service_host"],
        "port": GV["sglang_service_port"],
        "attention_backend": GV["sglang_attention_backend"],
        "cuda_graph_max_bs": GV["sglang_cuda_graph_max_bs"],
        "allreduce_fusion": GV["sglang_enable_flashinfer_allreduce_fusion"],
        "torch_symm_mem": GV["sglang_enable_torch_symm_mem"],
        "mem_fraction_static": GV["sglang_mem_fraction_static"],
        "extra_args": GV["sglang_extra_args"],
        "environment": GV["sglang_launch_environment"],
        "api_key": KEY if api_key_required else None,
        "api_key_required": api_key_required,
        "api_key_file": GV["sglang_api_key_file"],
        "python": "/opt/sglang/current/venv/bin/python",
        "nccl_profile": GV["sglang_nccl_profile"],
        "nccl_profiles_allowed": GV["sglang_nccl_profiles_allowed"],
        "nccl_env_file": GV["sglang_nccl_env_file"],
        "interconnect": "pcie",
    }
    resolved: dict[str, Any] = L.resolve(cfg)
    assert resolved["errors"] == []
    spec: dict[str, Any] = resolved["spec"]
    return spec


def inputs(preset: str, *, api_key_required: bool = True) -> dict[str, Any]:
    """What verify/tasks/main.yml (layer 9) hands the filter, fixed; the key hidden in several inputs."""
    measured = {"production": (80.1, 701.0), "baseline": (90.0, 650.2), "tree": (40.0, 300.0)}[preset]
    levels = [
        {
            "level": 1,
            "output_tps": measured[0],
            "ttft_p50_ms": 55.2,
            "ttft_p99_ms": 80.9,
            "itl_p50_ms": 11.0,
            "itl_p99_ms": 14.5,
            "accept_length": None if preset == "baseline" else 2.41,
            "errors": 0,
            "ok": True,
        },
        {
            "level": 30,
            "output_tps": measured[1],
            "ttft_p50_ms": 210.0,
            "ttft_p99_ms": 420.3,
            "itl_p50_ms": 38.1,
            "itl_p99_ms": 61.0,
            "accept_length": None if preset == "baseline" else 2.2,
            "errors": 0,
            "ok": True,
        },
    ]
    fp = G.fingerprint({
        "model_path": "/models/Kimi", "preset": preset, "levels": [1, 30], "dataset": "coding",
        "output_len": 200, "warmup_requests": 5, "prompts_mode": "seed",
        "prompts_per_level": G.prompts_per_level([1, 30], "auto", "seed"),
        "gpu_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8, "gpu_count": 8, "tp_size": 8,
    })  # fmt: skip
    baseline = G.select_baseline(
        fp, records={}, seed_table=BASE["sglang_baseline_output_tps"],
        seed_hardware=BASE["sglang_baseline_hardware"], seed_match=BASE["sglang_baseline_fingerprint"],
    )  # fmt: skip
    assert baseline["source"] == "seed"
    gate = {
        **G.gate(levels, baseline, 10.0),
        "fingerprint": fp,
        "prompts_mode": "seed",
        "prompts_per_level": {1: 30, 30: 30},
        "repetitions": 1,
    }
    results = {
        "gpu": {"status": "passed", "reason": "8 GPU(s) as preflight found"},
        "nccl": {
            "status": "passed",
            "reason": "all-reduce ok",
            "nccl": "2.27.7",
            "latency_us_8k": 21.3,
            "latency_us_512k": 60.2,
            "busbw_gbps_256m": 41.7,
        },
        "http": {"status": "passed", "reason": f"/health 200 (a key {KEY} leaked into a reason)"},
        "bench": {"status": "passed", "reason": "C=1 ...", "levels": levels},
        "gate": {**gate, "table": G.gate_table(gate)},
    }
    return {
        "host": "gpu-node-1",
        "generated_at": "2026-01-02T03:04:05Z",
        "status": G.verdict(results, require_gate=True)["status"],
        "verdict": G.verdict(results, require_gate=True),
        "facts": {
            "lab_mode": False,
            "gpu_count": 8,
            "gpu_names": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8,
            "gpu_memory_mib": 97887,
            "gpu_compute_capability": "12.0",
            "driver_version": "580.95.05",
            "interconnect": "pcie",
            "gpu_links": {"0-1": "PIX"},
            # preflight_pcie_p2p as preflight exports it (plugins/module_utils/pcie_acs.py)
            "pcie_p2p": {
                "checked": True,
                "issues": [
                    "ACS redirects P2P to the root complex on 1 bridge(s) above the GPUs: "
                    "16:00.0 (Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)): "
                    "ACSCtl ReqRedir+ CmpltRedir+"
                ],
                "iommu": {"enabled": False, "passthrough": False, "cmdline": []},
            },
            "os": "Ubuntu 24.04",
            "kernel": "6.8.0-64-generic",
            "cpu": "AMD EPYC 9554",
            "cpu_count": 128,
            "memory_mib": 1031000,
            "hostname": "gpu-node-1",
        },
        "receipt": {
            "release_id": "20260101T000000Z-abcdef12",
            "installed_at": "2026-01-01T00:00:00Z",
            "python": {"version": "3.12.3"},
            "sources": {"sglang_source": "git", "installer": "uv 0.9.5", "torch_requirement": "torch==2.9.1"},
            "manifest": {"sglang_git_commit": "0123456789abcdef0123456789abcdef01234567"},
            "versions": {
                "torch": "2.9.1+cu130",
                "sgl-kernel": "0.3.21",
                "sglang": "0.5.6",
                "transformers": "4.57.1",
            },
            "lock": {"sha256": "ab" * 32},
            "patches": [
                {
                    "name": "0001-fix",
                    "file": "patches/0001-fix.patch",
                    "target": "sglang",
                    "sha256": "cd" * 32,
                    "touched": ["sglang/srt/server_args.py"],
                }
            ],
            "patched_files": {"sglang/srt/server_args.py": "ef" * 32},
            "note": f"key {KEY} in the receipt",
        },
        "spec": launch_spec(preset, api_key_required=api_key_required),
        "results": results,
        "levels": levels,
        "baseline": baseline,
        "gate": results["gate"],
        "seed": {
            "hardware": BASE["sglang_baseline_hardware"],
            "workload": BASE["sglang_baseline_workload"],
            "output_tps": BASE["sglang_baseline_output_tps"],
            "notes": BASE["sglang_baseline_notes"],
        },
        "stack": {
            "torch": "2.9.1+cu130",
            "torch_cuda": "13.0",
            "python": "3.12.3",
            "python_bin": "/opt/sglang/current/venv/bin/python",
        },
        "nccl": {"loaded": "2.27.7", "expected": "2.27.7", "source": "layer 4 (NCCL all-reduce)"},
        "cuda": {"version": "13.0.1", "home": "/usr/local/cuda-13.0"},
        "nccl_env": {
            "file": "/etc/sglang/nccl.env",
            "text": f"# profile pcie\nNCCL_P2P_LEVEL=PIX\nX_KEY={KEY}\n",
        },
        "service": {"name": "sglang-kimi", "unit_path": "/etc/systemd/system/sglang-kimi.service"},
        "paths": {
            "doc": "/var/lib/sglang-deploy/production_v2.md",
            "results": "/var/lib/sglang-deploy/verify-results.json",
            "logs": ["/var/lib/sglang-deploy/bench/20260102T030405Z-bench"],
            "release": "/opt/sglang/releases/20260101T000000Z-abcdef12",
        },
        "rollback": None,
    }


def render(data: dict[str, Any], **host_vars: Any) -> str:
    """The filter's composition (doc_context, then scrub_data with the key) and the template module's
    Jinja settings (trim_blocks, undefined variables are errors); ``host_vars``: the host's variables the
    template reads directly (a test double's sglang_service_exec_override)."""
    context = S.scrub_data(D.doc_context(data), [KEY])
    env = jinja2.Environment(
        trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    return env.from_string(TEMPLATE.read_text()).render(__verify_doc=context, **host_vars)


@pytest.mark.parametrize("preset", PRESETS)
def test_document_matches_golden(preset: str) -> None:
    text = render(inputs(preset))
    golden = GOLDEN / f"production_v2.{preset}.md"
    if os.environ.get("SGLANG_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with SGLANG_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{golden} differs (SGLANG_UPDATE_GOLDEN=1 refreshes it)"


@pytest.mark.parametrize("preset", PRESETS)
def test_nine_sections_in_order(preset: str) -> None:
    text = render(inputs(preset))
    headings = [line for line in text.splitlines() if re.match(r"^## [0-9]\. ", line)]
    assert headings == SECTIONS
    assert text.startswith(f"# Production deployment: gpu-node-1 ({preset} preset)\n")


@pytest.mark.parametrize("preset", PRESETS)
def test_key_never_present_placeholder_in_command(preset: str) -> None:
    text = render(inputs(preset))
    assert KEY not in text
    section6 = text.split("## 6. Exact Launch Command", 1)[1].split("## 7.", 1)[0]
    assert "--config /etc/sglang/sglang-config.yaml" in section6
    assert "LoadCredential=sglang-config.yaml:/etc/sglang/sglang-config.yaml" in section6
    assert "--api-key" not in section6
    assert "${SGLANG_API_KEY}" not in section6


def test_no_auth_no_placeholder() -> None:
    text = render(inputs("production", api_key_required=False))
    assert KEY not in text
    assert "--config" not in text
    assert "LoadCredential" not in text


def test_speculative_flags_per_preset() -> None:
    assert (
        "--speculative-algorithm" not in render(inputs("baseline")).split("## 4.", 1)[1].split("## 5.", 1)[0]
    )
    for preset in ("production", "tree"):
        flags = render(inputs(preset)).split("## 4.", 1)[1].split("## 5.", 1)[0]
        assert "--speculative-algorithm" in flags


def test_rollback_banner() -> None:
    data = inputs("tree")
    data["rollback"] = {
        "status": "done",
        "from": "R2",
        "to": "R1",
        "reason": "current moved back from R2 to R1",
    }
    text = render(data)
    assert "> **Rolled back**: current moved back from R2 to R1." in text
    assert "**Rolled back**" not in render(inputs("tree"))


def test_a_test_double_is_named_as_such() -> None:
    """A unit whose launcher is a test double (sglang_service_exec_override): the document says so at its
    top, with the unit's description; a real server's document has no such note."""
    override = ["/opt/sglang/current/venv/bin/python", "/usr/local/lib/d/sglang_protocol_double.py"]
    described = {"sglang_service_description": "a TEST DOUBLE"}
    text = render(inputs("production"), sglang_service_exec_override=override, **described)
    head = text.split("## 1. Hardware", 1)[0]
    assert "> **Test double, not SGLang**: the unit `sglang-kimi` runs" in head
    assert f"`{' '.join(override)}`" in head
    assert '> its description: "a TEST DOUBLE". Every figure below is the test double\'s' in head
    assert "Test double" not in render(inputs("production"))


def test_ungated_says_so_once() -> None:
    data = inputs("production")
    data["gate"] = {
        "status": "ungated",
        "reason": "ungated: no comparable baseline for no GPU (lab mode), tp 1/production",
    }
    text = render(data)
    assert "Gate: **ungated**: no comparable baseline for no GPU (lab mode), tp 1/production\n" in text


def test_layers_1_to_4_only_without_a_release() -> None:
    """verify_doc_write=always on a GPU host before its deployment: no receipt, no benchmark. The
    document says so instead of inventing versions or figures, and shows what the python loads."""
    data = inputs("production")
    data["receipt"] = {"missing": "/opt/sglang/current/receipt.json"}
    data["stack"] = {
        "torch": "2.11.0+cu130",
        "torch_cuda": "13.0",
        "python": "3.12.3",
        "python_bin": "/usr/bin/python3",
    }
    data["levels"] = []
    data["gate"] = {}
    data["results"] = {k: v for k, v in data["results"].items() if k in ("gpu", "cuda", "torch", "nccl")}
    data["results"]["http"] = {"status": "skipped", "reason": "listed in verify_skip_layers"}
    data["bench_why"] = "listed in verify_skip_layers"
    data["paths"]["logs"] = []
    text = render(data)
    assert [ln for ln in text.splitlines() if re.match(r"^## [0-9]\. ", ln)] == SECTIONS
    software = text.split("## 2.", 1)[1].split("## 3.", 1)[0]
    assert "No release receipt at `/opt/sglang/current/receipt.json`" in software
    assert "| torch (as loaded, live) | 2.11.0+cu130, CUDA 13.0 |" in software
    assert "| sglang | unknown (no receipt) |" in software
    rationale = text.split("## 3.", 1)[1].split("## 4.", 1)[0]
    assert "did not run in this verify run: listed in verify_skip_layers" in rationale
    assert "| C | output tok/s" not in rationale
    assert "Gate:" not in rationale
    assert "(none)" in text.split("## 8.", 1)[1]
    assert "- http: skipped: listed in verify_skip_layers" in text


def test_nccl_autotune_table_when_the_host_has_a_record() -> None:
    """The autotune role's record (nccl_env_tuned, here built from the recorded dual-H200 run 1 as the
    role builds it) adds its choice and table to section 5; without one the section is unchanged."""
    tune = load_module("autotune_nccl", REPO / "plugins" / "module_utils" / "autotune_nccl.py")
    doc = yaml.safe_load((REPO / "bench" / "results" / "2026-11-30-h200x2-autotune-run1.json").read_text())
    result = tune.choose(doc)
    record = {
        "choice": result["choice"],
        "vars": result["vars"],
        "reason": result["reason"],
        "recorded_at": doc["finished_at"],
        "hardware": f"{doc['ranks']}x {doc['gpu']}",
        "torch": doc["torch"],
        "nccl": doc["nccl"],
        "source": "measured on this host",
        "table": tune.table(result).splitlines(),
    }
    plain = render(inputs("production"))
    data = inputs("production")
    data["nccl_tuned"] = record
    text = render(data)
    section5 = text.split("## 5.", 1)[1].split("## 6.", 1)[0]
    assert (
        "NCCL autotune of this host (`playbooks/autotune.yml --tags autotune_nccl`, recorded 2026-11-30T"
        in section5
    )
    assert (
        "2x NVIDIA H200, torch 2.11.0+cu130, NCCL 2.28.9; measured on this host): recorded, not in use"
        in section5
    )
    assert "Choice **defaults**, no variables (NCCL defaults): kept the NCCL defaults" in section5
    assert "| candidate | variables | 8K us |" in section5
    assert "busbw -74% at 256M (floor -5%)" in section5
    assert len([ln for ln in section5.splitlines() if ln.startswith("|")]) == 2 + 12
    # everything else is the document without a record
    assert text.replace(section5, "") == plain.replace(plain.split("## 5.", 1)[1].split("## 6.", 1)[0], "")
    data["spec"]["nccl"]["profile"] = "tuned"
    assert "not in use" not in render(data)
    data["nccl_tuned"] = {}
    assert "NCCL autotune" not in render(data)


def test_pcie_p2p_row() -> None:
    data = inputs("production")
    assert (
        "| PCIe P2P path (preflight: ACS, IOMMU) | ACS redirects P2P to the root complex on 1 bridge(s)"
        in render(data)
    )
    data["facts"]["pcie_p2p"] = {
        "checked": True,
        "issues": [],
        "iommu": {"enabled": True, "passthrough": True},
    }
    assert (
        "| PCIe P2P path (preflight: ACS, IOMMU) | no ACS redirect on the bridges above the GPUs; "
        "IOMMU passthrough |" in render(data)
    )
    data["facts"]["pcie_p2p"] = {"checked": False, "issues": ["x"]}
    assert "PCIe P2P path" not in render(data)
    del data["facts"]["pcie_p2p"]
    assert "PCIe P2P path" not in render(data)
