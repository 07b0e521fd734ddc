"""The one set of parsers of `nvidia-smi` output (GPU records, driver branch, topology matrix).

Pure Python, no dependency beyond the standard library (no Ansible import). The preflight role's
filters (plugins/filter/gpu_facts.py) and the nccl_env role's standalone detection
(``sglang.deploy.nccl_env_interconnect_from_topo``) call these functions; tests/test_gpu_facts.py
loads this file by path.

Inputs are the texts of
  * `nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,nounits`
    (the header line is required: columns are mapped by name, not position), and
  * `nvidia-smi topo -m` (the GPU/NIC matrix, with or without the ANSI underline nvidia-smi
    prints around the header row, with or without NIC columns and legends).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

QUERY_FIELDS: tuple[str, ...] = ("index", "name", "compute_cap", "driver_version", "memory.total")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NVLINK = re.compile(r"^NV\d+$")
# PCIe / host paths of the `nvidia-smi topo -m` legend (SOC, CNS: older drivers' spelling).
_PCIE_LINKS = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "CNS"})
_DEVICE = re.compile(r"^(GPU|NIC)\d+$|^mlx\d+_\d+$")


class GpuRecord(TypedDict):
    """One GPU as `nvidia-smi --query-gpu` reports it."""

    index: int
    name: str
    compute_cap: str
    driver_version: str
    memory_total_mib: int


class GpuSummary(TypedDict):
    """What the role exports about all GPUs of a host."""

    count: int
    names: list[str]
    compute_capability: str
    compute_capabilities: list[str]
    driver_version: str
    driver_versions: list[str]
    driver_branch: int
    memory_mib: int


class Topology(TypedDict):
    """The GPU-to-GPU part of `nvidia-smi topo -m`."""

    gpus: list[str]
    links: dict[str, str]
    interconnect: str
    nvlink_all_pairs: bool


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (nvidia-smi underlines the matrix header)."""
    return _ANSI.sub("", text)


def _field_key(header: str) -> str:
    """`memory.total [MiB]` -> `memory.total`."""
    return header.split("[", 1)[0].strip().lower()


def _na(value: str) -> bool:
    return value.strip() in {"", "[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


def parse_query_gpu(text: str) -> list[GpuRecord]:
    """Parse `nvidia-smi --query-gpu=... --format=csv,nounits` output (header line included).

    Raises ValueError with the offending line when the text is not that CSV.
    """
    lines = [line for line in strip_ansi(text).splitlines() if line.strip()]
    if not lines:
        raise ValueError("nvidia-smi --query-gpu printed nothing")
    rows = list(csv.reader(lines, skipinitialspace=True))
    header = [_field_key(cell) for cell in rows[0]]
    missing = [f for f in QUERY_FIELDS if f not in header]
    if missing:
        raise ValueError(
            f"nvidia-smi --query-gpu output lacks column(s) {', '.join(missing)} "
            f"(header line: {lines[0]!r}; expected the fields {', '.join(QUERY_FIELDS)} with a header)"
        )
    records: list[GpuRecord] = []
    for raw, line in zip(rows[1:], lines[1:], strict=True):
        if len(raw) != len(header):
            raise ValueError(f"nvidia-smi --query-gpu line has {len(raw)}/{len(header)} fields: {line!r}")
        row = {key: cell.strip() for key, cell in zip(header, raw, strict=True)}
        cap = row["compute_cap"]
        if not re.fullmatch(r"\d+\.\d+", cap):
            raise ValueError(f"unexpected compute capability {cap!r} in nvidia-smi line {line!r}")
        if not re.fullmatch(r"\d+(\.\d+)+", row["driver_version"]):
            raise ValueError(f"unexpected driver version {row['driver_version']!r} in line {line!r}")
        memory = row["memory.total"]
        if _na(memory) or not memory.isdigit():
            raise ValueError(
                f"unexpected memory.total {memory!r} in line {line!r} (query with --format=csv,nounits)"
            )
        records.append(
            GpuRecord(
                index=int(row["index"]),
                name=row["name"],
                compute_cap=cap,
                driver_version=row["driver_version"],
                memory_total_mib=int(memory),
            )
        )
    return records


def driver_branch(version: str) -> int:
    """`580.159.04` -> 580; empty (no driver) -> 0."""
    version = str(version).strip()
    if not version:
        return 0
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"not an NVIDIA driver version: {version!r}")
    return int(head)


