"""Issue 21 item 8 on the lab host: the host lock of a deployment run.

Two concurrent runs against sglang-lab: while `sglang-deploy up` holds the host (the lock is taken
right after preflight), a second site.yml fails at once naming the holder (its ansible-playbook pid,
process start time and command) and changes nothing; a run killed while holding the lock leaves it
behind, and the next run from this controller takes it over with a warning naming the old holder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import LAB_HOST, REPO, cli_executable, lab_exec, login_shell_env, playbook

pytestmark = pytest.mark.e2e
LOCK = "/run/sglang-deploy/lock"


def start_up(artifacts: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(cli_executable()), "up", "--artifacts", str(artifacts), "--progress", "plain"],
        cwd=REPO, env=login_shell_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def wait_for_lock(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, "the first run ended before it took the lock"
        text = lab_exec("cat", LOCK, check=False)
        if text.strip():
            record: dict[str, Any] = json.loads(text)
            return record
        time.sleep(0.5)
    raise AssertionError(f"{LOCK} never appeared on {LAB_HOST}")


def test_a_second_run_fails_at_once_naming_the_holder(
    converged_lab: dict[str, object], tmp_path: Path
) -> None:
    first = start_up(tmp_path / "first")
    try:
        holder = wait_for_lock(first)["holder"]
        started = time.monotonic()
        second = playbook("-i", "inventory/lab.yml", "site.yml")
        took = time.monotonic() - started
        out = second.stdout + second.stderr
        assert second.returncode == 2, out[-4000:]
        assert (
            f"is held by run {holder['run_id']}: pid {holder['pid']} on controller {holder['controller']}"
            in out
        )
        assert "process started " in out
        assert "command: " in out
        assert "Transaction - take the host lock" in out
        # failed right after preflight (which only reads): no stage play ran, nothing changed
        assert "PLAY [CUDA toolkit" not in out, out[-4000:]
        assert "changed=0" in out
        assert took < 300, took
        rest, _stderr = first.communicate(timeout=1800)
        assert first.returncode == 0, rest[-4000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert lab_exec("cat", LOCK, check=False) == ""  # released at the end of the run


def test_a_killed_run_is_taken_over_with_a_warning(converged_lab: dict[str, object], tmp_path: Path) -> None:
    first = start_up(tmp_path / "killed")
    holder = wait_for_lock(first)["holder"]
    os.kill(int(holder["pid"]), signal.SIGKILL)  # ansible-playbook itself (ansible-runner's child)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert json.loads(lab_exec("cat", LOCK))["holder"]["run_id"] == holder["run_id"]  # left behind
    again = playbook("-i", "inventory/lab.yml", "site.yml")
    out = " ".join((again.stdout + again.stderr).split())
    assert again.returncode == 0, out[-4000:]
    assert "took over a stale lock (its process is gone (pid not running on this controller))" in out, out[
        -4000:
    ]
    assert f"from run {holder['run_id']}: pid {holder['pid']}" in out
    assert lab_exec("cat", LOCK, check=False) == ""
