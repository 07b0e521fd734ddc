"""The sglang_stack release id names the lock that is installed (issue 21): the role's own definition
(vars/main.yml, from the stack's probe - module sglang.deploy.sglang_stack_audit, which reads the host's
lock and names the release in the same round trip, in inspect.yml and again after compile.yml), read
by a real ansible-playbook, gives another id when the lock's content differs, the same id for the same
lock, the id the one rule (the filter sglang.deploy.release_id) gives for the inputs and that lock's
sha256, and marks a lock not compiled yet as pending."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from modload import REPO

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
INPUTS = {"requirements_in": "torch==2.9.1\n", "overrides": [], "source": "sdist", "lock": ""}
PLAY = """---
- hosts: localhost
  gather_facts: false
  vars:
    sglang_root: /opt/sglang
  tasks:
    - name: Read the role's defaults and the definitions of the release id
      ansible.builtin.include_vars: "{{ item }}"
      loop: ["{{ repo }}/roles/sglang_stack/defaults/main.yml", "{{ repo }}/roles/sglang_stack/vars/main.yml"]
    - name: Probe as inspect.yml does (the lock's part)
      sglang.deploy.sglang_stack_audit:
        spec:
          releases_dir: "{{ releases }}"
          lock: {file: "{{ lock_file }}", inputs: "{{ inputs }}"}
      register: __sglang_stack_probe_run
    - name: Record the release the lock names
      vars:
        __sglang_stack_id_inputs: "{{ inputs }}"
        __sglang_stack_lock_file: "{{ lock_file }}"
      ansible.builtin.copy:
        content: "{{ {'id': __sglang_stack_release_id, 'dir': __sglang_stack_release_dir,
                      'pending': __sglang_stack_lock_pending, 'digest': __sglang_stack_lock_digest,
                      'rule': (inputs | combine({'host_lock': __sglang_stack_lock_digest})
                               if lock_file | length > 0 else inputs)
                              | sglang.deploy.release_id} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def release(tmp: Path, content: str | None, lock_file: str | None = None) -> dict[str, Any]:
    """The role's release id, dir and pending flag for a host lock with ``content`` (None: not compiled
    yet); ``lock_file=''`` is a lock given on the controller."""
    lock = tmp / "locks" / "requirements.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.unlink(missing_ok=True)
    if content is not None:
        lock.write_text(content)
    out = tmp / "out.json"
    play = tmp / "play.yml"
    play.write_text(PLAY)
    extra = {"lock_file": str(lock) if lock_file is None else lock_file, "out": str(out), "repo": str(REPO),
             "releases": str(tmp / "releases"), "inputs": INPUTS,
             "ansible_python_interpreter": sys.executable}  # fmt: skip
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "HOME": str(tmp), "LC_ALL": "C.UTF-8"}  # fmt: skip
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play), "-e", json.dumps(extra)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_the_release_id_changes_with_the_lock(tmp_path: Path) -> None:
    a = release(tmp_path, "idna==3.10 --hash=sha256:aaaa\n")
    b = release(tmp_path, "idna==3.11 --hash=sha256:bbbb\n")
    again = release(tmp_path, "idna==3.10 --hash=sha256:aaaa\n")
    assert a["id"] != b["id"]
    assert a == again
    # the probe (on the host) and the one rule (the filter, on the controller) name the same release
    assert a["digest"] == hashlib.sha256(b"idna==3.10 --hash=sha256:aaaa\n").hexdigest()
    assert (a["id"], b["id"]) == (a["rule"], b["rule"])
    assert a["dir"] == f"/opt/sglang/releases/{a['id']}"  # the role's default releases dir
    assert not a["pending"]
    assert not b["pending"]
    pending = release(tmp_path, None)
    assert pending["pending"]
    assert pending["id"] == pending["rule"]
    assert pending["id"] not in (a["id"], b["id"])
    # a lock given on the controller (no host lock file): its digest is in the inputs already
    given = release(tmp_path, None, lock_file="")
    assert not given["pending"]
    assert given["id"] == given["rule"]
