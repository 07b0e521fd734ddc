"""The input rules of the role autotune (run by sglang.deploy.validate_inputs; see __init__.py).

The preflight facts it needs, the parts, paths, the NCCL candidates (their variables by the nccl_env
role's rule, ``nccl_env_errors``), the measurement's sizes and counts, and the preset sweep (the
benchmark's bounds: plugins/module_utils/bench_limits.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from ansible_collections.sglang.deploy.plugins.filter.nccl_env import nccl_env_errors
from ansible_collections.sglang.deploy.plugins.module_utils.bench_limits import valid_levels, valid_prompts
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import as_json, full

FACTS = ("preflight_lab_mode", "preflight_gpu_count", "preflight_launch_spec", "sglang_presets_allowed")
NEEDS = (
    "autotune needs the facts of the preflight role (preflight_lab_mode, preflight_gpu_count, "
    "preflight_launch_spec): run the preflight role first (playbooks/autotune.yml does)"
)
PERCENT = r"[0-9]+(\.[0-9]+)?"


def _is_list(value: Any) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    """A list or tuple (typed for mypy: the package import is untyped here)."""
    return isinstance(value, list | tuple)


def _all_full(pattern: str, values: Any) -> bool:
    """A non-empty list whose items, as strings, all full-match ``pattern``."""
    return _is_list(values) and len(values) > 0 and all(full(pattern, str(x)) for x in values)


def _candidates_ok(cands: Any) -> bool:
    if not _is_list(cands) or not all(isinstance(c, Mapping) for c in cands):
        return False
    names = [c.get("name", "") for c in cands]
    return (
        all(full("[a-z0-9_]+", n) for n in names)
        and len(set(map(str, names))) == len(names)
        and "defaults" in names
        and all(isinstance(c.get("vars", ""), Mapping) for c in cands)
    )


def _nccl(v: Mapping[str, Any], bad: Any) -> None:
    cands = v.get("autotune_nccl_candidates")
    if not _candidates_ok(cands):
        bad(
            "autotune_nccl_candidates",
            cands,
            "a list of {name: [a-z0-9_]+ (unique), vars: {NCCL_*: value}}, one of them named defaults",
        )
    var_errors = [
        e
        for c in (cands if _is_list(cands) else [])
        if isinstance(c, Mapping) and isinstance(c.get("vars"), Mapping)
        for e in nccl_env_errors(c["vars"])
    ]
    if var_errors:
        bad(
            "autotune_nccl_candidates (variables)",
            var_errors,
            "the nccl_env role's rules for every variable (names and values)",
        )
    reps = v.get("autotune_nccl_reps")
    if not (full("[0-9]+", str(reps)) and int(str(reps)) >= 5):
        bad("autotune_nccl_reps", reps, "an integer >= 5 (a median and a spread need repetitions)")
    for var, pattern, allowed in (
        ("autotune_nccl_decode_sizes", "[0-9]+[KM]?", "a non-empty list of sizes such as 8K, 512K"),
        ("autotune_nccl_prefill_sizes", "[0-9]+[KMG]?", "a non-empty list of sizes such as 32M, 256M"),
    ):
        if not _all_full(pattern, v.get(var)):
            bad(var, v.get(var), allowed)
    counts = [
        v.get(n) for n in ("autotune_nccl_iters", "autotune_nccl_prefill_iters", "autotune_nccl_warmup")
    ]
    if not _all_full("[1-9][0-9]*", counts[:2]) or not full("[0-9]+", str(counts[2])):
        bad(
            "autotune_nccl_iters / autotune_nccl_prefill_iters / autotune_nccl_warmup",
            counts,
            "integers >= 1 (warm-up >= 0)",
        )
    pcts = [
        v.get(n)
        for n in ("autotune_nccl_busbw_floor_pct", "autotune_nccl_min_gain_pct", "autotune_nccl_tie_pct")
    ]
    if not (_all_full(PERCENT, pcts) and float(str(pcts[0])) < 100):
        bad(
            "autotune_nccl_busbw_floor_pct / autotune_nccl_min_gain_pct / autotune_nccl_tie_pct",
            pcts,
            "numbers >= 0 (percent; the floor < 100)",
        )
    measured = v.get("autotune_nccl_measurements_file")
    if not (measured == "" or full("/.*", measured)):
        bad("autotune_nccl_measurements_file", measured, '"" (measure) or an absolute path on the controller')


def _preset(v: Mapping[str, Any], bad: Any) -> None:
    presets, allowed = v.get("autotune_preset_presets"), v.get("sglang_presets_allowed")
    allowed = list(allowed) if _is_list(allowed) else []
    if not (_is_list(presets) and len(presets) > 0 and all(p in allowed for p in presets)):
        bad(
            "autotune_preset_presets",
            presets,
            f"a non-empty list of sglang_presets_allowed ({', '.join(map(str, allowed))})",
        )
    if not _all_full("[1-9][0-9]{0,3}", v.get("autotune_preset_cuda_graph_max_bs")):
        bad(
            "autotune_preset_cuda_graph_max_bs",
            v.get("autotune_preset_cuda_graph_max_bs"),
            "a non-empty list of integers 1-4096",
        )
    levels = v.get("autotune_preset_levels")
    if not valid_levels(levels):
        bad(
            "autotune_preset_levels",
            levels,
            "a non-empty list of positive integers 1-4096 "
            "(concurrency levels; bound and reason in plugins/module_utils/bench_limits.py)",
        )
    target = v.get("autotune_preset_target_concurrency")
    level_ints = [int(str(x)) for x in levels if full("[0-9]+", str(x))] if _is_list(levels) else []
    if not (full("[1-9][0-9]*", str(target)) and int(str(target)) in level_ints):
        shown = ", ".join(map(str, levels)) if _is_list(levels) else str(levels)
        bad("autotune_preset_target_concurrency", target, f"one of autotune_preset_levels ({shown})")
    prompts = v.get("autotune_preset_num_prompts")
    if prompts == "auto" or not valid_prompts(prompts):
        bad(
            "autotune_preset_num_prompts",
            prompts,
            "an integer 1-100000 "
            "(prompts per level; bound and reason in plugins/module_utils/bench_limits.py)",
        )
    pcts = [v.get("autotune_preset_min_gain_pct"), v.get("autotune_preset_tie_pct")]
    if not _all_full(PERCENT, pcts):
        bad("autotune_preset_min_gain_pct / autotune_preset_tie_pct", pcts, "numbers >= 0 (percent)")


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the autotune inputs."""
    errs: list[str] = []

    def bad(var: str, value: Any, allowed: str) -> None:
        errs.append(f"bad autotune input: {var}={as_json(value)}: allowed {allowed}")

    if not all(name in v for name in FACTS[:3]):
        errs.append(NEEDS)
    parts = v.get("autotune_parts")
    if not (_is_list(parts) and all(p in ("nccl", "preset") for p in parts)):
        bad("autotune_parts", parts, "a list of nccl, preset")
    for var, pattern, allowed in (
        (
            "autotune_python",
            "/[A-Za-z0-9_@+=:,./-]*",
            "an absolute path of letters, digits and _ @ + = : , . / -",
        ),
        ("autotune_record_dir", "/.*", "an absolute directory path on the controller"),
        (
            "autotune_report_dir",
            "/[A-Za-z0-9_@+=:,./-]+",
            "an absolute directory path on the host, of letters, digits and _ @ + = : , . / -",
        ),
    ):
        if not full(pattern, v.get(var)):
            bad(var, v.get(var), allowed)
    _nccl(v, bad)
    _preset(v, bad)
    return errs
