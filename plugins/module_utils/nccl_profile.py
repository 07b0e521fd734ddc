"""The one decider of the NCCL profile: requested profile + what is known of the interconnect ->
(resolved profile, interconnect class, reason).

Pure Python (no Ansible import). Every place that names the profile calls :func:`resolve_profile`:
preflight's export (``preflight_nccl_profile_resolved``, through the filter
``sglang.deploy.nccl_profile``), the launch spec (``preflight_launch_spec.nccl``,
plugins/module_utils/launch_spec.py) and the nccl_env role's file (the filter
``sglang.deploy.nccl_env_build``). They cannot disagree, also when the inventory sets
``nccl_env_interconnect``.
"""

from __future__ import annotations

from typing import TypedDict

INTERCONNECT_LABEL = {"nvlink": "NVLink", "pcie": "PCIe", "none": "no GPU interconnect"}
# The sources of the interconnect class, first one set wins: (keyword, name in the reason, who).
_SOURCES = (
    ("interconnect", "nccl_env_interconnect", "inventory set"),
    ("preflight_interconnect", "preflight_interconnect", "preflight detected"),
    ("detected_interconnect", "nvidia-smi topo -m", "nccl_env detected"),
)


class Resolved(TypedDict):
    """What :func:`resolve_profile` decides."""

    profile: str
    interconnect: str
    reason: str


def resolve_profile(
    profile: str,
    *,
    interconnect: str | None = "",
    preflight_interconnect: str | None = "",
    detected_interconnect: str | None = "",
) -> Resolved:
    """Resolve a requested profile.

    ``auto`` becomes the interconnect class of the first source set: ``interconnect`` (the
    inventory's ``nccl_env_interconnect``), ``preflight_interconnect`` (preflight's nvidia-smi
    topology), ``detected_interconnect`` (the nccl_env role's own ``nvidia-smi topo -m`` when it runs
    without preflight); ``none`` when nothing is known. Any other profile is used as is; its
    interconnect class is then the first source set, else ``unknown``. Names are assumed validated
    (choices.NCCL_PROFILES, choices.INTERCONNECTS).
    """
    given = {
        "interconnect": interconnect or "",
        "preflight_interconnect": preflight_interconnect or "",
        "detected_interconnect": detected_interconnect or "",
    }
    found = next(((given[key], name, who) for key, name, who in _SOURCES if given[key]), None)
    if profile != "auto":
        cls = found[0] if found else "unknown"
        reason = f"{profile}: set explicitly (nccl_env_profile)"
        return Resolved(profile=profile, interconnect=cls, reason=reason)
    if found is None:
        return Resolved(
            profile="none",
            interconnect="none",
            reason="auto -> none: no interconnect known (no preflight fact, no nvidia-smi)",
        )
    value, name, who = found
    label = INTERCONNECT_LABEL.get(value, value)
    return Resolved(profile=value, interconnect=value, reason=f"auto -> {value}: {who} {label} ({name})")
