"""Filters of the preflight role: the deciders of the host (plugins/module_utils/host_checks.py), of the
model directories (plugins/module_utils/model_dir.py) and of the PCIe path between the GPUs
(plugins/module_utils/pcie_acs.py), pure Python tested by tests/test_host_checks.py,
tests/test_model_dir.py and tests/test_pcie_acs.py. Documented in the YAML sidecars
plugins/filter/preflight_*_check.yml."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.host_checks import decide_host
from ansible_collections.sglang.deploy.plugins.module_utils.model_dir import Decision, decide_models
from ansible_collections.sglang.deploy.plugins.module_utils.pcie_acs import (
    PcieFinding,
    decide_pcie,
    p2p_across_system,
)


def preflight_model_check(
    probe: Mapping[str, Any],
    *,
    speculative: bool,
    gpu_count: int,
    gpu_memory_mib: int,
    tp_size: int,
    mem_fraction_static: float | str | None = None,
    trust_remote_code: bool = True,
) -> Decision:
    """The probe's answers (models, service_user) -> errors, warnings and the size figures."""
    return decide_models(
        probe.get("models") or {},
        speculative=bool(speculative),
        user=probe.get("service_user") or {"name": "", "exists": False},
        gpu_count=int(gpu_count),
        gpu_memory_mib=int(gpu_memory_mib),
        tp_size=int(tp_size),
        mem_fraction_static=mem_fraction_static,
        trust_remote_code=bool(trust_remote_code),
    )


def preflight_pcie_check(
    probe: Mapping[str, Any], *, gpu_count: int, profile: str, env: Mapping[str, Any] | None = None
) -> PcieFinding:
    """The probe's ``pcie`` answer, the GPU count and the NCCL profile in force -> the finding."""
    pcie = probe.get("pcie") or {}
    return decide_pcie(
        pcie.get("devices"),
        cmdline=str(pcie.get("cmdline", "")),
        iommu_entries=list(pcie.get("iommu") or []),
        gpu_count=int(gpu_count),
        p2p_system=p2p_across_system(str(profile), env),
    )


class FilterModule:
    """Ansible entry point: the deciders of preflight's host, model and PCIe checks."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            # the decider itself: its first argument is the filter's input (the probe's answers)
            "preflight_host_check": decide_host,
            "preflight_model_check": preflight_model_check,
            "preflight_pcie_check": preflight_pcie_check,
        }
