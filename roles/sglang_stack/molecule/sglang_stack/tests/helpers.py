"""Shared helpers of the sglang_stack scenario tests (not collected: no test_ prefix)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import moltest
import yaml

REPO = (
    Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[4]))
    .resolve()
    .parent.parent
)
PATCHES = REPO / "patches"
ROOT = "/opt/sglang"
CURRENT = f"{ROOT}/current"
PY = f"{CURRENT}/venv/bin/python"


def series() -> list[dict[str, Any]]:
    data = yaml.safe_load((PATCHES / "series.yml").read_text())
    entries: list[dict[str, Any]] = data["patches"] if isinstance(data, dict) else data
    return entries


def strip_of(entry: dict[str, Any]) -> int:
    strip = entry["strip"]
    return int(strip.get("site-packages", strip.get("site_packages")))


def added_lines(patch: str) -> list[str]:
    """Distinctive added lines of a patch (longest first)."""
    lines = [ln[1:].strip() for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return sorted({ln for ln in lines if len(ln) > 12}, key=len, reverse=True)


def receipt(host: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(host.file(f"{CURRENT}/receipt.json").content_string)
    return data


def site_packages(host: Any) -> str:
    out: str = host.check_output(f"{PY} -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'")
    return out.strip()


def push_patch(host: Any, name: str) -> str:
    """Copy a patch file into the container (base64 through the connection); returns its path."""
    data = base64.b64encode((PATCHES / name).read_bytes()).decode()
    dest = f"/tmp/{name}"
    host.check_output(f"echo {data} | base64 -d > {dest}")
    return dest


def playbook(*args: str, timeout: int = 1800) -> tuple[int, str]:
    return moltest.run_playbook("converge.yml", *args, timeout=timeout)


def recap(out: str) -> dict[str, int]:
    return moltest.totals(out)
