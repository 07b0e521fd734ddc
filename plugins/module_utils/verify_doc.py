"""The production document's data (layer 9 of the verify role): one context for
roles/verify/templates/production_v2.md.j2, built from LIVE inputs only.

Pure Python, no Ansible import: the filter ``sglang.deploy.verify_doc_context`` calls it on the
controller and ``tests/test_verify_doc.py`` renders the template from fixed inputs (golden file per
preset). The seed's document has nine sections; each key of the context feeds one:

1 hardware (preflight facts), 2 software (the release receipt + the NCCL torch really loads),
3 rationale (this run's numbers beside the baseline table), 4 flags (the launch spec's flags with
their reasons), 5 nccl (the env file in use + layer-4 figures + the autotune table when the host has
a recorded result), 6 command (the spec's copy-paste command, the key as ``${SGLANG_API_KEY}``),
7 service, 8 patches (with sha256), 9 paths + logs.

The filter passes the whole context through ``verify_scrub.scrub_data`` with the API key: nothing
in the document can carry it, whatever an input held.
"""

from __future__ import annotations

from typing import Any

STACK_DISTS = ("torch", "sgl-kernel", "flashinfer-python", "flashinfer-cubin", "sglang", "transformers")
PRESET_TITLES = {
    "baseline": "baseline, no speculation",
    "tree": "EAGLE-3 topk=4, v1 worker",
    "production": "EAGLE-3 topk=1 + spec v2 (production)",
    "cuda128_no_fusion": "old setup CUDA 12.8, no fusion",
}


def _fmt_tps(value: Any) -> str:
    if value is None or value == "":
        return "-"
    try:
        return f"{float(value):.1f}"
    except (TypeError, ValueError):
        return str(value)


def _pcie_p2p(finding: dict[str, Any]) -> str:
    """Preflight's PCIe finding (preflight_pcie_p2p, module_utils/pcie_acs.py) as one cell; "" when it
    was not checked (one GPU, or a profile that does not use PCIe P2P across the system)."""
    if not finding.get("checked"):
        return ""
    if finding.get("issues"):
        return "; ".join(str(i) for i in finding["issues"])
    iommu = finding.get("iommu") or {}
    mode = "passthrough" if iommu.get("passthrough") else ("on" if iommu.get("enabled") else "off")
    return f"no ACS redirect on the bridges above the GPUs; IOMMU {mode}"


def _hardware(facts: dict[str, Any]) -> dict[str, Any]:
    names = list(facts.get("gpu_names") or [])
    count = int(facts.get("gpu_count") or 0)
    links = facts.get("gpu_links") or {}
    return {
        "pcie_p2p": _pcie_p2p(facts.get("pcie_p2p") or {}),
        "lab_mode": bool(facts.get("lab_mode")),
        "gpu_count": count,
        "gpu_names": sorted(set(names)),
        "gpu_memory_mib": facts.get("gpu_memory_mib"),
        "compute_capability": facts.get("gpu_compute_capability") or "-",
        "driver": facts.get("driver_version") or "-",
        "interconnect": facts.get("interconnect") or "none",
        "links": [f"{pair}: {kind}" for pair, kind in sorted(links.items())],
        "os": facts.get("os") or "-",
        "kernel": facts.get("kernel") or "-",
        "cpu": facts.get("cpu") or "-",
        "cpu_count": facts.get("cpu_count") or "-",
        "memory_mib": facts.get("memory_mib") or "-",
        "hostname": facts.get("hostname") or "-",
    }


