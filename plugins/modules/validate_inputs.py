#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Documentation of the action plugin sglang.deploy.validate_inputs (plugins/action/validate_inputs.py):
it runs on the controller only; this module is never sent to a host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_inputs
short_description: Check one role's inputs on the controller (the collection's one validator)
description:
  - Runs on the controller only (action plugin); no host is contacted and nothing is changed.
  - Reads the role's C(meta/argument_specs.yml), entry point O(entry), and templates each of its options.
  - Refuses every string of every option (keys of mappings included, at any depth) that holds a control
    character, and every C(..) component in a path input (an option named C(*_path), C(*_dir), C(*_file),
    C(*_root), ...) - the one string rule, plugins/module_utils/text_checks.py.
  - Then applies the role's own rules, written in Python in
    C(plugins/plugin_utils/input_rules/<role>.py) (a role without that file has only the string rule).
  - The rules may read facts besides the options (C(FACTS)) and names from the hosts of a group
    (C(GROUP_FACTS), each templated in its host's context), e.g. the servers' measured start-up for
    the router.
  - Fails with every error at once, each naming the variable, its value (never the value of a
    secret-named input) and what is allowed.
  - Each role's C(tasks/validate.yml) is this one task; the preflight role runs it for every role of
    C(preflight_validate_roles) before any stage changes a host.
options:
  role:
    description: The role whose inputs are checked (its directory name under C(roles/)).
    type: str
    required: true
  entry:
    description: The argument spec entry point whose options are the inputs.
    type: str
    default: validate
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Check the inputs of the role nccl_env
  sglang.deploy.validate_inputs:
    role: nccl_env
"""

RETURN = r"""
role:
  description: The role checked.
  returned: always
  type: str
  sample: nccl_env
checked:
  description: How many options of the argument spec were checked.
  returned: always
  type: int
  sample: 14
msg:
  description: >-
    When the inputs hold and the role's rules define a summary, what the inputs decided (printed
    without -v); when they do not, every error in one line.
  returned: failed, or success with a summary
  type: str
  sample: "driver gate: branch 580, method existing, toolkit home /usr/local/cuda-13.0"
errors:
  description: Every error found (the task fails when there is one).
  returned: failed
  type: list
  elements: str
  sample: ["nccl_env_safety_apply=\"sometimes\" is not valid: allowed nvlink, always, never"]
"""
