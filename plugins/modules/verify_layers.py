#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Documentation of the action plugin sglang.deploy.verify_layers (plugins/action/verify_layers.py): it runs
on the controller and runs the layers' scripts on the host through ansible.builtin.script; this module is
never sent to a host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: verify_layers
short_description: Run, record and report the verify role's script layers in one task
description:
  - Each layer in order, skipped with its reason (O(layers[].skip)) or its script run on the host
    (C(ansible.builtin.script), the task's role files, environment and privilege) under
    C(timeout -k 10 <timeout_s>). The scripts are read-only, so they run in check mode too.
  - A script's result is the last line of its stdout that is a JSON object with a C(status). A script
    that fails, times out or prints none gives a failed result saying why (its message and stderr, the
    O(secrets) masked).
  - "Every layer gets one report line, C(verify layer <title> passed|skipped|failed: <reason>), printed
    as the task's result."
  - After every layer O(results_file) is written on the controller, the results so far scrubbed as a
    whole (every secret-named field masked, every value of O(secrets) replaced), 0644; not in check mode.
    Without O(layers) the task only writes it (and reports O(recorded)).
  - "O(recorded) names layers the role computed itself (the benchmark's, already in O(results)): each gets
    its report line and the file is written, so a layer that is not a script reports and records through
    this one task too."
  - "A failed layer whose stop is true fails the task at once, C(verify layer <title> failed: <reason>);
    the layers after it do not run. With stop false the failure is recorded and the rest run (the
    verify role's rollback follows)."
options:
  layers:
    description: The layers, in order.
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: The layer's key in verify_results (C(gpu), C(cuda), C(torch), C(nccl), C(http)).
        type: str
        required: true
      title:
        description: The layer's number and name, e.g. C(2 (CUDA)).
        type: str
        required: true
      skip:
        description: Why the layer does not run (recorded as skipped); empty to run it.
        type: str
        default: ""
      script:
        description: The script in the role's C(files/).
        type: str
      args:
        description: Its arguments, quoted for the shell.
        type: str
        default: ""
      executable:
        description: The interpreter on the host.
        type: str
      stop:
        description: This layer's stop rule (default O(stop)).
        type: bool
  recorded:
    description: Layers of O(results) to report (one line each, as a script layer's) without running anything.
    type: list
    elements: dict
    default: []
    suboptions:
      key:
        description: The layer's key in O(results), e.g. C(bench).
        type: str
        required: true
      title:
        description: The layer's number and name, e.g. C(6 (benchmark)).
        type: str
        required: true
  results:
    description:
      - verify_results so far, a mapping of layer key to result (what O(results_file) holds besides this
        task's layers). Data the role recorded, not configuration.
    type: raw
    default: {}
  results_file:
    description: The controller's verify_results_file; empty for none.
    type: str
    default: ""
  stop:
    description: Whether a failed layer fails the task (false where the rollback handles it).
    type: bool
    default: true
  timeout_s:
    description: Each script's time limit in seconds; 0 for none.
    type: int
    default: 0
  secrets:
    description: Values masked in the reasons, the printed result and the file (the API key).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: The scripts are read-only and run; the results file is not written.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Layers 1-2
  sglang.deploy.verify_layers:
    layers:
      - key: gpu
        title: 1 (GPU)
        script: verify_gpu.py
        executable: /usr/bin/python3
        args: "--smi-candidates /usr/bin/nvidia-smi --expect '{\"count\": 8}'"
      - key: cuda
        title: 2 (CUDA)
        skip: check mode (read-only)
    results: "{{ verify_results }}"
    results_file: /tmp/verify-results.json
    timeout_s: 600
    secrets: ["{{ sglang_api_key }}"]
  register: layers

- name: Record them
  ansible.builtin.set_fact:
    verify_results: "{{ verify_results | combine(layers.layers) }}"

- name: Report the benchmark the role recorded and write the results file
  sglang.deploy.verify_layers:
    recorded: [{key: bench, title: 6 (benchmark)}]
    results: "{{ verify_results }}"
    results_file: /tmp/verify-results.json
    secrets: ["{{ sglang_api_key }}"]
"""

RETURN = r"""
layers:
  description: Each layer's result by key (status, reason and the script's figures), secrets masked.
  returned: always
  type: dict
  sample: {gpu: {status: passed, reason: "8x NVIDIA RTX PRO 6000, driver 580.95.05"}}
msg:
  description: One report line per layer (on failure, the failed layer's line).
  returned: always
  type: raw
  sample: ["verify layer 1 (GPU) passed: 8x NVIDIA RTX PRO 6000", "verify layer 2 (CUDA) skipped: check mode"]
"""
