"""Filters of the cuda_toolkit role: what the probe (module sglang.deploy.cuda_toolkit_probe) found drifted.

Pure functions, unit-tested in tests/test_cuda_toolkit_drift.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_BUILD = re.compile(r"V(\d+\.\d+\.\d+)")
_RELEASE = re.compile(r"release (\d+\.\d+)")


def cuda_toolkit_drift_text(probe: Mapping[str, Any], expected_build: str, expected_release: str) -> str:
    """Why the toolkit at the probed home is not the pinned one ('' when it is)."""
    nvcc = probe.get("nvcc") or {}
    why: list[str] = []
    if not nvcc.get("exists"):
        why.append("bin/nvcc is missing")
    elif not nvcc.get("executable"):
        why.append("bin/nvcc is not executable")
    else:
        text = str(nvcc.get("version", ""))
        build = _BUILD.search(text)
        release = _RELEASE.search(text)
        found = f"release {release[1] if release else '?'}, V{build[1] if build else '?'}"
        if not build or build[1] != expected_build or not release or release[1] != expected_release:
            why.append(f"nvcc is {found}, not release {expected_release}, V{expected_build}")
    missing = list(probe.get("missing_files") or [])
    if missing:
        why.append("missing " + ", ".join(missing))
    return "; ".join(why)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "cuda_toolkit_drift_text": cuda_toolkit_drift_text,
        }
