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


# Per source file: its bytecode file (importlib.util.cache_from_source), whether that file is valid
# for the source as it is now (magic number, and the source's mtime and size in the header, or its
# hash for a hash-based pyc), its owner and mode.
_BYTECODE = """
import importlib.util, json, os, sys
out = {}
for src in sys.argv[1:]:
    pyc = importlib.util.cache_from_source(src)
    try:
        head, st, pst = open(pyc, "rb").read(16), os.stat(src), os.stat(pyc)
    except OSError:
        out[src] = {"pyc": pyc, "exists": False}
        continue
    flags = int.from_bytes(head[4:8], "little")
    if flags & 1:
        valid = head[8:16] == importlib.util.source_hash(open(src, "rb").read())
    else:
        valid = (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                 and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
    dst = os.stat(os.path.dirname(pyc))
    out[src] = {"pyc": pyc, "exists": True, "valid": head[:4] == importlib.util.MAGIC_NUMBER and valid,
                "uid": pst.st_uid, "mode": pst.st_mode & 0o777,
                "dir_uid": dst.st_uid, "dir_mode": dst.st_mode & 0o777}
print(json.dumps(out))
"""


def bytecode(host: Any, *sources: str) -> dict[str, dict[str, Any]]:
    """The bytecode state of each source file (absolute paths) in the release."""
    data = base64.b64encode(_BYTECODE.encode()).decode()
    script = f"echo {data} | base64 -d > /tmp/bytecode.py"
    out = host.check_output(f"{script} && {PY} /tmp/bytecode.py {' '.join(sources)}")
    state: dict[str, dict[str, Any]] = json.loads(out)
    return state
