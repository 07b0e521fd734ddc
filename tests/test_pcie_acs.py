"""The PCIe path between the GPUs (issue 31 item 4): the `lspci -vvv` parser and the decider of
plugins/module_utils/pcie_acs.py, against the samples of tests/data/lspci/ (written for these tests
after lspci's layout: an ACS-enabled Broadcom PEX switch, the same with ACS off, GPUs on root ports
without the ACS capability)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from modload import REPO  # (and the collection on sys.path)

pa: Any = importlib.import_module("ansible_collections.sglang.deploy.plugins.module_utils.pcie_acs")
DATA = REPO / "tests" / "data" / "lspci"
CMDLINE = "BOOT_IMAGE=/vmlinuz-6.8.0-51-generic root=UUID=0b1e ro quiet splash"


def _devices(name: str) -> list[Any]:
    return list(pa.relevant(pa.parse_lspci((DATA / name).read_text())))


def test_parser_reads_bridges_gpus_and_acs_control() -> None:
    devices = {d["bdf"]: d for d in pa.parse_lspci((DATA / "acs-enabled-pex-switch.txt").read_text())}
    down = devices["16:00.0"]
    assert down["cls"] == "PCI bridge"
    assert down["desc"] == "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)"  # "(prog-if ..)" dropped
    assert (down["secondary"], down["subordinate"]) == (0x17, 0x17)
    assert down["has_acs"] is True
    assert down["acs_ctl"]["ReqRedir"] is True
    assert down["acs_ctl"]["CmpltRedir"] is True
    assert down["acs_ctl"]["TransBlk"] is False
    assert devices["15:00.0"]["has_acs"] is False  # the upstream port has no ACS capability
    gpu = devices["17:00.0"]
    assert gpu["cls"] == "VGA compatible controller"
    assert "RTX PRO 6000" in gpu["desc"]
    assert gpu["secondary"] == -1
    assert devices["2a:00.0"]["cls"] == "Ethernet controller"
    # relevant(): GPUs and bridges only (what the probe sends back)
    assert {d["bdf"] for d in _devices("acs-enabled-pex-switch.txt")} == {
        "00:01.0", "15:00.0", "16:00.0", "16:01.0", "17:00.0", "18:00.0", "00:02.0"
    }  # fmt: skip


def test_acs_redirect_above_the_gpus_is_an_issue_other_bridges_are_not() -> None:
    found = pa.decide_pcie(
        _devices("acs-enabled-pex-switch.txt"),
        cmdline=CMDLINE,
        iommu_entries=[],
        gpu_count=2,
        p2p_system=True,
    )
    assert found["checked"] is True
    assert found["lspci"] is True
    assert found["gpus"] == ["17:00.0", "18:00.0"]
    bridges = [entry.split(" ")[0] for entry in found["acs_redirect"]]
    assert bridges == ["00:01.0", "16:00.0", "16:01.0"]  # not 00:02.0 (the NIC's root port)
    assert "ACSCtl ReqRedir+ CmpltRedir+" in found["acs_redirect"][1]
    assert len(found["issues"]) == 1
    assert "ACS redirects P2P to the root complex on 3 bridge(s)" in found["issues"][0]
    assert "setpci -s <bdf> ECAP_ACS+6.w=0000" in found["fix"]
    assert "iommu=pt" in found["fix"]


@pytest.mark.parametrize("sample", ["acs-disabled-pex-switch.txt", "no-acs-capability.txt"])
def test_no_acs_redirect_no_issue(sample: str) -> None:
    found = pa.decide_pcie(_devices(sample), cmdline=CMDLINE, iommu_entries=[], gpu_count=2, p2p_system=True)
    assert found["checked"] is True
    assert len(found["gpus"]) == 2
    assert found["acs_redirect"] == []
    assert found["issues"] == []


def test_iommu_translating_is_an_issue_passthrough_is_not() -> None:
    devices = _devices("acs-disabled-pex-switch.txt")
    on = pa.decide_pcie(
        devices,
        cmdline=CMDLINE + " intel_iommu=on",
        iommu_entries=["dmar0", "dmar1"],
        gpu_count=2,
        p2p_system=True,
    )
    assert on["iommu"] == {"enabled": True, "passthrough": False, "cmdline": ["intel_iommu=on"]}
    assert len(on["issues"]) == 1
    assert "the IOMMU translates DMA (/sys/class/iommu lists dmar0, dmar1" in on["issues"][0]
    pt = pa.decide_pcie(
        devices,
        cmdline=CMDLINE + " amd_iommu=on iommu=pt",
        iommu_entries=["ivhd0"],
        gpu_count=2,
        p2p_system=True,
    )
    assert pt["iommu"]["passthrough"] is True
    assert pt["issues"] == []


def test_lspci_missing_is_said_not_failed() -> None:
    found = pa.decide_pcie(None, cmdline=CMDLINE, iommu_entries=[], gpu_count=8, p2p_system=True)
    assert found["lspci"] is False
    assert found["issues"] == ["lspci is missing (install pciutils): ACS on the PCIe bridges was not read"]


def test_access_denied_is_said() -> None:
    text = (DATA / "acs-enabled-pex-switch.txt").read_text()
    denied = "\n".join(
        "\tCapabilities: <access denied>" if line.startswith("\tCapabilities:") else line
        for line in text.splitlines()
        if not line.startswith("\t\t")
    )
    found = pa.decide_pcie(
        pa.relevant(pa.parse_lspci(denied)), cmdline=CMDLINE, iommu_entries=[], gpu_count=2, p2p_system=True
    )
    assert found["acs_redirect"] == []
    assert found["issues"] == [
        "lspci could not read the bridges' capabilities (<access denied>: run as root)"
    ]


@pytest.mark.parametrize(
    ("gpus", "p2p", "reason"), [(1, True, "fewer than 2 GPUs"), (8, False, "does not use PCIe P2P")]
)
def test_not_checked_without_p2p_across_the_system(gpus: int, p2p: bool, reason: str) -> None:
    found = pa.decide_pcie(
        _devices("acs-enabled-pex-switch.txt"),
        cmdline=CMDLINE,
        iommu_entries=["dmar0"],
        gpu_count=gpus,
        p2p_system=p2p,
    )
    assert found["checked"] is False
    assert reason in found["reason"]
    assert found["issues"] == []


@pytest.mark.parametrize(
    ("profile", "env", "expected"),
    [
        ("pcie", {}, True),
        ("pcie", {"NCCL_P2P_LEVEL": "PHB"}, False),
        ("nvlink", {}, False),
        ("none", {"NCCL_P2P_LEVEL": "SYS"}, True),
        ("tuned", {"NCCL_P2P_LEVEL": "5"}, True),
    ],
)
def test_p2p_across_system_follows_the_profile_and_the_override(
    profile: str, env: dict[str, str], expected: bool
) -> None:
    assert pa.p2p_across_system(profile, env) is expected
