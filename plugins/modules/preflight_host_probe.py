#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Read-only probe of what preflight needs from the host, in one round trip.

module: sglang.deploy.preflight_host_probe (returns `probe`; changes nothing)
SPEC: {"smi_candidates": [paths], "root": absolute path}
Answers: "nvidia_smi": the first candidate that is an executable file ("" when none);
"root": {"path": the nearest existing ancestor of root (root itself when it exists), "realpath": it
with symlinks resolved, "mount": the mount point holding it, "size_available": bytes free there for
an unprivileged user (statvfs f_bavail * f_frsize, what df shows as Avail)}.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.host_state import exit_with_probe

DOCUMENTATION = r"""
module: preflight_host_probe
short_description: Read-only probe of what preflight needs (nvidia-smi, free space under sglang_root)
description:
  - "The keys of O(spec): smi_candidates: [paths], root: absolute path."
extends_documentation_fragment: [sglang.deploy.probe]
"""

RETURN = r"""probe: {description: The answers the docstring lists., returned: always, type: dict}"""


def nearest_existing(path: str) -> str:
    current = posixpath.normpath(path)
    while not os.path.lexists(current) and current != "/":
        current = posixpath.dirname(current)
    return current


def mount_point(path: str) -> str:
    current = path
    while not os.path.ismount(current) and current != "/":
        current = posixpath.dirname(current)
    return current


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    smi = next((p for p in spec.get("smi_candidates", []) if os.path.isfile(p) and os.access(p, os.X_OK)), "")
    root = str(spec["root"])
    if not root.startswith("/"):
        raise SystemExit(f"root must be an absolute path, got {root!r}")
    nearest = nearest_existing(root)
    real = os.path.realpath(nearest)
    fs = os.statvfs(real)
    return {
        "nvidia_smi": smi,
        "root": {
            "path": nearest,
            "realpath": real,
            "mount": mount_point(real),
            "size_available": fs.f_bavail * fs.f_frsize,
        },
    }


def main() -> None:
    exit_with_probe(probe)


if __name__ == "__main__":
    main()
