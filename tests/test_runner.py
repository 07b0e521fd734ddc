"""Real ansible-runner runs of tiny playbooks on localhost through sglang_deploy.runner."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sglang_deploy.events import Event, HostResult, TaskStart
from sglang_deploy.redact import MASK
from sglang_deploy.runner import RunRequest, RunResult, run_playbook

PROJECT = Path(__file__).parent / "data" / "runner_project"


def run(
    tmp_path: Path, playbook: str, *extra: str, vault: Path | None = None, check: bool = False
) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    request = RunRequest(
        project_dir=PROJECT,
        playbook=playbook,
        inventory=PROJECT / "inventory.yml",
        artifacts_dir=tmp_path / "artifacts",
        extra_vars=extra,
        vault_password_files=(vault,) if vault else (),
        check=check,
    )
    return run_playbook(request, on_event=events.append), events


def assert_absent(root: Path, *values: str) -> None:
    """No file under root (runner artifacts, summary, junit) contains any of the values."""
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) > 5
    for path in files:
        data = path.read_bytes()
        for value in values:
            assert value.encode() not in data, f"{value!r} leaked into {path}"


def test_passing_playbook(tmp_path: Path) -> None:
    result, events = run(tmp_path, "pass.yml")
    assert (result.rc, result.status) == (0, "successful")
    assert any(isinstance(e, TaskStart) for e in events)
    outcomes = [e.outcome for e in events if isinstance(e, HostResult)]
    assert outcomes == ["ok", "changed", "skipped", "ok", "ok"]
    summary = json.loads(result.summary_path.read_text())
    assert summary == result.summary
    host = summary["hosts"]["localhost"]
    counts = tuple(host[k] for k in ("ok", "changed", "failed", "skipped", "unreachable"))
    assert counts == (4, 1, 0, 1, 0)
    assert summary["status"] == "successful"
    assert summary["rc"] == 0
    assert summary["roles"]["demo"]["tasks"] == 4
    assert summary["failed_tasks"] == []
    # the per-run copy and runner's own artifacts
    assert json.loads((result.run_dir / "summary.json").read_text()) == summary
    assert (result.run_dir / "junit.xml").is_file()
    assert (result.artifact_dir / "job_events").is_dir()
    assert ET.parse(result.junit_path).getroot().get("tests") == "5"


def test_failing_playbook(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "fail.yml", "demo_port=0")
    assert result.rc == 2  # ansible-playbook: a host failed
    assert result.status == "failed"
    summary = json.loads(result.summary_path.read_text())
    assert summary["hosts"]["localhost"]["failed"] == 1
    assert summary["hosts"]["localhost"]["status"] == "failed"
    [failed] = summary["failed_tasks"]
    assert failed["task"] == "Validate the port"
    assert "got 0" in failed["message"]
    junit = ET.parse(result.junit_path).getroot()
    assert junit.get("failures") == "1"
    assert_absent(tmp_path / "artifacts", "tok-abcdef123456")
    for path in (result.artifact_dir / "job_events").glob("*.json"):
        json.loads(path.read_text())  # masking kept runner's event files valid JSON


def test_check_mode(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "pass.yml", check=True)
    assert result.rc == 0
    assert result.summary["check"] is True
    assert "--check" in json.loads((result.artifact_dir / "command").read_text())["command"]


def test_bad_playbook_rc(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "does-not-exist.yml")
    assert result.rc != 0
    assert json.loads(result.summary_path.read_text())["rc"] == result.rc


def test_secret_from_vars_file_inline_and_env_never_lands_in_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file_key = f"sk-file-{secrets.token_hex(8)}"
    inline_key = f"sk-inline-{secrets.token_hex(8)}"
    env_key = f"sk-env-{secrets.token_hex(8)}"
    monkeypatch.setenv("SGLANG_API_KEY", env_key)  # runner copies the environment into artifacts
    vars_file = tmp_path / "secrets.yml"
    vars_file.write_text(f"sglang_api_key: {file_key}\n")
    # the play fails with the key in its message: it must be masked everywhere we write
    result, _ = run(tmp_path, "leak.yml", f"@{vars_file}", "demo_fail_with_key=true")
    assert result.rc == 2
    assert result.summary["failed_tasks"][0]["message"] == f"rejected key {MASK}"
    result2, _ = run(tmp_path, "leak.yml", f"sglang_api_key={inline_key}")
    assert result2.rc == 0, result2.summary
    command = json.loads((result2.artifact_dir / "command").read_text())
    assert command["env"]["SGLANG_API_KEY"] == MASK
    assert_absent(tmp_path / "artifacts", file_key, inline_key, env_key)


def test_vault_secret_never_lands_in_artifacts(tmp_path: Path) -> None:
    key = f"sk-vault-{secrets.token_hex(8)}"
    password = f"vault-pw-{secrets.token_hex(8)}"
    password_file = tmp_path / "vault-pass"
    password_file.write_text(password + "\n")
    vault_file = tmp_path / "vault.yml"
    vault_file.write_text(f"sglang_api_key: {key}\n")
    ansible_vault = Path(sys.executable).parent / "ansible-vault"
    subprocess.run(
        [str(ansible_vault), "encrypt", "--vault-password-file", str(password_file), str(vault_file)],
        check=True,
        capture_output=True,
    )
    assert key not in vault_file.read_text()
    result, _ = run(tmp_path, "leak.yml", f"@{vault_file}", vault=password_file)
    assert result.rc == 0, result.summary
    command = json.loads((result.artifact_dir / "command").read_text())
    assert str(password_file) in command["command"]  # by path, never by value
    assert_absent(tmp_path / "artifacts", key, password)
