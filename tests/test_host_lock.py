"""The host lock (plugins/module_utils/host_lock.py, module + action plugin sglang.deploy.host_lock,
playbooks/lock_take.yml and lock_release.yml): real files, real processes, real ansible-playbook runs.

Issue 21 item 8: a second run fails at once naming the holder (pid, start time, command); a lock
whose run was killed is taken over with a warning; check mode reads only; racing takers get one
winner; secrets never reach the lock file.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module

lock = load_module("host_lock", REPO / "plugins/module_utils/host_lock.py")
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def holder(run_id: str, pid: int = 1, start: float = 0.0) -> dict[str, Any]:
    return {"run_id": run_id, "controller": "c1", "pid": pid, "pid_start": start,
            "command": ["ansible-playbook", "site.yml"], "started_at": "2026-12-01T00:00:00Z"}  # fmt: skip


def test_free_held_reentrant_released(tmp_path: Path) -> None:
    path = str(tmp_path / "d" / "lock")
    first = lock.acquire(path, holder("a"), now=100.0)
    assert first["status"] == "acquired"
    assert json.loads(Path(path).read_text()) == {"holder": holder("a"), "taken_epoch": 100.0}
    # issue 32 item 5: the record (a command line) is root's alone, whatever the umask
    assert oct(Path(path).stat().st_mode & 0o777) == "0o600"
    assert oct(Path(path + ".guard").stat().st_mode & 0o777) == "0o600"
    assert lock.acquire(path, holder("a"), now=101.0)["status"] == "held_by_us"
    other = lock.acquire(path, holder("b"), now=102.0, stale_after_s=3600)
    assert other["status"] == "held"
    assert other["holder"]["holder"]["run_id"] == "a"
    assert lock.release(path, "b")["status"] == "held_by_other"
    assert Path(path).exists()
    assert lock.release(path, "a")["status"] == "released"
    assert not Path(path).exists()
    assert lock.release(path, "a")["status"] == "free"


def test_takeover_of_a_dead_run_and_by_age(tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    lock.acquire(path, holder("a"), now=100.0)
    assert lock.acquire(path, holder("b"), takeover="someone-else", now=101.0)["status"] == "held"
    took = lock.acquire(path, holder("b"), takeover="a", now=102.0)
    assert took["status"] == "taken_over"
    assert took["previous"]["holder"]["run_id"] == "a"
    assert "process is gone" in took["why"]
    assert json.loads(Path(path).read_text())["holder"]["run_id"] == "b"
    # by age: taken at 102, stale after 60 s
    assert lock.acquire(path, holder("c"), stale_after_s=60, now=150.0)["status"] == "held"
    aged = lock.acquire(path, holder("c"), stale_after_s=60, now=200.0)
    assert aged["status"] == "taken_over"
    assert "more than sglang_lock_stale_after_s=60" in aged["why"]
    assert lock.acquire(path, holder("d"), stale_after_s=0, now=1e9)["status"] == "held"  # 0: never by age


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    assert lock.acquire(path, holder("a"), check=True)["status"] == "would_acquire"
    assert not Path(path).exists()
    lock.acquire(path, holder("a"), now=1.0)
    before = Path(path).read_text()
    assert lock.acquire(path, holder("b"), check=True, now=2.0)["status"] == "held"
    assert lock.acquire(path, holder("b"), check=True, takeover="a")["status"] == "would_take_over"
    assert lock.release(path, "a", check=True)["status"] == "would_release"
    assert Path(path).read_text() == before


def test_an_unreadable_record_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    path.write_text("{not json\x1b")
    res = lock.acquire(str(path), holder("a"))
    assert res["status"] == "taken_over"
    assert res["previous"] == {"invalid": "{not json?"}
    assert "unreadable" in lock.describe(res["previous"])


def _race(path: str, run_id: str, queue: Any) -> None:
    queue.put(lock.acquire(path, holder(run_id))["status"])


def test_racing_takers_get_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, f"r{i}", queue)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    statuses = sorted(queue.get(timeout=5) for _proc in procs)
    assert statuses == ["acquired"] + ["held"] * 7


def test_process_start_tells_a_live_pid_from_a_dead_or_reused_one() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        start = lock.process_start(proc.pid)
        assert start is not None
        assert abs(start - time.time()) < 10
        assert lock.alive(proc.pid, start)
        assert not lock.alive(proc.pid, start - 50)  # same pid, another start time: a reused pid
    finally:
        proc.kill()
        proc.wait()
    assert lock.process_start(proc.pid) is None
    assert not lock.alive(proc.pid, start)
    assert not lock.alive("x", None)


def test_the_command_line_is_kept_without_secrets() -> None:
    argv = ["ansible-playbook", "-i", "inv.yml", "-e", '{"sglang_api_key": "sk-1"}', "-e@vault.yml",
            "--extra-vars=token=t0", "--vault-password-file", "/p", "sglang_api_key=sk-2",
            "site.yml\x1b"]  # fmt: skip
    out = lock.scrub_command(argv)
    m = lock.MASK
    assert out == ["ansible-playbook", "-i", "inv.yml", "-e", m, f"-e{m}",
                   f"--extra-vars={m}", "--vault-password-file", "/p", f"sglang_api_key={m}",
                   "site.yml"]  # fmt: skip
    assert "sk-" not in json.dumps(out)
    assert lock.scrub_command(["x" * 600, "y" * 600]) == ["x" * 600, "..."]


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        # the abbreviations ansible-playbook's parser accepts for --extra-vars
        (["--extra", '{"sglang_api_key": "sk-1"}'], ["--extra", "M"]),
        (["--extra-var", "sglang_api_key=sk-1"], ["--extra-var", "M"]),
        (["--extra-va=@vault.yml"], ["--extra-va=M"]),
        # clusters of short options ending in -e: the value is the next word, or the rest of the word
        (["-ve", '{"sglang_api_key": "sk-1"}'], ["-ve", "M"]),
        (["-vvve@secrets.yml"], ["-vvveM"]),
        (["-vKe", "token=sk-1"], ["-vKe", "M"]),
        # another short option's value is not masked; a cluster without e is left alone
        (["-i", "inv-sk-0.yml", "-vv"], ["-i", "inv-sk-0.yml", "-vv"]),
        # Ansible's connection and become passwords (the one secret-name rule, shared with the CLI)
        (
            ["ansible_become_pass=sk-1", "ansible_ssh_pass=sk-2"],
            ["ansible_become_pass=M", "ansible_ssh_pass=M"],
        ),
        (
            ["ansible_password=sk-1", "ansible_become_password=sk-2"],
            ["ansible_password=M", "ansible_become_password=M"],
        ),
        (["--limit", "bypass=ok"], ["--limit", "bypass=ok"]),
    ],
)  # fmt: skip
def test_every_extra_vars_spelling_and_secret_name_is_masked(argv: list[str], want: list[str]) -> None:
    """Issue 32 item 5: the values `--extra`, `-ve`, `--extra-var`, `-e@file` carry are masked."""
    out = lock.scrub_command(["ansible-playbook", *argv, "site.yml"])
    assert out == [
        "ansible-playbook",
        *(w.replace("M", lock.MASK) if "M" in w else w for w in want),
        "site.yml",
    ]
    assert "sk-1" not in json.dumps(out)
    assert "sk-2" not in json.dumps(out)


@pytest.mark.parametrize("planted", ["lock.guard", "lock.tmp.PID", "lock"])
@pytest.mark.parametrize("target_exists", [True, False])
def test_a_planted_symlink_is_never_written_through(
    tmp_path: Path, planted: str, target_exists: bool
) -> None:
    """Issue 32 item 5: a link planted in a writable lock directory (to a file root owns, or to a path
    where root would create one) is refused or replaced, never followed: the target keeps its content,
    or is not created."""
    target = tmp_path / "victim"
    if target_exists:
        target.write_text("precious\n")
    directory = tmp_path / "d"
    directory.mkdir()
    path = directory / "lock"
    (directory / planted.replace("PID", str(os.getpid()))).symlink_to(target)
    with contextlib.suppress(OSError):  # refused (O_NOFOLLOW): what matters is the target below
        lock.acquire(str(path), holder("a"), now=1.0)
    if target_exists:
        assert target.read_text() == "precious\n"
    else:
        assert not target.exists()


# --- real ansible-playbook runs (local connection), the playbooks of the repository ---------------

PLAY = """---
- name: Take
  ansible.builtin.import_playbook: {repo}/playbooks/lock_take.yml

