"""What every read-only probe module of the collection (plugins/modules/*_probe.py,
sglang_stack_audit.py) documents the same way: `extends_documentation_fragment: [sglang.deploy.probe]`."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
description:
  - Reads the host and returns what it found in C(probe); changes nothing (check mode supported).
  - One module call is one round trip over a pipelined connection (a script upload is five).
options:
  spec:
    description: What to probe (its keys are the module's suboptions of O(spec)).
    type: dict
    required: true
author: sglang-deploy contributors (@sglang-deploy)
"""