def _cap_key(cap: str) -> tuple[int, int]:
    major, minor = cap.split(".", 1)
    return int(major), int(minor)


def summarize_gpus(records: Iterable[Mapping[str, Any]]) -> GpuSummary:
    """Host-level facts from per-GPU records: the lowest capability / memory / driver win."""
    recs = list(records)
    if not recs:
        return GpuSummary(
            count=0,
            names=[],
            compute_capability="",
            compute_capabilities=[],
            driver_version="",
            driver_versions=[],
            driver_branch=0,
            memory_mib=0,
        )
    caps = sorted({str(r["compute_cap"]) for r in recs}, key=_cap_key)
    drivers = sorted({str(r["driver_version"]) for r in recs}, key=driver_branch)
    return GpuSummary(
        count=len(recs),
        names=[str(r["name"]) for r in recs],
        compute_capability=caps[0],
        compute_capabilities=caps,
        driver_version=drivers[0],
        driver_versions=drivers,
        driver_branch=driver_branch(drivers[0]),
        memory_mib=min(int(r["memory_total_mib"]) for r in recs),
    )


def _topology_matrix(text: str) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(device columns, GPU names, GPU row cells) of a `nvidia-smi topo -m` text."""
    lines = strip_ansi(text).splitlines()
    # The header row starts with GPU0 (after a tab); the GPU0 row starts with GPU0 followed by X.
    header_at = next(
        (i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"] and line.split()[1:2] != ["X"]),
        None,
    )
    if header_at is None:
        raise ValueError("no GPU0 header row in `nvidia-smi topo -m` output")
    devices: list[str] = []
    for token in lines[header_at].split():
        if not _DEVICE.match(token):
            break
        devices.append(token)
    gpus = [d for d in devices if d.startswith("GPU")]
    cells: dict[str, list[str]] = {}
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if tokens[:1] == ["Legend:"]:
            break
        if not tokens or tokens[0] not in gpus:
            continue  # NIC rows, blank lines
        if len(tokens) < 1 + len(devices):
            raise ValueError(f"short row in `nvidia-smi topo -m`: {line!r}")
        cells[tokens[0]] = tokens[1 : 1 + len(devices)]
    missing = [g for g in gpus if g not in cells]
    if missing:
        raise ValueError(f"`nvidia-smi topo -m` lacks row(s) for {', '.join(missing)}")
    return devices, gpus, cells


def parse_topology(text: str) -> Topology:
    """Parse the matrix of `nvidia-smi topo -m`.

    interconnect: `nvlink` when any GPU pair is linked by NV# (bonded NVLinks), `pcie` when
    there are >= 2 GPUs and none is (PIX/PXB/PHB/NODE/SYS), `none` with fewer than 2 GPUs.
    Raises ValueError on a matrix it does not understand (unknown link kind, missing rows).
    """
    devices, gpus, cells = _topology_matrix(text)
    links: dict[str, str] = {}
    for a_pos, a in enumerate(gpus):
        for b in gpus[a_pos + 1 :]:
            kind = cells[a][devices.index(b)]
            if not (_NVLINK.match(kind) or kind in _PCIE_LINKS):
                raise ValueError(f"unknown link kind {kind!r} between {a} and {b} in `nvidia-smi topo -m`")
            links[f"{a}-{b}"] = kind
    nvlinks = [k for k in links.values() if _NVLINK.match(k)]
    if len(gpus) < 2:
        interconnect = "none"
    elif nvlinks:
        interconnect = "nvlink"
    else:
        interconnect = "pcie"
    return Topology(
        gpus=gpus,
        links=links,
        interconnect=interconnect,
        nvlink_all_pairs=bool(links) and len(nvlinks) == len(links),
    )


def interconnect_from_topo(text: str) -> str:
    """The interconnect class of a `nvidia-smi topo -m` text: :func:`parse_topology`'s, or `none`
    when the text has no GPU matrix (no nvidia-smi printed nothing, one GPU without a matrix)."""
    if not any(line.split()[:1] == ["GPU0"] for line in strip_ansi(text).splitlines()):
        return "none"
    return parse_topology(text)["interconnect"]
