"""Tests of the preflight role's nvidia-smi parsers, against recorded output samples.

The code under test is `plugins/module_utils/gpu_facts.py` (the one nvidia-smi parser), loaded by
path; the preflight filters and the nccl_env role's topology detection call it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from modload import load_module

REPO = Path(__file__).resolve().parents[1]
PLUGIN_DIR = REPO / "plugins" / "filter"
PARSERS = REPO / "plugins" / "module_utils" / "gpu_facts.py"
DATA = Path(__file__).resolve().parent / "data" / "nvidia-smi"


# the FQCN import the filters use (modload puts .collections on sys.path), so both are one module
gf: Any = importlib.import_module("ansible_collections.sglang.deploy.plugins.module_utils.gpu_facts")
filters: Any = load_module("gpu_facts_filters", PLUGIN_DIR / "gpu_facts.py")


def sample(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_filters_are_the_parsers() -> None:
    """The preflight filters are these very functions (one parser, no copy in the filter file)."""
    assert Path(gf.__file__).resolve() == PARSERS
    names = filters.FilterModule().filters()
    assert names["preflight_gpu_query"] is gf.parse_query_gpu
    assert names["preflight_gpu_topology"] is gf.parse_topology
    assert names["preflight_gpu_summary"] is gf.summarize_gpus


def test_query_h200x2() -> None:
    records = gf.parse_query_gpu(sample("h200x2.query-gpu.csv"))
    assert records == [
        {
            "index": i,
            "name": "NVIDIA H200",
            "compute_cap": "9.0",
            "driver_version": "580.159.04",
            "memory_total_mib": 143771,
        }
        for i in range(2)
    ]
    summary = gf.summarize_gpus(records)
    assert summary["count"] == 2
    assert summary["names"] == ["NVIDIA H200", "NVIDIA H200"]
    assert summary["compute_capability"] == "9.0"
    assert summary["driver_version"] == "580.159.04"
    assert summary["driver_branch"] == 580
    assert summary["memory_mib"] == 143771


def test_query_rtxpro6000x8() -> None:
    summary = gf.summarize_gpus(gf.parse_query_gpu(sample("rtxpro6000x8.query-gpu.csv")))
    assert summary["count"] == 8
    assert summary["compute_capability"] == "12.0"
    assert summary["driver_branch"] == 580
    assert summary["memory_mib"] == 97887
    assert set(summary["names"]) == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}


def test_query_columns_mapped_by_header_not_position() -> None:
    text = (
        "memory.total [MiB], driver_version, name, index, compute_cap\n"
        "81559, 575.57.08, NVIDIA H100 80GB HBM3, 0, 9.0\n"
        "81559, 575.57.08, NVIDIA H100 80GB HBM3, 1, 9.0\n"
    )
    summary = gf.summarize_gpus(gf.parse_query_gpu(text))
    assert (summary["count"], summary["driver_branch"], summary["memory_mib"]) == (2, 575, 81559)


def test_query_mixed_gpus_report_the_lowest() -> None:
    text = (
        "index, name, compute_cap, driver_version, memory.total [MiB]\n"
        "0, NVIDIA H200, 9.0, 580.159.04, 143771\n"
        "1, NVIDIA A100-SXM4-80GB, 8.0, 580.159.04, 81920\n"
    )
    summary = gf.summarize_gpus(gf.parse_query_gpu(text))
    assert summary["compute_capability"] == "8.0"
    assert summary["compute_capabilities"] == ["8.0", "9.0"]
    assert summary["memory_mib"] == 81920


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "printed nothing"),
        ("0, NVIDIA H200, 9.0, 580.159.04, 143771\n", "lacks column"),
        ("index, name, compute_cap, driver_version, memory.total [MiB]\n0, NVIDIA H200, 9.0\n", "fields"),
        (
            "index, name, compute_cap, driver_version, memory.total [MiB]\n"
            "0, NVIDIA H200, 9.0, 580.159.04, 143771 MiB\n",
            "nounits",
        ),
        (
            "index, name, compute_cap, driver_version, memory.total [MiB]\n"
            "0, NVIDIA H200, [N/A], 580.159.04, 143771\n",
            "compute capability",
        ),
    ],
)
def test_query_rejects_unexpected_output(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gf.parse_query_gpu(text)


def test_summary_without_gpus() -> None:
    summary = gf.summarize_gpus([])
    assert summary["count"] == 0
    assert summary["driver_branch"] == 0


@pytest.mark.parametrize(
    ("version", "branch"), [("580.159.04", 580), ("570.172.08", 570), ("535.261.03", 535), ("", 0)]
)
def test_driver_branch(version: str, branch: int) -> None:
    assert gf.driver_branch(version) == branch


def test_driver_branch_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="driver version"):
        gf.driver_branch("N/A")


def test_topology_h200x2_nvlink() -> None:
    text = sample("h200x2-nvlink.topo-m.txt")
    assert "\x1b[4m" in text  # the recorded header is underlined, as nvidia-smi prints it
    topo = gf.parse_topology(text)
    assert topo == {
        "gpus": ["GPU0", "GPU1"],
        "links": {"GPU0-GPU1": "NV18"},
        "interconnect": "nvlink",
        "nvlink_all_pairs": True,
    }


def test_topology_h200x1_has_no_interconnect() -> None:
    topo = gf.parse_topology(sample("h200x1.topo-m.txt"))
    assert topo["gpus"] == ["GPU0"]
    assert topo["links"] == {}
    assert topo["interconnect"] == "none"


def test_topology_8_gpu_pcie_with_nics() -> None:
    topo = gf.parse_topology(sample("rtxpro6000x8-pcie.topo-m.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert len(topo["links"]) == 28  # every unordered pair, NIC columns ignored
    assert topo["links"]["GPU0-GPU1"] == "PXB"
    assert topo["links"]["GPU0-GPU2"] == "NODE"
    assert topo["links"]["GPU3-GPU4"] == "SYS"
    assert set(topo["links"].values()) == {"PXB", "NODE", "SYS"}
    assert topo["interconnect"] == "pcie"
    assert topo["nvlink_all_pairs"] is False


def test_topology_without_ansi_and_partial_nvlink() -> None:
    text = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV4\tNODE\t0-31,64-95\t0\n"
        "GPU1\tNV4\t X \tNODE\t0-31,64-95\t0\n"
        "GPU2\tNODE\tNODE\t X \t0-31,64-95\t0\n"
    )
    topo = gf.parse_topology(text)
    assert topo["interconnect"] == "nvlink"
    assert topo["nvlink_all_pairs"] is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("No devices were found\n", "no GPU0 header"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-47\n", "lacks row"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tWHAT\t0-47\nGPU1\tWHAT\t X \t0-47\n", "unknown link kind"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X\nGPU1\tNV18\t X \t0-47\n", "short row"),
    ],
)
def test_topology_rejects_unexpected_output(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gf.parse_topology(text)
