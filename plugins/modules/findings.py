#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Documentation of the action plugin sglang.deploy.findings (plugins/action/findings.py): it runs on the
controller only; this module is never sent to a host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: findings
short_description: Judge a decider's answer in one task (fail on its errors, warn its warnings)
description:
  - Runs on the controller only (action plugin); no host is contacted and nothing is changed.
  - The collection's deciders (filters such as C(sglang.deploy.preflight_host_check),
    C(sglang.deploy.preflight_model_check), C(sglang.deploy.multinode_plan)) answer with a mapping that
    holds a list C(errors) and, optionally, a list C(warnings). This task is their one judge, instead of
    a C(set_fact), an C(assert) and a C(debug) per decider.
  - Every error fails the task at once, all of them in one message (O(what) first).
  - Every warning is a warning of the task (Ansible's C([WARNING]) line; ansible-runner's event data).
  - "With O(errors_as_warnings) the errors are reported as warnings instead, each marked
    C(WARNING (<reason>): ) (e.g. the model checks on a lab host, whose service never starts)."
  - The answer is the task's RV(decided); C(register) the task to read it later. Its C(summary), a
    string when the decider gives one, is the task's message (printed like an assert's C(success_msg)).
options:
  decided:
    description:
      - The decider's answer. Its other keys (a plan, a summary) are kept and returned in RV(decided).
    type: dict
    required: true
    suboptions:
      errors:
        description: What fails the task, each naming the variable, the value and what is allowed.
        type: list
        elements: str
        required: true
      warnings:
        description: What the decider let through, each a warning of the task.
        type: list
        elements: str
        default: []
  what:
    description: The failure message's prefix (what was checked), e.g. C(invalid multi-node input).
    type: str
    default: ""
  errors_as_warnings:
    description: When set, why the errors do not fail here; each is then a warning marked with it.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only; the same judgement in check mode.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Check the host (every error at once, the warnings as warnings)
  sglang.deploy.findings:
    decided: "{{ probe | sglang.deploy.preflight_host_check(gpu=gpu, facts=ansible_facts, inputs=inputs) }}"
  register: host_check

- name: Check the model directories (on a lab host the errors are warnings)
  sglang.deploy.findings:
    decided: "{{ probe | sglang.deploy.preflight_model_check(gpu_count=0) }}"
    errors_as_warnings: lab host
"""

RETURN = r"""
decided:
  description: The decider's answer as given (every key it has).
  returned: always
  type: dict
  sample: {errors: [], warnings: ["WARNING: NVIDIA driver branch 570 < sglang_driver_min_branch=580"]}
errors:
  description: Every error (the task fails when there is one and O(errors_as_warnings) is empty).
  returned: failed
  type: list
  elements: str
  sample: ["sglang_tp_size=8 but the host has 4 GPUs"]
msg:
  description: Every error in one line, after O(what); on success the decider's C(summary).
  returned: failed, or when the answer has a summary
  type: str
  sample: "invalid multi-node input: sglang_replica='a b' is not valid"
"""
