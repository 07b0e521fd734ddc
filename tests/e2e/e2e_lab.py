"""Helpers of the end-to-end tests: the CLI run as `make up` runs it (absolute path, a login shell's
environment without the venv), the lab host's names, ansible-playbook against the lab inventory."""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from sglang_deploy.lab_fleet import docker_host

__all__ = ["docker_host"]

REPO = Path(__file__).resolve().parents[2]
# SGLANG_E2E_LAB=<name>: the tests run against a lab container of that name (a developer's own; made
# and converged by the fixtures through an inventory copy, see lab_inventory()) instead of sglang-lab.
LAB_HOST = os.environ.get("SGLANG_E2E_LAB") or "sglang-lab"
LAB_OVERRIDDEN = LAB_HOST != "sglang-lab"
ARTIFACTS = REPO / "artifacts"


# `make up` from a plain login shell: the CLI by its absolute path, no venv on PATH, no VIRTUAL_ENV
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED_THROUGH = ("DOCKER_", "SGLANG_DEPLOY_")  # what the docker client and the lab's cache dir read


def callbacks_without_prefork() -> str:
    """The checkout's ansible.cfg callbacks without sglang.deploy.prefork: what an installed collection
    runs with by default (the callback is opt-in there). The session's first `up` (conftest's
    converged_lab, a full converge of the fresh lab host) runs with these; test_collection runs with no
    ansible.cfg of the checkout at all. Every other run of the e2e uses the checkout's ansible.cfg, as
    `make up` does: with the callback, a no-op site.yml of the lab host takes 34 instead of 42 CPU
    seconds (bench/results/2026-12-02-task-costs.txt)."""
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    names = [n.strip() for n in config.get("defaults", "callbacks_enabled", fallback="").split(",")]
    return ",".join(n for n in names if n and n != "sglang.deploy.prefork")


INSTALLED_CALLBACKS = callbacks_without_prefork()


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


def record_run(kind: str, args: tuple[str, ...], seconds: float, rc: int | str) -> None:
    """One line per playbook or CLI run in artifacts/e2e-runs.tsv (the test, the command, its seconds
    and exit code, ``timeout`` for one stopped at its guard): where the e2e step's time goes, kept with
    CI's artifacts."""
    ARTIFACTS.mkdir(exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").rsplit(" ", 1)[0]
    with (ARTIFACTS / "e2e-runs.tsv").open("a", encoding="utf-8") as out:
        out.write(f"{test}\t{kind} {' '.join(args)[:200]}\t{seconds:.1f}\t{rc}\n")


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def run_recorded(
    kind: str, exe: Path, args: tuple[str, ...], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``exe args`` in the checkout, its output captured, recorded (record_run) and its tail printed. A
    run past ``timeout`` is recorded as ``timeout``, the end of what it printed (with profile_tasks' time
    stamps: the task it was on, and since when) goes to artifacts/e2e-timeouts.log, which scripts/test
    prints at the end of the e2e step's log, and it fails with that tail: the guard against a hung run
    names where the run was, not only that it ran out of time."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [str(exe), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        record_run(kind, args, time.monotonic() - started, "timeout")
        out, err = _text(exc.stdout), _text(exc.stderr)
        why = f"{kind} {' '.join(args)} ran past its {timeout:.0f} s guard; its last output:\n"
        why += f"{out[-6000:]}\n{err[-2000:]}"
        last = "\n".join(f"{out}\n{err}".strip().splitlines()[-25:])
        with (ARTIFACTS / "e2e-timeouts.log").open("a", encoding="utf-8") as log:
            log.write(f"== {os.environ.get('PYTEST_CURRENT_TEST', '-')}: {kind} {' '.join(args)[:200]}"
                      f" (guard {timeout:.0f} s), its last lines:\n{last}\n")  # fmt: skip
        raise AssertionError(why) from exc
    took = time.monotonic() - started
    record_run(kind, args, took, proc.returncode)
    print(f"$ {kind} {' '.join(args)}  (rc={proc.returncode}, {took:.1f}s)")
    print(proc.stdout[-6000:], proc.stderr[-3000:], sep="\n")
    return proc


def cli(*args: str, timeout: float = 900, callbacks: str | None = None) -> subprocess.CompletedProcess[str]:
    """.venv/bin/sglang-deploy with a login shell's environment; ``callbacks``: ANSIBLE_CALLBACKS_ENABLED
    for the run (default: the checkout's ansible.cfg decides)."""
    exe = cli_executable()
    env = login_shell_env()
    if callbacks is not None:
        env["ANSIBLE_CALLBACKS_ENABLED"] = callbacks
    assert str(exe.parent) not in env["PATH"].split(os.pathsep)
    assert "VIRTUAL_ENV" not in env
    proc = run_recorded("sglang-deploy", exe, args, env, timeout)
    assert "not found or was not executable" not in proc.stdout + proc.stderr
    return proc


def summary() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ARTIFACTS / "summary.json").read_text())
    return data


