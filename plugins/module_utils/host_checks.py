"""Preflight's host checks, the one decider (pure): a GPU when one is required, the tensor-parallel size
against the GPU count, the NVIDIA driver branch, the OS, the free disk under ``sglang_root`` and the
interpreter the stack stage builds its venv with.

The filter ``sglang.deploy.preflight_host_check`` runs :func:`decide_host` on the answers of the host
probe (plugins/modules/preflight_host_probe.py: ``root``, ``python``), the GPU summary of nvidia-smi
(plugins/module_utils/gpu_facts.py), the host facts and the inputs, and the role fails once listing
every error (one assert) and prints every warning (one debug). Each message names the variable, the
value and what is allowed. Tested by tests/test_host_checks.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ansible.module_utils.parsing.convert_bool import boolean  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_int

GIB = 1024**3


class HostDecision(TypedDict):
    errors: list[str]
    warnings: list[str]


def _flag(value: Any) -> bool:
    """Ansible's ``| bool`` of an input (a value it does not know is false)."""
    return bool(boolean(value, strict=False))


def _num(value: Any) -> int:
    """Ansible's ``| int`` of an input (an unreadable value is 0)."""
    return as_int(value) or 0


def _divisors(count: int) -> str:
    return ", ".join(str(d) for d in range(1, count + 1) if count % d == 0)


def gpu_errors(
    gpu: Mapping[str, Any], inputs: Mapping[str, Any], *, no_gpu_reason: str, nnodes: int
) -> list[str]:
    """A GPU when ``sglang_gpu_required``; on a host with GPUs the tp size (one node: tp and the GPU count
    of this host; a replica of several nodes is checked across its nodes). The driver branch:
    driver_finding."""
    count = int(gpu.get("count") or 0)
    errors: list[str] = []
    if count == 0:
        if _flag(inputs.get("sglang_gpu_required")):
            errors.append(
                "sglang_gpu_required=true but this host has no usable NVIDIA GPU "
                f"({no_gpu_reason}): allowed a host with NVIDIA GPUs and a loaded driver, or "
                "sglang_gpu_required=false for a lab host"
            )
        return errors
    tp_raw = inputs.get("sglang_tp_size")
    tp = _num(tp_raw)
    must_equal_raw = inputs.get("sglang_tp_size_must_equal_gpu_count")
    must_equal = _flag(must_equal_raw)
    fits = tp == count if must_equal else tp > 0 and count % tp == 0
    if nnodes == 1 and not fits:
        allowed = str(count) if must_equal else f"a divisor of {count}: {_divisors(count)}"
        errors.append(
            f"sglang_tp_size={json.dumps(tp_raw)} does not fit the {count} GPU(s) of this host "
            f"(sglang_tp_size_must_equal_gpu_count={json.dumps(must_equal_raw)}): allowed {allowed}"
        )
    return errors


def driver_finding(gpu: Mapping[str, Any], inputs: Mapping[str, Any]) -> tuple[str, str]:
    """(error, warning) of the driver branch of a host with GPUs against ``sglang_driver_min_branch``: an
    error, or a warning when ``preflight_allow_old_driver`` accepts the old branch; ('', '') when new
    enough. One comparison for both."""
    branch = int(gpu.get("driver_branch") or 0)
    minimum = inputs.get("sglang_driver_min_branch")
    if branch >= _num(minimum):
        return "", ""
    if _flag(inputs.get("preflight_allow_old_driver")):
        return "", (
            f"WARNING: NVIDIA driver branch {branch} < sglang_driver_min_branch={minimum} accepted because "
            f"preflight_allow_old_driver=true; CUDA {inputs.get('sglang_cuda_version')} may fail at run time"
        )
    return (
        f"NVIDIA driver {gpu.get('driver_version')} (branch {branch}) is older than "
        f"sglang_driver_min_branch={minimum} that CUDA {inputs.get('sglang_cuda_version')} needs: "
        f"allowed a driver branch >= {minimum}; upgrade the driver, or set "
        "preflight_allow_old_driver=true to go on anyway"
    ), ""


