"""The sglang_stack release id names the lock that is installed (issue 21): the role's own definition
(vars/main.yml, from the stat of the host's lock that main.yml's facts block and compile.yml
register), read by a real ansible-playbook, gives another id when the lock's sha256 differs, the same
id for the same lock, and marks a lock not compiled yet as pending."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from modload import REPO

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PLAY = """---
- hosts: localhost
  gather_facts: false
  vars:
    sglang_root: /opt/sglang
  tasks:
    - name: Read the role's defaults and the definitions of the release id
      ansible.builtin.include_vars: "{{ item }}"
      loop: ["{{ repo }}/roles/sglang_stack/defaults/main.yml", "{{ repo }}/roles/sglang_stack/vars/main.yml"]
    - name: Record the release each lock digest names
      vars:
        __sglang_stack_id_inputs: {requirements_in: "torch==2.9.1\\n", overrides: [], source: sdist, lock: ""}
        __sglang_stack_lock_file: "{{ lock_file }}"
        __sglang_stack_lock_stat: {stat: {exists: "{{ digest | length > 0 }}", checksum: "{{ digest }}"}}
      ansible.builtin.copy:
        content: "{{ {'id': __sglang_stack_release_id, 'dir': __sglang_stack_release_dir,
                      'pending': __sglang_stack_lock_pending} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def release(
    tmp: Path, digest: str, lock_file: str = "/opt/sglang/locks/x/requirements.lock"
) -> dict[str, Any]:
    out = tmp / f"out-{digest or 'none'}-{len(lock_file)}.json"
    play = tmp / "play.yml"
    play.write_text(PLAY)
    extra = {"digest": digest, "lock_file": lock_file, "out": str(out), "repo": str(REPO)}
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "HOME": str(tmp), "LC_ALL": "C.UTF-8"}  # fmt: skip
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play), "-e", json.dumps(extra)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_the_release_id_changes_with_the_lock_digest(tmp_path: Path) -> None:
    a = release(tmp_path, "a" * 64)
    b = release(tmp_path, "b" * 64)
    again = release(tmp_path, "a" * 64)
    assert a["id"] != b["id"]
    assert a == again
    assert a["dir"] == f"/opt/sglang/releases/{a['id']}"
    assert not a["pending"]
    assert not b["pending"]
    pending = release(tmp_path, "")
    assert pending["pending"]
    assert pending["id"] not in (a["id"], b["id"])
    # a lock given on the controller (no host lock file): its digest is in the inputs already
    given = release(tmp_path, "", lock_file="")
    assert not given["pending"]
