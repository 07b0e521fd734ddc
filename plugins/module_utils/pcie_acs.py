"""The PCIe path between the GPUs: ACS on the bridges above them and the IOMMU (pure Python).

NCCL peer-to-peer over PCIe hangs or crawls when a bridge between two GPUs redirects P2P requests
to the root complex (ACS ``ReqRedir+``/``CmpltRedir+``) or the IOMMU translates the GPUs' DMA
(NVIDIA/nccl#1999, #2079 on RTX PRO 6000 hosts). The seed's PCIe profile (``NCCL_P2P_LEVEL=SYS``)
makes NCCL use P2P across the whole system, so preflight reads both on a host of several GPUs:
:func:`parse_lspci` reads ``lspci -vvv`` (run by the probe; as root, or the capabilities read
``<access denied>``), :func:`decide_pcie` judges it with ``/proc/cmdline`` and ``/sys/class/iommu``.
Tested by tests/test_pcie_acs.py with the samples of tests/data/lspci/.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

_HEADER = re.compile(
    r"(?:(?P<domain>[0-9a-f]{4}):)?(?P<bus>[0-9a-f]{2}):(?P<dev>[0-9a-f]{2})\.(?P<fn>[0-7])\s+(?P<cls>[^:]+):\s*(?P<desc>.*)"
)
_BUSES = re.compile(r"Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})")
_PROG_IF = re.compile(r"\s*\(prog-if [^)]*\)")
_FLAG = re.compile(r"([A-Za-z]+)([+-])")
REDIRECT_FLAGS = ("ReqRedir", "CmpltRedir")
NVIDIA_GPU_CLASSES = ("VGA compatible controller", "3D controller")


class Device(TypedDict):
    bdf: str
    domain: str
    bus: int
    cls: str
    desc: str
    secondary: int
    subordinate: int
    acs_ctl: dict[str, bool]
    has_acs: bool
    access_denied: bool


def parse_lspci(text: str) -> list[Device]:
    """The devices of ``lspci -vvv``: address, class, description, the bus range behind a bridge
    (``Bus: primary=.., secondary=.., subordinate=..``) and the ACS control flags (``ACSCtl:``)."""
    devices: list[Device] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            m = _HEADER.match(line)
            if m:
                devices.append(
                    Device(
                        bdf=line.split()[0],
                        domain=m["domain"] or "0000",
                        bus=int(m["bus"], 16),
                        cls=m["cls"].strip(),
                        desc=_PROG_IF.sub("", m["desc"]).strip(),
                        secondary=-1,
                        subordinate=-1,
                        acs_ctl={},
                        has_acs=False,
                        access_denied=False,
                    )
                )
            continue
        if not devices:
            continue
        dev = devices[-1]
        body = line.strip()
        buses = _BUSES.search(body)
        if buses:
            dev["secondary"], dev["subordinate"] = int(buses[2], 16), int(buses[3], 16)
        elif body.startswith("Capabilities:") and "<access denied>" in body:
            dev["access_denied"] = True
        elif body.startswith("Capabilities:") and "Access Control Services" in body:
            dev["has_acs"] = True
        elif body.startswith("ACSCtl:"):
            dev["acs_ctl"] = {name: sign == "+" for name, sign in _FLAG.findall(body[len("ACSCtl:") :])}
    return devices


def _is_gpu(dev: Device) -> bool:
    return dev["cls"] in NVIDIA_GPU_CLASSES and "NVIDIA" in dev["desc"]


def _above(bridge: Device, dev: Device) -> bool:
    return bridge["domain"] == dev["domain"] and bridge["secondary"] <= dev["bus"] <= bridge["subordinate"]


class PcieFinding(TypedDict):
    checked: bool
    reason: str
    lspci: bool
    gpus: list[str]
    acs_redirect: list[str]
    acs_unreadable: bool
    iommu: dict[str, Any]
    issues: list[str]
    fix: str


FIX = (
    'in the BIOS disable ACS (or PCIe ACS/"IOMMU" for the GPU slots) and the IOMMU, or boot with '
    "pci=noacs / iommu=pt; at run time `setpci -s <bdf> ECAP_ACS+6.w=0000` on each listed bridge (as root, "
    "until the next boot)"
)


def relevant(devices: Sequence[Device]) -> list[Device]:
    """The NVIDIA GPUs and the bridges (what the probe returns of ``lspci -vvv``)."""
    return [d for d in devices if _is_gpu(d) or d["secondary"] >= 0]


def decide_pcie(
    devices: Sequence[Device] | None,
    *,
    cmdline: str,
    iommu_entries: Sequence[str],
    gpu_count: int,
    p2p_system: bool,
) -> PcieFinding:
    """Judge the PCIe path between the GPUs: ``devices`` of :func:`parse_lspci` (None: lspci is missing,
    package pciutils).

    Checked only when ``gpu_count`` > 1 and ``p2p_system`` (the NCCL profile in force lets P2P cross
    the system: the PCIe profile, NCCL_P2P_LEVEL=SYS). An issue is a bridge above an NVIDIA GPU with
    ACSCtl ReqRedir+ or CmpltRedir+, or an IOMMU in translation mode (``/sys/class/iommu`` not empty and
    no ``iommu=pt`` on the kernel command line)."""
    args = cmdline.split()
    passthrough = "iommu=pt" in args or any(a in ("intel_iommu=pt", "amd_iommu=pt") for a in args)
    relevant_args = [a for a in args if "iommu" in a or a.startswith("pci=")]
    iommu: dict[str, Any] = {
        "enabled": len(iommu_entries) > 0,
        "passthrough": passthrough,
        "cmdline": relevant_args,
    }
    finding = PcieFinding(
        checked=False, reason="", lspci=devices is not None, gpus=[], acs_redirect=[], acs_unreadable=False,
        iommu=iommu, issues=[], fix=FIX,
    )  # fmt: skip
    if gpu_count < 2:
        finding["reason"] = "fewer than 2 GPUs: no GPU peer-to-peer"
        return finding
    if not p2p_system:
        finding["reason"] = "the NCCL profile in force does not use PCIe P2P across the system"
        return finding
    finding["checked"] = True
    finding["reason"] = "NCCL_P2P_LEVEL=SYS (PCIe profile) on a host of several GPUs"
    if iommu["enabled"] and not passthrough:
        finding["issues"].append(
            f"the IOMMU translates DMA (/sys/class/iommu lists {', '.join(iommu_entries)}; kernel command "
            f"line {' '.join(relevant_args) or 'without iommu= options'}, no iommu=pt): GPU P2P goes "
            f"through it"
        )
    if devices is None:
        finding["issues"].append("lspci is missing (install pciutils): ACS on the PCIe bridges was not read")
        return finding
    gpus = [d for d in devices if _is_gpu(d)]
    finding["gpus"] = [d["bdf"] for d in gpus]
    bridges = [d for d in devices if d["secondary"] >= 0 and any(_above(d, g) for g in gpus)]
    finding["acs_unreadable"] = any(b["access_denied"] for b in bridges)
    for bridge in bridges:
        redirect = [f"{f}+" for f in REDIRECT_FLAGS if bridge["acs_ctl"].get(f)]
        if redirect:
            finding["acs_redirect"].append(f"{bridge['bdf']} ({bridge['desc']}): ACSCtl {' '.join(redirect)}")
    if finding["acs_redirect"]:
        finding["issues"].append(
            f"ACS redirects P2P to the root complex on {len(finding['acs_redirect'])} bridge(s) above the "
            f"GPUs: {'; '.join(finding['acs_redirect'])}"
        )
    if finding["acs_unreadable"]:
        finding["issues"].append(
            "lspci could not read the bridges' capabilities (<access denied>: run as root)"
        )
    return finding


def p2p_across_system(profile: str, env: Mapping[str, Any] | None = None) -> bool:
    """Whether NCCL may use P2P across the system: NCCL_P2P_LEVEL of the environment in force
    (nccl_env_extra over the profile) is SYS/5, or the profile is the seed's PCIe profile (which sets
    SYS) and nothing overrides it."""
    level = str((env or {}).get("NCCL_P2P_LEVEL", "SYS" if profile == "pcie" else "")).strip().upper()
    return level in ("SYS", "5")
