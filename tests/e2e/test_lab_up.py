"""The README's flow, through the installed CLI: `sglang-deploy lab create`, `sglang-deploy up` (twice:
the second run changes nothing), a bad input that preflight rejects, then `sglang-deploy lab destroy`.

It uses the real lab container name (sglang-lab, as in inventory/lab.yml) and the default artifacts
dir (<repo>/artifacts), exactly as the README does; the lab is destroyed at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LAB_HOST = "sglang-lab"
ARTIFACTS = REPO / "artifacts"


# `make up` from a plain login shell: the CLI by its absolute path, no venv on PATH, no VIRTUAL_ENV
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED_THROUGH = ("DOCKER_", "SGLANG_DEPLOY_")  # what the docker client and the lab's cache dir read


def cli_executable() -> Path:
    """.venv/bin/sglang-deploy of the checkout, as the Makefile runs it (else the venv running pytest)."""
    exe = REPO / ".venv" / "bin" / "sglang-deploy"
    return exe if exe.exists() else Path(sys.executable).parent / "sglang-deploy"


def login_shell_env() -> dict[str, str]:
    env = {
        "HOME": os.environ.get("HOME", "/root"),
        "PATH": SYSTEM_PATH,
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }
    env.update({k: v for k, v in os.environ.items() if k.startswith(PASSED_THROUGH)})
    return env


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    exe = cli_executable()
    env = login_shell_env()
    assert str(exe.parent) not in env["PATH"].split(os.pathsep)
    assert "VIRTUAL_ENV" not in env
    started = time.monotonic()
    proc = subprocess.run(
        [str(exe), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    print(f"$ {exe} {' '.join(args)}  (rc={proc.returncode}, {time.monotonic() - started:.1f}s)")
    print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n")
    assert "not found or was not executable" not in proc.stdout + proc.stderr
    return proc


def summary() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ARTIFACTS / "summary.json").read_text())
    return data


@pytest.fixture(scope="module")
def lab() -> Iterator[None]:
    created = cli("lab", "create")
    assert created.returncode == 0, created.stderr
    assert "systemd running" in created.stdout or "systemd degraded" in created.stdout
    again = cli("lab", "create")
    assert again.returncode == 0
    assert "nothing to do" in again.stdout
    yield
    destroyed = cli("lab", "destroy")
    assert destroyed.returncode == 0, destroyed.stderr
    assert cli("lab", "status").returncode == 1


def test_up_converges_then_changes_nothing(lab: None) -> None:
    first = cli("up")
    assert first.returncode == 0, first.stdout + first.stderr
    assert " TASK " in first.stdout  # live progress, plain lines (stdout is not a TTY here)
    assert f" {LAB_HOST}  " in first.stdout
    assert "status=successful rc=0" in first.stdout
    result = summary()
    assert result["playbook"] == "site.yml"
    assert result["status"] == "successful"
    assert result["rc"] == 0
    host = result["hosts"][LAB_HOST]
    assert host["failed"] == 0
    assert host["unreachable"] == 0
    assert host["ok"] > 0
    assert host["status"] == "ok"
    assert "preflight" in result["roles"]
    assert (ARTIFACTS / "junit.xml").is_file()
    assert (ARTIFACTS / "runs" / result["run_id"] / "summary.json").is_file()

    second = cli("up")
    assert second.returncode == 0, second.stdout + second.stderr
    assert summary()["hosts"][LAB_HOST]["changed"] == 0
    assert summary()["hosts"][LAB_HOST]["failed"] == 0


def test_bad_input_fails_and_names_the_task(lab: None) -> None:
    bad = cli("up", "-e", "sglang_service_port=0")
    assert bad.returncode != 0
    result = summary()
    assert result["rc"] == bad.returncode
    assert result["status"] == "failed"
    assert result["hosts"][LAB_HOST]["failed"] >= 1
    assert result["hosts"][LAB_HOST]["changed"] == 0  # bad input fails before any host change
    [failed] = [t for t in result["failed_tasks"] if t["host"] == LAB_HOST]
    assert failed["task"]
    assert "sglang_service_port" in failed["message"]
    assert f"FAILED {LAB_HOST}:" in bad.stdout