def os_error(facts: Mapping[str, Any], inputs: Mapping[str, Any], *, lab: bool) -> str:
    """'' when the host runs the pinned OS (or, on a host without a GPU, one of the lab's)."""
    distribution = str(facts.get("distribution", ""))
    versions = [str(facts.get("distribution_version", "")), str(facts.get("distribution_major_version", ""))]
    wanted = inputs.get("sglang_os_distribution")
    version = inputs.get("sglang_os_version")
    lab_allowed: Sequence[Mapping[str, Any]] = inputs.get("sglang_os_lab_allowed") or []
    if distribution == wanted and str(version) in versions:
        return ""
    for other in lab_allowed if lab else ():
        if other.get("distribution") == distribution and str(other.get("version")) in versions:
            return ""
    lab_text = f", or in lab mode one of sglang_os_lab_allowed={json.dumps(lab_allowed)}" if lab else ""
    return (
        f"This host runs {distribution} {facts.get('distribution_version', '')}"
        f"{' (lab mode)' if lab else ''}, "
        f"which is not supported: allowed sglang_os_distribution={json.dumps(wanted)} with "
        f"sglang_os_version={json.dumps(version)}{lab_text}"
    )


def disk_error(root: Mapping[str, Any], inputs: Mapping[str, Any]) -> str:
    """'' when the filesystem of ``sglang_root`` (its nearest existing parent) has the free space asked."""
    available = int(root.get("size_available") or 0)
    wanted = inputs.get("sglang_min_free_disk_gib")
    if available >= _num(wanted) * GIB:
        return ""
    return (
        f"Only {available / GIB:.1f} GiB free on {root.get('mount')} (holding {root.get('realpath')}, "
        f"the nearest existing parent of sglang_root={json.dumps(inputs.get('sglang_root'))}): "
        f"sglang_min_free_disk_gib={wanted} demands more; allowed free space >= {wanted} GiB "
        "(free disk, move sglang_root, or lower sglang_min_free_disk_gib)"
    )


def python_finding(python: Mapping[str, Any], *, lab: bool) -> tuple[str, str]:
    """(error, warning): the interpreter the stack stage builds its venv with must exist on a GPU host; a
    lab host (no GPU, a test machine, where stages such as verify run without a stack) gets a warning."""
    if python.get("path"):
        return "", ""
    requested = str(python.get("requested", ""))
    if lab:
        return "", (
            f"WARNING: sglang_stack_python={json.dumps(requested)} is not an executable on this lab "
            "host: the stack stage would fail here; set sglang_stack_python (e.g. python3.11 on Debian 12)"
        )
    why = "not found on PATH" if "/" not in requested else "no such executable file"
    return (
        f"sglang_stack_python={json.dumps(requested)} is not an executable on this host ({why}): "
        "allowed an interpreter the host has (a name on PATH such as python3.12, or an absolute path); "
        "install it or set sglang_stack_python (the stack stage builds the release venv with it and "
        "never downloads one)"
    ), ""


def decide_host(
    probe: Mapping[str, Any],
    *,
    gpu: Mapping[str, Any],
    facts: Mapping[str, Any],
    inputs: Mapping[str, Any],
    no_gpu_reason: str = "",
    nnodes: int = 1,
) -> HostDecision:
    """Every error and warning of the host checks, in the order a reader meets them (GPU, OS, disk,
    python). ``probe``: the answers of preflight_host_probe (``root``, ``python``); ``gpu``: the GPU
    summary (count, driver_version, driver_branch); ``facts``: the host facts (distribution,
    distribution_version, distribution_major_version); ``inputs``: the variables by name."""
    lab = int(gpu.get("count") or 0) == 0
    errors = gpu_errors(gpu, inputs, no_gpu_reason=no_gpu_reason, nnodes=int(nnodes))
    warnings: list[str] = []
    if not lab:  # on a host with GPUs
        error, warning = driver_finding(gpu, inputs)
        errors += [error] if error else []
        warnings += [warning] if warning else []
    found = (os_error(facts, inputs, lab=lab), disk_error(probe.get("root") or {}, inputs))
    errors += [e for e in found if e]
    error, warning = python_finding(probe.get("python") or {}, lab=lab)
    errors += [error] if error else []
    warnings += [warning] if warning else []
    return HostDecision(errors=errors, warnings=warnings)
