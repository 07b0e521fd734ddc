#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""The host lock of a deployment run (logic: plugins/module_utils/host_lock.py).

Called through its action plugin (plugins/action/host_lock.py), which fills in the holder (the
controller's ansible-playbook process) and checks on the controller whether a holder's process is
gone; the module reads, takes or removes the lock file on the host.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_lock
short_description: Hold a host for one deployment run (a lock file naming the run)
description:
  - Takes, keeps or releases the lock of a host for one run of the collection's playbooks, so two runs
    on one host cannot interleave. site.yml takes it right after preflight (play
    C(Transaction - take the host lock)) and releases it at the end of the verify play; each stage
    playbook that changes a host does the same when run on its own.
  - The lock file (JSON, mode 0600, no secrets) names the holder - the run id, the controller's host
    name, the pid of its C(ansible-playbook), that process' start time, its command line with the value
    of every C(-e)/C(--extra-vars) spelling (C(-ve), C(-e@file), C(--extra), C(--extra-var=...)) and of
    every secret-named C(NAME=VALUE) masked (the CLI's secret-name rule), and when the lock was taken.
    Every read-modify-write happens under C(flock(2)) of a guard file beside it, and the file is
    replaced with C(rename(2)). The guard, the temporary file (C(O_CREAT|O_EXCL)) and the record are
    opened with C(O_NOFOLLOW) - a symbolic link planted in the lock directory is refused, never written
    through.
  - Held by the same run (same run id) it is kept - re-entrant, so site.yml's stage playbooks can ask
    again. Held by another run the task fails at once, naming the holder (pid, start time, command).
  - A stale lock is taken over with a warning naming the old holder - its controller is this
    controller and its C(ansible-playbook) process is gone (the action plugin checks the pid and its
    start time on the controller, so a reused pid does not count), or it was taken more than
    O(stale_after_s) seconds ago by the host's clock, or the file is unreadable.
  - The lock is run bookkeeping, not managed state - taking and releasing it report C(changed=false),
    so a no-op rerun stays C(changed=0); a take-over reports a warning.
  - Check mode reads the lock and never writes it - a lock held by another run is a warning, not a
    failure (a C(--check) run changes nothing, so it does not need the host to itself).
  - A run that fails leaves its lock behind (a failed host is dropped from the release play) - the next
    run from the same controller takes it over with a warning; from another controller it waits for
    O(stale_after_s) or an operator who removes the file.
options:
  state:
    description: C(present) takes (or keeps) the lock, C(absent) releases it when this run holds it.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The lock file on the host (absolute; its directory is created 0755).
    type: path
    default: /run/sglang-deploy/lock
  stale_after_s:
    description:
      - A lock taken longer ago than this (host clock) is stale and taken over with a warning; 0 never.
      - Must exceed the longest run (a release build plus the benchmark); the playbooks read
        C(sglang_lock_stale_after_s), default 43200 (12 h).
    type: int
    default: 43200
  holder:
    description:
      - The run, set by the action plugin.
    type: dict
    required: true
    suboptions:
      run_id: {description: "The run's id (controller:pid:start).", type: str, required: true}
      controller: {description: "The controller's host name.", type: str}
      pid: {description: "The pid of the run's ansible-playbook.", type: int}
      pid_start: {description: "That process' start time (seconds since the epoch).", type: float}
      command: {description: "Its command line, C(-e) values and secret-named NAME=VALUE masked.", type: str}
      started_at: {description: "When the lock was taken (UTC, ISO 8601).", type: str}
  takeover:
    description: The run id of a holder whose process the action plugin found gone (set by the action plugin).
    type: str
    default: ""
attributes:
  check_mode: {support: full, description: Reads only; a held lock is a warning.}
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Take the host lock (fails at once when another run holds it)
  sglang.deploy.host_lock:
    path: /run/sglang-deploy/lock
    stale_after_s: 43200

- name: Release it
  sglang.deploy.host_lock:
    state: absent
"""

RETURN = r"""
status:
  description: >-
    acquired, held_by_us, taken_over, held (another run holds it: a failure outside check mode),
    released, free, held_by_other; in check mode would_acquire, would_take_over, would_release.
  returned: always
  type: str
lock:
  description: The lock record in force after the task (holder, taken_epoch), or the other run's.
  returned: always
  type: dict
previous:
  description: The old holder's record of a take-over (else null).
  returned: always
  type: dict
holder_text:
  description: One line naming the holder of RV(lock) (run, pid, controller, start time, command).
  returned: always
  type: str
"""


import os
import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.host_lock import (
    HOLDER_KEYS,
    acquire,
    describe,
    read,
    release,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "path": {"type": "path", "default": "/run/sglang-deploy/lock"},
            "stale_after_s": {"type": "int", "default": 43200},
            "holder": {"type": "dict", "required": True},
            "takeover": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p: dict[str, Any] = module.params
    path = str(p["path"])
    holder = p["holder"]
    if not os.path.isabs(path) or re.search(r"[\x00-\x1f\x7f]", path):
        module.fail_json(msg=f"host_lock: path={path!r}: allowed an absolute path without control characters")
    missing = [k for k in HOLDER_KEYS if k not in holder]
    if missing or not str(holder.get("run_id") or ""):
        module.fail_json(msg=f"host_lock: holder lacks {', '.join(missing) or 'run_id'}")
    if p["stale_after_s"] < 0:
        module.fail_json(msg=f"host_lock: stale_after_s={p['stale_after_s']}: allowed an integer >= 0")
    check = bool(module.check_mode)
    try:
        if p["state"] == "absent":
            res = release(path, str(holder["run_id"]), check=check)
            out: dict[str, Any] = {"status": res["status"], "lock": res["holder"], "previous": None}
        else:
            res = acquire(path, holder, stale_after_s=p["stale_after_s"], takeover=p["takeover"], check=check)
            out = {"status": res["status"], "lock": res["holder"], "previous": res["previous"]}
            if res.get("why"):
                out["why"] = res["why"]
    except OSError as exc:
        module.fail_json(msg=f"host_lock: {path}: {exc}", lock=read(path) if os.path.exists(path) else None)
    out["holder_text"] = describe(out["lock"])
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