- name: The run's work
  hosts: sglang_servers
  gather_facts: false
  tasks:
    - name: Say the lock is held
      ansible.builtin.copy:
        content: "{{{{ lookup('ansible.builtin.file', sglang_lock_path) }}}}"
        dest: "{{{{ playbook_dir }}}}/held-{{{{ run_name }}}}.json"
        mode: "0644"
      when: not ansible_check_mode
    - name: Wait for the go file
      ansible.builtin.wait_for:
        path: "{{{{ playbook_dir }}}}/go"
        timeout: 120
      when: wait | default(false) | bool

- name: Release
  ansible.builtin.import_playbook: {repo}/playbooks/lock_release.yml
"""


@pytest.fixture
def lab(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_become: false\n"
        f"          ansible_python_interpreter: {sys.executable}\n"
        f"          sglang_lock_path: {tmp_path}/run/lock\n"
    )
    (tmp_path / "play.yml").write_text(PLAY.format(repo=REPO))
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "HOME": str(tmp_path), "LC_ALL": "C.UTF-8", "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    return {"tmp": tmp_path, "env": env, "lock": tmp_path / "run" / "lock"}


def cmd(lab: dict[str, Any], *extra: str) -> list[str]:
    return [str(ANSIBLE_PLAYBOOK), "-i", str(lab["tmp"] / "hosts.yml"), str(lab["tmp"] / "play.yml"), *extra]


def run(lab: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd(lab, *extra), cwd=REPO, env=lab["env"], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def wait_for(path: Path, timeout: float = 120) -> None:
    end = time.time() + timeout
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.2)


def test_two_concurrent_runs_the_second_fails_naming_the_holder(lab: dict[str, Any]) -> None:
    first = subprocess.Popen(
        cmd(lab, "-e", "run_name=a wait=true", "-e", '{"sglang_api_key": "sk-secret-1"}'),
        cwd=REPO, env=lab["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(lab["tmp"] / "held-a.json")
        record = json.loads(lab["lock"].read_text())
        h = record["holder"]
        assert h["pid"] == first.pid  # the ansible-playbook process itself
        assert abs(h["pid_start"] - (lock.process_start(first.pid) or 0)) < 1
        assert h["command"][-4:] == ["-e", lock.MASK, "-e", lock.MASK]
        assert "sk-secret" not in lab["lock"].read_text()
        t0 = time.time()
        second = run(lab, "-e", "run_name=b")
        took = time.time() - t0
        out = second.stdout + second.stderr
        assert second.returncode == 2, out[-3000:]
        assert f"is held by run {h['run_id']}: pid {first.pid} on controller {h['controller']}" in out, out[
            -3000:
        ]
        assert f"process started {lock.describe(record).split('process started ')[1].split(',')[0]}" in out
        assert "command: " + " ".join(h["command"][:3]) in out
        assert not (lab["tmp"] / "held-b.json").exists()  # failed before its work
        assert took < 60
        check = run(lab, "--check", "-e", "run_name=c")
        assert check.returncode == 0, (check.stdout + check.stderr)[-3000:]
        assert "(check mode reads only: going on)" in check.stdout + check.stderr
        assert json.loads(lab["lock"].read_text()) == record  # check mode wrote nothing
        (lab["tmp"] / "go").write_text("")
        out_a, _err_a = first.communicate(timeout=120)
        assert first.returncode == 0, out_a[-3000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not lab["lock"].exists()  # released at the end


def test_a_killed_run_is_taken_over_with_a_warning(lab: dict[str, Any]) -> None:
    first = subprocess.Popen(
        cmd(lab, "-e", "run_name=a wait=true"), cwd=REPO, env=lab["env"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    wait_for(lab["tmp"] / "held-a.json")
    old = json.loads(lab["lock"].read_text())["holder"]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    second = run(lab, "-e", "run_name=b")
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-3000:]
    assert "took over a stale lock (its process is gone" in out, out[-3000:]
    assert f"from run {old['run_id']}: pid {old['pid']}" in out
    held_by_b = json.loads((lab["tmp"] / "held-b.json").read_text())
    assert held_by_b["holder"]["run_id"] != old["run_id"]
    assert not lab["lock"].exists()


def test_bad_lock_input_is_named(lab: dict[str, Any]) -> None:
    proc = run(lab, "-e", "sglang_lock_stale_after_s=-5")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert 'bad lock input: sglang_lock_stale_after_s="-5": allowed an integer >= 0' in out, out[-3000:]
    assert not lab["lock"].exists()


# Issue 32 item 2: router hosts take the same lock (site.yml and router.yml import lock_take.yml and
# lock_release.yml with __sglang_lock_hosts naming sglang_routers); a router-only host records no
# server state (the deploy_state snapshot is for sglang_servers only).
ROUTER_PLAY = """---
- name: Take
  ansible.builtin.import_playbook: {repo}/playbooks/lock_take.yml
  vars:
    __sglang_lock_hosts: sglang_servers:sglang_routers

