"""The input rules of the role verify (run by sglang.deploy.validate_inputs; see __init__.py).

The preflight facts the layers read (the launch spec among them), the knobs of layers 1-5, and the
inputs of layers 6-7: the benchmark's workload (bounds: plugins/module_utils/bench_limits.py), the
gate, its baselines, the speculation and start-up gates and the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.bench_limits import valid_levels, valid_prompts
from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_bool
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import as_json, full

PREFLIGHT = (
    "preflight_lab_mode",
    "preflight_gpu_count",
    "preflight_gpu_names",
    "preflight_gpu_compute_capability",
    "preflight_driver_version",
)
FACTS = (*PREFLIGHT, "preflight_launch_spec")
NEEDS = (
    "verify needs the facts of the preflight role (preflight_lab_mode, preflight_gpu_count, "
    "preflight_gpu_names, preflight_gpu_compute_capability, preflight_driver_version): run the preflight "
    "role first (playbooks/verify.yml does)"
)
NEEDS_SPEC = (
    "verify needs the fact preflight_launch_spec of the preflight role (run the preflight role first)"
)
PATH = r"/[A-Za-z0-9_@+=:,./-]*"
PATH_CHARS = "letters, digits and _ @ + = : , . / -"
NUMBER = r"[0-9]+(\.[0-9]+)?"
LAYERS = ("gpu", "cuda", "torch", "nccl", "http", "bench")
TRUE_FALSE = ("true", "false")


def _layers(v: Mapping[str, Any], bad: Any) -> None:
    """The knobs of layers 1-5, the levels, the document."""
    reps = v.get("verify_nccl_reps")
    if not (full("[0-9]+", str(reps)) and int(str(reps)) >= 5):
        bad("verify_nccl_reps", reps, "an integer >= 5 (a median of at least 5 repetitions)")
    for var, pattern, allowed in (
        ("verify_nccl_iters", "[1-9][0-9]*", "an integer >= 1"),
        (
            "verify_cuda_arch",
            "([0-9]+)?",
            '"" (from preflight_gpu_compute_capability) or SM digits such as 90',
        ),
        (
            "verify_router_url",
            "(https?://[A-Za-z0-9._-]+(:[0-9]{1,5})?/?)?",
            '"" (no router benchmark) or http[s]://HOST[:PORT]',
        ),
        ("verify_router_bench_repetitions", "[1-9][0-9]*", "an integer >= 1"),
        ("verify_bench_warmup_requests", "[0-9]+", "an integer >= 0"),
    ):
        if not full(pattern, str(v.get(var))):
            bad(var, v.get(var), allowed)
    for var, pattern, allowed in (
        ("verify_python", PATH, f"an absolute path of {PATH_CHARS}"),
        ("verify_nccl_env_file", PATH, f"an absolute path of {PATH_CHARS}"),
        (
            "verify_tokenizer",
            PATH,
            f"an absolute path on the host of {PATH_CHARS} (a local tokenizer; no hub download)",
        ),
        ("verify_doc_path", PATH + r"[A-Za-z0-9_@+=:,.-]", f"an absolute file path of {PATH_CHARS}"),
    ):
        if not full(pattern, v.get(var)):
            bad(var, v.get(var), allowed)
    if not valid_levels(v.get("verify_levels")):
        bad(
            "verify_levels",
            v.get("verify_levels"),
            "a non-empty list of positive integers 1-4096 "
            "(concurrency levels; bound and reason in plugins/module_utils/bench_limits.py)",
        )
    out_len = v.get("verify_bench_output_len")
    if not (full("[0-9]+", str(out_len)) and int(str(out_len)) >= 4):
        bad("verify_bench_output_len", out_len, "an integer >= 4 (bench_serving refuses shorter outputs)")
    tolerance = v.get("verify_gate_tolerance_pct")
    if not (full(NUMBER, str(tolerance)) and float(str(tolerance)) < 100):
        bad(
            "verify_gate_tolerance_pct",
            tolerance,
            "a number 0 <= x < 100 (percent below the baseline still accepted)",
        )
    skip = v.get("verify_skip_layers")
    if not (isinstance(skip, list | tuple) and all(layer in LAYERS for layer in skip)):
        bad(
            "verify_skip_layers",
            skip,
            "a list of gpu, cuda, torch, nccl, http, bench (layers skipped with an explicit line)",
        )
    if v.get("verify_doc_write") not in ("auto", "always"):
        bad(
            "verify_doc_write",
            v.get("verify_doc_write"),
            "auto (when the benchmark ran) or always (every verify run, also with layers 1-4 only)",
        )


def _gate(v: Mapping[str, Any], bad: Any) -> None:
    """The inputs of layers 6-7: workload, repetitions, noise band, baselines, gates, the verdict."""
    if not valid_prompts(v.get("verify_bench_num_prompts")):
        bad(
            "verify_bench_num_prompts",
            v.get("verify_bench_num_prompts"),
            "auto (max(30, 2 x concurrency) per level) or an integer 1-100000 "
            "(bound and reason in plugins/module_utils/bench_limits.py)",
        )
    if v.get("verify_bench_prompts_mode") not in ("scaled", "seed"):
        bad(
            "verify_bench_prompts_mode",
            v.get("verify_bench_prompts_mode"),
            "scaled (verify_bench_num_prompts per level) or seed (30 per level, as the seed's table)",
        )
    noise_k = v.get("verify_gate_noise_k")
    if not (full(NUMBER, str(noise_k)) and float(str(noise_k)) <= 20):
        bad(
            "verify_gate_noise_k",
            noise_k,
            "a number 0 <= k <= 20 (allowed shortfall = max(tolerance, k x recorded CV))",
        )
    if not full("[1-9][0-9]?", str(v.get("verify_gate_repetitions"))):
        bad(
            "verify_gate_repetitions",
            v.get("verify_gate_repetitions"),
            "an integer 1..99 (repetitions of every level in a gated run)",
        )
    base_reps = v.get("verify_baseline_repetitions")
    if not (full("[0-9]+", str(base_reps)) and 3 <= int(str(base_reps)) <= 99):
        bad(
            "verify_baseline_repetitions",
            base_reps,
            "an integer 3..99 (a recorded baseline's spread needs at least 3 repetitions)",
        )
    if str(v.get("verify_record_baseline")).lower() not in ("auto", *TRUE_FALSE):
        bad(
            "verify_record_baseline",
            v.get("verify_record_baseline"),
            "auto (record when there is no comparable baseline), "
            "true (also refresh one from a passed gate), false",
        )
    _same_window(v, bad)
    for var in ("verify_gate_confirm", "verify_require_gate", "verify_require_speculation_gain"):
        if str(v.get(var)).lower() not in TRUE_FALSE:
            bad(var, v.get(var), "true or false")


def _same_window(v: Mapping[str, Any], bad: Any) -> None:
    """The same-window pair: repetitions and their cap, the allowed shortfall, the seed, the probe, what
    an inconclusive verdict does."""
    if str(v.get("verify_same_window")).lower() not in ("auto", *TRUE_FALSE):
        bad("verify_same_window", v.get("verify_same_window"), "auto, true or false")
    reps, cap = v.get("verify_same_window_repetitions"), v.get("verify_same_window_max_repetitions")
    reps_ok = full("[0-9]{1,2}", str(reps)) and int(str(reps)) >= 3
    if not reps_ok:
        bad("verify_same_window_repetitions", reps, "an integer 3..99 (a paired t bound needs 3 pairs)")
    if not (full("[0-9]{1,2}", str(cap)) and int(str(cap)) >= (int(str(reps)) if reps_ok else 3)):
        bad(
            "verify_same_window_max_repetitions",
            cap,
            "an integer 3..99, at least verify_same_window_repetitions (the cap of pairs per level)",
        )
    shortfall = v.get("verify_same_window_shortfall_pct")
    if not (full(NUMBER, str(shortfall)) and 0 < float(str(shortfall)) < 100):
        bad(
            "verify_same_window_shortfall_pct",
            shortfall,
            "a number 0 < x < 100 (percent B may fall short of A)",
        )
    if not full("([0-9]{1,9})?", str(v.get("verify_same_window_seed"))):
        bad(
            "verify_same_window_seed",
            v.get("verify_same_window_seed"),
            '"" (drawn per run) or an integer 0..999999999',
        )
    probe = v.get("verify_same_window_probe_prompts")
    if not (full("[0-9]{1,4}", str(probe)) and 1 <= int(str(probe)) <= 1000):
        bad("verify_same_window_probe_prompts", probe, "an integer 1..1000 (prompts of the capacity probe)")
    if v.get("verify_same_window_inconclusive") not in ("rollback", "keep"):
        bad(
            "verify_same_window_inconclusive",
            v.get("verify_same_window_inconclusive"),
            "rollback (the last good state serves again) or keep (the new state keeps serving)",
        )
    if str(v.get("verify_calibrate")).lower() not in TRUE_FALSE:
        bad("verify_calibrate", v.get("verify_calibrate"), "true or false")
    detect = v.get("verify_calibration_detect_pct")
    low = float(str(shortfall)) if full(NUMBER, str(shortfall)) else 0.0
    if not (full(NUMBER, str(detect)) and low < float(str(detect)) < 100):
        bad(
            "verify_calibration_detect_pct",
            detect,
            "a number above verify_same_window_shortfall_pct and below 100 (the regression to catch, %)",
        )
    if not isinstance(v.get("verify_calibration_record", {}), Mapping):
        bad("verify_calibration_record", "not a mapping", "a mapping (written by --calibrate)")
    if not full(PATH + r"[A-Za-z0-9_@+=:,.-]", str(v.get("verify_same_window_capacity_file"))):
        bad(
            "verify_same_window_capacity_file",
            v.get("verify_same_window_capacity_file"),
            f"an absolute file path of {PATH_CHARS}",
        )


def _speculation(v: Mapping[str, Any], bad: Any) -> None:
    """The speculation and start-up gates, the baselines kept."""
    levels = v.get("verify_levels")
    shown = [str(x) for x in levels] if isinstance(levels, list | tuple) else []
    target = v.get("verify_speculation_target_concurrency")
    if as_bool(v.get("verify_require_speculation_gain")) is True and str(target) not in shown:
        bad(
            "verify_speculation_target_concurrency",
            target,
            f"one of verify_levels ({', '.join(shown)}) when verify_require_speculation_gain is true",
        )
    if not full("[a-z][a-z0-9_]*", str(v.get("verify_speculation_baseline_preset"))):
        bad(
            "verify_speculation_baseline_preset",
            v.get("verify_speculation_baseline_preset"),
            "a preset name (lower-case letters, digits, _)",
        )
    accept = v.get("verify_gate_accept_tolerance_pct")
    if not (full(NUMBER, str(accept)) and float(str(accept)) < 100):
        bad("verify_gate_accept_tolerance_pct", accept, "a number 0 <= x < 100")
    for var, allowed in (
        ("verify_startup_tolerance_pct", "a number >= 0 (percent above the recorded start-up)"),
        ("verify_startup_slack_s", "a number of seconds >= 0"),
    ):
        if not full(NUMBER, str(v.get(var))):
            bad(var, v.get(var), allowed)
    records = v.get("verify_baseline_records", {})
    if not isinstance(records, Mapping):
        count = len(records) if isinstance(records, str | list | tuple) else 0
        bad(
            "verify_baseline_records",
            f"{count} record(s)",
            "a mapping {fingerprint hash - record} (written by the role into verify_baseline_file)",
        )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the verify inputs."""
    errs: list[str] = []

    def bad(var: str, value: Any, allowed: str) -> None:
        errs.append(f"bad verify input: {var}={as_json(value)}: allowed {allowed}")

    if not all(name in v for name in PREFLIGHT):
        errs.append(NEEDS)
    _layers(v, bad)
    _gate(v, bad)
    _speculation(v, bad)
    spec = v.get("preflight_launch_spec")
    if not (isinstance(spec, Mapping) and "endpoint" in spec):
        errs.append(NEEDS_SPEC)
    return errs
