#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Read-only probe of the NCCL environment file and its directory, in one round trip.

module: sglang.deploy.nccl_env_probe (returns `probe`; changes nothing)
SPEC: {"file": path}
Answers: "file": {"sha256", "owner", "group", "mode"} of the file (null when missing; {"type": ...}
when it is not a regular file), "dir": {"owner", "group", "mode"} of its directory (null when
missing). render.yml skips its tasks when both are what they would leave.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.host_state import (
    exit_with_probe,
    owner_mode,
    sha256,
)

DOCUMENTATION = r"""
module: nccl_env_probe
short_description: Read-only probe of the NCCL environment file and its directory (sha256, owner, group, mode)
description:
  - Answers C(file) (sha256, owner, group, mode; null when missing) and C(dir) (owner, group, mode of
    its directory).
options:
  spec:
    suboptions:
      file: {description: The NCCL environment file., type: path, required: true}
extends_documentation_fragment: [sglang.deploy.probe]
"""

EXAMPLES = r"""
- name: Probe the NCCL environment file
  sglang.deploy.nccl_env_probe:
    spec:
      file: /etc/sglang/nccl.env
  register: __probe
"""

RETURN = r"""probe: {description: The answers the docstring lists., returned: always, type: dict}"""


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    path = str(spec["file"])
    out: dict[str, Any] = {"file": None, "dir": None}
    try:
        st = os.lstat(path)
    except OSError:
        pass
    else:
        if stat.S_ISREG(st.st_mode):
            out["file"] = {"sha256": sha256(path) or "", **owner_mode(st)}
        else:
            out["file"] = {"type": "not a regular file"}
    with contextlib.suppress(OSError):
        out["dir"] = owner_mode(os.lstat(os.path.dirname(path) or "/"))
    return out


def main() -> None:
    exit_with_probe(probe)


if __name__ == "__main__":
    main()