- name: The run's work on the router host
  hosts: sglang_routers
  gather_facts: false
  tasks:
    - name: Say the lock is held
      ansible.builtin.copy:
        content: "{{{{ lookup('ansible.builtin.file', sglang_lock_path) }}}}"
        dest: "{{{{ playbook_dir }}}}/held-{{{{ run_name }}}}.json"
        mode: "0644"
    - name: Wait for the go file
      ansible.builtin.wait_for:
        path: "{{{{ playbook_dir }}}}/go"
        timeout: 120
      when: wait | default(false) | bool

- name: Release
  ansible.builtin.import_playbook: {repo}/playbooks/lock_release.yml
  vars:
    __sglang_lock_hosts: sglang_servers:sglang_routers
"""


def test_a_router_host_takes_the_same_lock(lab: dict[str, Any]) -> None:
    tmp = lab["tmp"]
    (tmp / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_routers:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_become: false\n"
        f"          ansible_python_interpreter: {sys.executable}\n"
        f"          sglang_lock_path: {tmp}/run/lock\n"
    )
    (tmp / "play.yml").write_text(ROUTER_PLAY.format(repo=REPO))
    first = subprocess.Popen(
        cmd(lab, "-e", "run_name=a wait=true"), cwd=REPO, env=lab["env"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(tmp / "held-a.json")
        holder = json.loads(lab["lock"].read_text())["holder"]
        assert holder["pid"] == first.pid
        second = run(lab, "-e", "run_name=b")
        out = second.stdout + second.stderr
        assert second.returncode == 2, out[-3000:]
        assert f"is held by run {holder['run_id']}: pid {first.pid}" in out, out[-3000:]
        assert not (tmp / "held-b.json").exists()  # failed before its work
        (tmp / "go").write_text("")
        out_a, _err_a = first.communicate(timeout=120)
        assert first.returncode == 0, out_a[-3000:]
        assert "TASK [Record the state in force" in out_a, out_a[-3000:]
        assert "TASK [deploy_state" not in out_a, out_a[-3000:]  # no server state on a router-only host
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not lab["lock"].exists()  # released at the end


def test_lock_inputs_one_rule_naming_the_variable() -> None:
    assert lock.input_errors({"path": "/run/sglang-deploy/lock", "stale_after_s": 43200}) == []
    assert lock.input_errors({"path": "/run/sglang-deploy/lock", "stale_after_s": "0"}) == []
    assert lock.input_errors({"stale_after_s": "-5"}) == [
        'bad lock input: sglang_lock_stale_after_s="-5": allowed an integer >= 0 (seconds; 0 = a lock never'
        " goes stale by age)"
    ]
    for path in ("run/lock", "/run/../etc/lock", "/run/lock\n", "/run/my lock"):
        (error,) = lock.input_errors({"path": path})
        assert error.startswith(
            f"bad lock input: sglang_lock_path={json.dumps(path)}: allowed an absolute path"
        )