def venv_bin() -> Path:
    exe = REPO / ".venv" / "bin"
    return exe if exe.exists() else Path(sys.executable).parent


def playbook(
    *args: str, timeout: float = 1800, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook of the checkout (its ansible.cfg) against the lab inventory by default."""
    full_env = login_shell_env()
    full_env.update({"ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_NOCOLOR": "1", **(env or {})})
    proc = run_recorded("ansible-playbook", venv_bin() / "ansible-playbook", args, full_env, timeout)
    if keep := os.environ.get("SGLANG_E2E_KEEP_OUTPUT"):  # a folder: each run's whole output
        folder = Path(keep)
        folder.mkdir(parents=True, exist_ok=True)
        # named by its start (ns): the tag runs of test_lab_spec run three at a time, a count could collide
        (folder / f"{time.time_ns()}.log").write_text(f"{args}\n{proc.stdout}\n{proc.stderr}")
    return proc


def lab_exec(*cmd: str, name: str = LAB_HOST, check: bool = True) -> str:
    """A command inside the lab container (docker exec); its stdout."""
    proc = subprocess.run(
        ["docker", "exec", name, *cmd], capture_output=True, text=True, check=False, timeout=300
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def dump(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def lab_group_vars(**extra: Any) -> dict[str, Any]:
    """inventory/group_vars/lab.yml's settings, ``extra`` on top."""
    settings: dict[str, Any] = yaml.safe_load((REPO / "inventory" / "group_vars" / "lab.yml").read_text())
    return {**settings, **extra}


def write_yaml(path: Path, data: Any) -> Path:
    """``data`` as a YAML document at ``path`` (an inventory or its group_vars: written by the YAML
    library, never assembled from strings); the path."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# What the roles write (the shared download cache mount /var/cache/sglang-deploy is not the host's).
TOUCHED = [
    "/etc/sglang", "/etc/systemd/system", "/etc/profile.d", "/etc/apt", "/var/lib/apt/lists",
    "/opt/sglang", "/opt/cuda", "/var/lib/sglang", "/var/cache/sglang", "/etc/passwd", "/etc/group",
]  # fmt: skip
# Metadata of everything (venvs included); content checksums of everything outside the venvs'
# site-packages (11 GB of wheels: their RECORD files are checksummed instead).
SNAPSHOT = (
    "find {paths} -xdev \\( -path '*/site-packages/*' -prune -o -true \\) "
    "-printf '%p %y %s %m %u %g %T@\\n' 2>/dev/null | sort; "
    "find {paths} -xdev -type f \\( -path '*/site-packages/*' -a ! -name RECORD -prune -o -print0 \\) "
    "2>/dev/null | sort -z | xargs -0 -r sha256sum"
)


def snapshot(name: str = LAB_HOST) -> str:
    """Metadata and checksums of every path the roles touch on a lab host (see TOUCHED)."""
    return lab_exec("sh", "-c", SNAPSHOT.format(paths=" ".join(TOUCHED)), name=name)


def lab_inventory(dest: Path) -> Path:
    """A copy of the lab inventory in ``dest`` for LAB_HOST (inventory/lab.yml with the host renamed,
    group_vars/lab.yml copied, group_vars/all linked to the repository's, so every playbook of the
    checkout, not only site.yml, gets the shipped defaults); its lab.yml. Writes done through it
    (host_vars/<host>/...) stay out of the checkout."""
    (dest / "group_vars").mkdir(parents=True, exist_ok=True)
    text = (REPO / "inventory" / "lab.yml").read_text()
    (dest / "lab.yml").write_text(text.replace("sglang-lab:", f"{LAB_HOST}:").replace(
        "ansible_host: sglang-lab", f"ansible_host: {LAB_HOST}"))  # fmt: skip
    (dest / "group_vars" / "lab.yml").write_text((REPO / "inventory" / "group_vars" / "lab.yml").read_text())
    link = dest / "group_vars" / "all"
    if not link.exists():
        link.symlink_to(REPO / "group_vars" / "all")
    return dest / "lab.yml"
