#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Documentation of the action plugin sglang.deploy.inventory_record (plugins/action/inventory_record.py):
it runs on the controller only; this module is never sent to a host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: inventory_record
short_description: Write a record measured on a host as inventory variables on the controller
description:
  - Runs on the controller only (action plugin); no host is contacted.
  - The collection's one writer of the records later runs read back as inventory variables (host_vars),
    the verify role's baseline and calibration records and the autotune role's NCCL and preset results.
  - O(variable) and its O(value) are written as YAML whose every string carries Ansible's C(!unsafe) tag
    (what a host reported is read back as text and never templated); control characters are refused.
    O(header) becomes YAML comment lines first, O(plain) lines of controller constants (switches the
    caller checked) last.
  - The record's directory is created (0755); the file is written atomically (a temporary file renamed
    over it) with O(mode). Changed only when its text or mode differs.
options:
  path:
    description: The record's absolute path on the controller, e.g. C(host_vars/<host>/sglang_baseline.yml).
    type: str
    required: true
  variable:
    description: The variable the record defines, a name of C([a-z_][a-z0-9_]*) (C(verify_baseline_records)).
    type: str
    required: true
  value:
    description: Its value, any data (every string is written tagged C(!unsafe)).
    type: raw
    required: true
  header:
    description: Comment lines written first (what wrote the record and how to renew it).
    type: str
    default: ""
  plain:
    description: YAML lines appended as they are (controller constants, never host output).
    type: str
    default: ""
  mode:
    description: The file's mode.
    type: str
    default: "0600"
attributes:
  check_mode:
    support: full
    description: Writes nothing; reports whether a real run would change the record.
  diff_mode:
    support: full
    description: The record's text before and after.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Record this host's baseline
  sglang.deploy.inventory_record:
    path: "{{ inventory_dir }}/host_vars/{{ inventory_hostname }}/sglang_baseline.yml"
    variable: verify_baseline_records
    value: "{{ records }}"
    header: Recorded by the verify role; one record per workload fingerprint.
    mode: "0600"
"""

RETURN = r"""
path:
  description: The record's path.
  returned: always
  type: str
msg:
  description: What happened (C(wrote), C(would write) or C(unchanged), then the path).
  returned: always
  type: str
  sample: "wrote: /srv/inventory/host_vars/gpu01/sglang_baseline.yml"
"""