def _software(
    receipt: dict[str, Any], nccl: dict[str, Any], cuda: dict[str, Any], stack: dict[str, Any]
) -> dict[str, Any]:
    """``stack``: what the venv's python really loads (torch, torch_cuda, python), asked live. Without a
    receipt (``{"missing": path}``: no release of sglang_stack, e.g. a GPU host checked before its
    deployment with its own torch) the table says so and shows only what was loaded."""
    missing = str(receipt.get("missing") or "")
    versions = {str(k).lower(): v for k, v in (receipt.get("versions") or {}).items()}
    python = receipt.get("python") or {}
    sources = receipt.get("sources") or {}
    absent = "unknown (no receipt)" if missing else "not installed"
    rows = [{"name": dist, "version": versions.get(dist, absent)} for dist in STACK_DISTS]
    loaded_torch = str(stack.get("torch") or "")
    if loaded_torch:
        cuda_tag = f", CUDA {stack['torch_cuda']}" if stack.get("torch_cuda") else ""
        rows.insert(1, {"name": "torch (as loaded, live)", "version": f"{loaded_torch}{cuda_tag}"})
    loaded = nccl.get("loaded") or "unknown"
    expected = nccl.get("expected") or "-"
    return {
        "receipt_missing": missing,
        "release_id": receipt.get("release_id") or ("none" if missing else "unknown"),
        "installed_at": receipt.get("installed_at") or "-",
        "python": python.get("version") or stack.get("python") or "-",
        "python_bin": stack.get("python_bin") or "-",
        "source": sources.get("sglang_source") or "-",
        "git_commit": (receipt.get("manifest") or {}).get("sglang_git_commit") or "-",
        "installer": sources.get("installer") or "-",
        "torch_requirement": sources.get("torch_requirement") or "-",
        "dists": rows,
        "cuda_version": cuda.get("version") or "-",
        "cuda_home": cuda.get("home") or "-",
        "nccl_loaded": loaded,
        "nccl_expected": expected,
        "nccl_source": nccl.get("source") or "-",
        "nccl_note": (
            ""
            if loaded in ("unknown", expected) or str(loaded).startswith("unknown")
            else f"differs from the manifest's expectation {expected}"
        ),
        "lock_sha256": (receipt.get("lock") or {}).get("sha256") or "-",
    }


def _rationale(
    preset: str,
    levels: list[dict[str, Any]],
    baseline: dict[str, Any],
    gate: dict[str, Any],
    seed: dict[str, Any],
) -> dict[str, Any]:
    table = seed.get("output_tps") or {}
    seed_levels = sorted({int(lv) for row in table.values() for lv in (row or {})})
    seed_rows = [
        {
            "preset": name,
            "title": PRESET_TITLES.get(name, name),
            "cells": [_fmt_tps((row or {}).get(lv, (row or {}).get(str(lv)))) for lv in seed_levels],
            "deployed": name == preset,
        }
        for name, row in table.items()
    ]
    run_rows = []
    for item in sorted(levels, key=lambda x: int(x["level"])):
        gate_row: dict[str, Any] = next(
            (r for r in gate.get("rows", []) if int(r["level"]) == int(item["level"])), {}
        )
        run_rows.append(
            {
                "level": int(item["level"]),
                "output_tps": _fmt_tps(item.get("output_tps")),
                "baseline": _fmt_tps(gate_row.get("expected")),
                "delta": "-"
                if gate_row.get("delta_pct") is None
                else f"{float(gate_row['delta_pct']):+.1f}%",
                "ttft": f"{_fmt_tps(item.get('ttft_p50_ms'))} / {_fmt_tps(item.get('ttft_p99_ms'))}",
                "itl": f"{_fmt_tps(item.get('itl_p50_ms'))} / {_fmt_tps(item.get('itl_p99_ms'))}",
                "accept_length": "-"
                if item.get("accept_length") is None
                else f"{float(item['accept_length']):.2f}",
                "errors": int(item.get("errors") or 0),
                "allowed": "-"
                if gate_row.get("allowed_pct") is None
                else f"-{float(gate_row['allowed_pct']):.1f}%",
                "margin": "-"
                if gate_row.get("margin_pct") is None
                else f"{float(gate_row['margin_pct']):+.1f}%",
                "repetitions": int(item.get("repetitions") or 1),
                "cv": "-"
                if (item.get("output_tps_spread") or {}).get("cv_pct") is None
                or int(item.get("repetitions") or 1) < 2
                else f"{float(item['output_tps_spread']['cv_pct']):.1f}%",
                "verdict": gate_row.get("verdict", "recorded"),
            }
        )
    status = str(gate.get("status") or "")
    not_gated = status in ("ungated", "not_gated")
    per_level = gate.get("prompts_per_level") or {}
    prompts = ", ".join(f"C={k}: {v}" for k, v in sorted(per_level.items(), key=lambda kv: int(kv[0])))
    return {
        "seed_hardware": seed.get("hardware") or "-",
        "seed_workload": seed.get("workload") or {},
        "seed_levels": seed_levels,
        "seed_rows": seed_rows,
        "seed_notes": list(seed.get("notes") or []),
        "run_rows": run_rows,
        "baseline_source": baseline.get("source") or "none",
        "baseline_reason": baseline.get("reason") or "-",
        "gate_status": "ungated" if not_gated else (status.replace("_", " ") or "not run"),
        "gate_reason": (gate.get("reason") or "-").removeprefix("ungated: ").removeprefix("not gated: ")
        if not_gated
        else (gate.get("reason") or "-"),
        "tolerance_pct": gate.get("tolerance_pct"),
        "noise_k": gate.get("noise_k"),
        "prompts_mode": str(gate.get("prompts_mode") or "-"),
        "prompts": prompts or "-",
        "repetitions": gate.get("repetitions") or 1,
        "fingerprint": str((gate.get("fingerprint") or {}).get("hash") or "-"),
    }


