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

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.host_state import owner_mode, sha256

DOCUMENTATION = r"""
module: nccl_env_probe
short_description: Read-only probe of the NCCL environment file and its directory (sha256, owner, group, mode)
description:
  - Reads the host and returns what it found; changes nothing (check mode supported).
  - One module call is one round trip over a pipelined connection (a script upload is five).
options:
  spec:
    description: "What to probe: file: path."
    type: dict
    required: true
author: sglang-deploy contributors
"""

RETURN = r"""
probe:
  description: The answers (see the module's docstring).
  returned: always
  type: dict
"""


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
    module = AnsibleModule(
        argument_spec={"spec": {"type": "dict", "required": True}}, supports_check_mode=True
    )
    module.exit_json(changed=False, probe=probe(module.params["spec"]))


if __name__ == "__main__":
    main()