def _nccl_tuned(tuned: dict[str, Any], profile: str) -> dict[str, Any] | None:
    """The autotune role's record of this host (nccl_env_tuned), or None when there is none."""
    if not tuned or not isinstance(tuned.get("vars"), dict):
        return None
    env = tuned["vars"]
    return {
        "choice": str(tuned.get("choice") or "-"),
        "reason": str(tuned.get("reason") or "-"),
        "vars": " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no variables (NCCL defaults)",
        "recorded_at": str(tuned.get("recorded_at") or "-"),
        "hardware": str(tuned.get("hardware") or "-"),
        "versions": f"torch {tuned.get('torch') or '-'}, NCCL {tuned.get('nccl') or '-'}",
        "source": str(tuned.get("source") or "-"),
        "in_use": profile == "tuned",
        "table": [str(line) for line in tuned.get("table") or []],
    }


def _nccl(
    env_file: str,
    env_text: str,
    profile: str,
    layer4: dict[str, Any],
    exists: bool = True,
    *,
    tuned: dict[str, Any] | None = None,
) -> dict[str, Any]:
    lines = [
        ln.rstrip() for ln in (env_text or "").splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    status = layer4.get("status") or "not run"
    figures = []
    if status == "passed":
        for label, key, unit in (
            ("8 KiB all-reduce, graph replay (median)", "latency_us_8k", "us"),
            ("512 KiB all-reduce, graph replay (median)", "latency_us_512k", "us"),
            ("256 MiB all-reduce busbw", "busbw_gbps_256m", "GB/s"),
        ):
            if layer4.get(key) is not None:
                figures.append({"label": label, "value": f"{float(layer4[key]):.1f} {unit}"})
    return {
        "env_file": env_file or "-",
        "env_missing": not exists,
        "profile": profile or "-",
        "lines": lines,
        "layer4_status": status,
        "layer4_reason": layer4.get("reason") or "-",
        "figures": figures,
        "tuned": _nccl_tuned(tuned or {}, profile),
    }


def _patches(receipt: dict[str, Any]) -> list[dict[str, Any]]:
    patched = receipt.get("patched_files") or {}
    out = []
    for patch in receipt.get("patches") or []:
        touched = [{"path": p, "sha256": patched.get(p, "-")} for p in patch.get("touched") or []]
        out.append(
            {
                "name": patch.get("name") or "-",
                "file": patch.get("file") or "-",
                "target": patch.get("target") or "-",
                "sha256": patch.get("sha256") or "-",
                "touched": touched,
            }
        )
    return out


def doc_context(inputs: dict[str, Any]) -> dict[str, Any]:
    """The template's context from the live inputs (see the module docstring).

    ``inputs`` keys: host, generated_at, facts, receipt ({"missing": path} without one), stack (what the
    venv's python loads: torch, torch_cuda, python, python_bin), spec, results (verify_results), levels (bench
    summaries), baseline (select_baseline), gate, seed ({hardware, workload, output_tps, notes}),
    nccl ({loaded, expected, source}), cuda ({version, home}), nccl_env ({file, text}), service
    ({name, unit_path}), paths ({doc, results, logs: [...]}), rollback (dict or None), nccl_tuned
    (the autotune role's record nccl_env_tuned: {choice, vars, reason, recorded_at, table, ...}; absent
    or {} = none, section 5 then shows no autotune table).
    """
    spec = inputs.get("spec") or {}
    results = inputs.get("results") or {}
    preset = str(spec.get("preset") or "-")
    model = spec.get("model") or {}
    speculative = spec.get("speculative") or {}
    service = inputs.get("service") or {}
    name = service.get("name") or "sglang-kimi"
    levels = list(inputs.get("levels") or [])
    flags = [
        {"flag": f.get("flag", ""), "value": "" if f.get("value") in (None, True) else str(f.get("value")),
         "reason": f.get("reason", "")}
        for f in spec.get("flags") or []
    ]  # fmt: skip
    context = {
        "host": inputs.get("host") or "-",
        "generated_at": inputs.get("generated_at") or "-",
        "preset": preset,
        "speculative": speculative,
        "status": inputs.get("status") or "-",
        "verdict": inputs.get("verdict") or {},
        "bench_why": inputs.get("bench_why") or "-",
        "hardware": _hardware(inputs.get("facts") or {}),
        "software": _software(
            inputs.get("receipt") or {},
            inputs.get("nccl") or {},
            inputs.get("cuda") or {},
            inputs.get("stack") or {},
        ),
        "rationale": _rationale(
            preset, levels, inputs.get("baseline") or {}, inputs.get("gate") or {}, inputs.get("seed") or {}
        ),
        "flags": flags,
        "environment": sorted((spec.get("environment") or {}).items()),
        "nccl": _nccl(
            (inputs.get("nccl_env") or {}).get("file", ""),
            (inputs.get("nccl_env") or {}).get("text", ""),
            str((spec.get("nccl") or {}).get("profile") or ""),
            results.get("nccl") or {},
            bool((inputs.get("nccl_env") or {}).get("exists", True)),
            tuned=inputs.get("nccl_tuned") or {},
        ),
        "command": spec.get("command") or "-",
        "auth": spec.get("auth") or {},
        "endpoint": spec.get("endpoint") or {},
        "service": {
            "name": name,
            "unit_path": service.get("unit_path") or f"/etc/systemd/system/{name}.service",
            "commands": [
                f"systemctl status {name}",
                f"systemctl restart {name}",
                f"systemctl stop {name}",
                f"journalctl -u {name} -f",
            ],
        },
        "patches": _patches(inputs.get("receipt") or {}),
        "model": {
            "path": model.get("path") or "-",
            "draft_path": model.get("draft_path") or "-",
            "served_name": model.get("served_name") or "-",
        },
        "paths": inputs.get("paths") or {},
        "layers": [
            {
                "layer": key,
                "status": (value or {}).get("status", "-"),
                "reason": (value or {}).get("reason", ""),
            }
            for key, value in results.items()
        ],
        "rollback": inputs.get("rollback") or None,
    }
    return context
