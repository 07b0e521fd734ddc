"""Real ansible-runner runs of tiny playbooks on localhost through sglang_deploy.runner."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sglang_deploy import runner as runner_module
from sglang_deploy.events import Event, HostResult, TaskStart
from sglang_deploy.known_secrets import VarsReader
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
    result, _events = run(tmp_path, "fail.yml", "demo_port=0")
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
    result, _events = run(tmp_path, "pass.yml", check=True)
    assert result.rc == 0
    assert result.summary["check"] is True
    assert "--check" in json.loads((result.artifact_dir / "command").read_text())["command"]


def test_bad_playbook_rc(tmp_path: Path) -> None:
    result, _events = run(tmp_path, "does-not-exist.yml")
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
    result, _events = run(tmp_path, "leak.yml", f"@{vars_file}", "demo_fail_with_key=true")
    assert result.rc == 2
    assert result.summary["failed_tasks"][0]["message"] == f"rejected key {MASK}"
    result2, _events = run(tmp_path, "leak.yml", f"sglang_api_key={inline_key}")
    assert result2.rc == 0, result2.summary
    command = json.loads((result2.artifact_dir / "command").read_text())
    assert command["env"]["SGLANG_API_KEY"] == MASK
    assert_absent(tmp_path / "artifacts", file_key, inline_key, env_key)


def test_events_wait_for_secret_learning_that_runs_beside_ansible_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the secrets are learned while ansible-playbook starts (runner_module.learn_secrets in the main
    # thread, runner in its own): even when learning outlasts the whole play, no event reaches the
    # sink (printed, recorded) before the key is known, so the failure message is masked
    key = f"sk-slow-{secrets.token_hex(8)}"
    vars_file = tmp_path / "secrets.yml"
    vars_file.write_text(f"sglang_api_key: {key}\n")
    learn = runner_module.learn_secrets
    order: list[str] = []

    def slow_learn(*args: Any, **kwargs: Any) -> None:
        time.sleep(4)  # longer than the fixture play (about 2 s)
        learn(*args, **kwargs)
        order.append("learned")

    monkeypatch.setattr(runner_module, "learn_secrets", slow_learn)
    events: list[Event] = []
    request = RunRequest(
        project_dir=PROJECT,
        playbook="leak.yml",
        inventory=PROJECT / "inventory.yml",
        artifacts_dir=tmp_path / "artifacts",
        extra_vars=(f"@{vars_file}", "demo_fail_with_key=true"),
    )

    def sink(event: Event) -> None:
        order.append("event")
        events.append(event)

    result = run_playbook(request, on_event=sink)
    assert result.rc == 2
    assert order[0] == "learned"
    assert order.count("event") == len(events) > 3
    assert result.summary["failed_tasks"][0]["message"] == f"rejected key {MASK}"
    assert_absent(tmp_path / "artifacts", key)


def test_a_learning_error_cancels_the_run_and_keeps_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # learning fails after ansible-playbook started: no event reaches the sink, and the run's runner
    # artifacts (stdout that nothing redacted) are removed
    def failing_learn(*args: Any, **kwargs: Any) -> None:
        time.sleep(1)  # ansible-playbook is under way by now
        raise RuntimeError("cannot read the inventory's vault")

    monkeypatch.setattr(runner_module, "learn_secrets", failing_learn)
    events: list[Event] = []
    request = RunRequest(
        project_dir=PROJECT,
        playbook="pass.yml",
        inventory=PROJECT / "inventory.yml",
        artifacts_dir=tmp_path / "artifacts",
        ident="learn-fails",
    )
    with pytest.raises(RuntimeError, match="cannot read the inventory's vault"):
        run_playbook(request, on_event=events.append)
    assert events == []
    assert not (tmp_path / "artifacts" / "runner" / "artifacts" / "learn-fails").exists()


def test_masked_job_events_stay_valid_json(tmp_path: Path) -> None:
    # masked as text, `"secret": false` became `"secret": ********` (invalid JSON, found in a real
    # run's job events); masked as data the field gets the mask as a string and the file still parses
    result, _events = run(tmp_path, "json_fields.yml")
    assert result.rc == 0, result.summary
    files = sorted((result.artifact_dir / "job_events").glob("*.json"))
    assert files
    docs = [json.loads(p.read_text()) for p in files]  # every one parses
    [shown] = [d["event_data"]["res"]["msg"] for d in docs if d["event"] == "runner_on_ok"]
    assert shown == {
        "secret": MASK, "secrets": MASK, "token_budget": MASK, "api_key_required": MASK,
        "password": None, "plain": "kept",
    }  # fmt: skip


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
    result, _events = run(tmp_path, "leak.yml", f"@{vault_file}", vault=password_file)
    assert result.rc == 0, result.summary
    command = json.loads((result.artifact_dir / "command").read_text())
    assert str(password_file) in command["command"]  # by path, never by value
    assert_absent(tmp_path / "artifacts", key, password)


# -- the api key by every route, through the installed CLI ---------------------------------------

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPO = Path(__file__).resolve().parents[1]
ANSIBLE_VAULT = Path(sys.executable).parent / "ansible-vault"


@dataclass
class Route:
    """How the key reaches the play: CLI arguments and environment, built in the test's tmp dir."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    inventory: Path = PROJECT / "inventory.yml"


def _vault(tmp_path: Path, *args: str) -> str:
    password_file = tmp_path / "vault-pass"
    cmd = [str(ANSIBLE_VAULT), *args, "--vault-password-file", str(password_file)]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _vault_group_vars(tmp_path: Path, key: str) -> Route:
    """(a) a vault-encrypted group_vars file of the inventory."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "hosts.yml").write_text((PROJECT / "inventory.yml").read_text())
    vault_file = inventory / "group_vars" / "all" / "vault.yml"
    vault_file.write_text(f"sglang_api_key: {key}\n")
    _vault(tmp_path, "encrypt", str(vault_file))
    return Route(
        args=["--vault-password-file", str(tmp_path / "vault-pass")], inventory=inventory / "hosts.yml"
    )


def _vault_extra_vars_file(tmp_path: Path, key: str) -> Route:
    """(b) a vault-encrypted `-e @file`."""
    vault_file = tmp_path / "vault.yml"
    vault_file.write_text(f"sglang_api_key: {key}\n")
    _vault(tmp_path, "encrypt", str(vault_file))
    return Route(args=["-e", f"@{vault_file}", "--vault-password-file", str(tmp_path / "vault-pass")])


def _inline_vault_in_extra_vars_file(tmp_path: Path, key: str) -> Route:
    """(b') an inline `!vault` value in a plain `-e @file`, under a name that does not say secret."""
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text(
        _vault(tmp_path, "encrypt_string", "--name", "demo_opaque", key)
        + "sglang_api_key: '{{ demo_opaque }}'\n"
    )
    return Route(args=["-e", f"@{vars_file}", "--vault-password-file", str(tmp_path / "vault-pass")])


def _plain_extra_var(tmp_path: Path, key: str) -> Route:
    """(c) plain `-e sglang_api_key=...`."""
    return Route(args=["-e", f"sglang_api_key={key}"])


def _environment(tmp_path: Path, key: str) -> Route:
    """(d) a secret-named environment variable of the CLI process (the play reads it with lookup)."""
    return Route(env={"SGLANG_API_KEY": key})


ROUTES: dict[str, Callable[[Path, str], Route]] = {
    "vault-group-vars": _vault_group_vars,
    "vault-extra-vars-file": _vault_extra_vars_file,
    "inline-vault-in-extra-vars-file": _inline_vault_in_extra_vars_file,
    "plain-extra-var": _plain_extra_var,
    "environment": _environment,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_api_key_by_every_route_is_masked_in_output_and_artifacts(tmp_path: Path, route: str) -> None:
    """The play prints, registers, names a task after and fails with the key (leak_loud.yml): the key
    appears in no artifact file (runner's job events, stdout, command; summary.json, junit.xml) and in
    no line the CLI prints; the vault password neither."""
    key = f"sk-{route}-{secrets.token_hex(12)}"
    password = f"vault-pw-{secrets.token_hex(8)}"
    (tmp_path / "vault-pass").write_text(password + "\n")
    spec = ROUTES[route](tmp_path, key)
    artifacts = tmp_path / "artifacts"
    exe = Path(sys.executable).parent / "sglang-deploy"
    argv = [str(exe), "up", "-v", "-i", str(spec.inventory), "--artifacts", str(artifacts),
            "--playbook", str(PROJECT.relative_to(REPO) / "leak_loud.yml"),
            "-e", f"demo_key_sha256={hashlib.sha256(key.encode()).hexdigest()}", *spec.args]  # fmt: skip
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8",
           "LANG": "C.UTF-8", **spec.env}  # fmt: skip
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)
    output = proc.stdout + proc.stderr
    # the play got the key (its sha256 matched) and failed on the last task, with the key masked
    assert proc.returncode == 2, output
    summary = json.loads((artifacts / "summary.json").read_text())
    [failed] = summary["failed_tasks"]
    assert (failed["task"], failed["message"]) == ("Fail with the key in the message", f"rejected {MASK}")
    assert f"FAILED localhost: Fail with the key in the message: rejected {MASK}" in proc.stdout
    assert f"Task named after {MASK}" in (artifacts / "junit.xml").read_text()
    for line in output.splitlines():
        assert key not in line, line
        assert password not in line, line
    assert_absent(artifacts, key, password)


def test_vars_reader_decrypts_inventory_and_playbook_adjacent_vars(tmp_path: Path) -> None:
    """known_secrets.VarsReader on its own: an inline `!vault` host var of the inventory file (any
    name), a whole-file vault host_vars file, plain secret-named group_vars next to the playbook;
    templates are references, not values; with a wrong password nothing vaulted is learned."""
    password = f"vault-pw-{secrets.token_hex(8)}"
    (tmp_path / "vault-pass").write_text(password + "\n")
    (tmp_path / "wrong-pass").write_text("not-the-password\n")
    inline = f"opaque-{secrets.token_hex(8)}"
    host_file = f"hostpw-{secrets.token_hex(8)}"
    adjacent = f"sk-adjacent-{secrets.token_hex(8)}"
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    encrypted = _vault(tmp_path, "encrypt_string", "--name", "demo_opaque", inline)
    host_block = "\n".join("      " + line for line in encrypted.splitlines())
    (inventory / "hosts.yml").write_text(
        "all:\n  hosts:\n    web1:\n      ansible_connection: local\n" + host_block + "\n"
        "      demo_port: 8080\n      demo_api_token: '{{ demo_opaque }}'\n"
    )
    host_vars = inventory / "host_vars" / "web1.yml"
    host_vars.write_text(f"db_password: {host_file}\nplain_setting: visible-value\n")
    _vault(tmp_path, "encrypt", str(host_vars))
    playbook_dir = tmp_path / "play"
    (playbook_dir / "group_vars").mkdir(parents=True)
    (playbook_dir / "group_vars" / "all.yml").write_text(f"sglang_api_key: {adjacent}\n")

    reader = VarsReader((tmp_path / "vault-pass",))
    assert reader.passwords == [password]
    found = set(reader.from_inventory(inventory / "hosts.yml", playbook_dir))
    assert {inline, host_file, adjacent} <= found
    assert not {"visible-value", "8080", "{{ demo_opaque }}"} & found

    wrong = VarsReader((tmp_path / "wrong-pass",))
    found_wrong = set(wrong.from_inventory(inventory / "hosts.yml", playbook_dir))
    assert adjacent in found_wrong  # the host whose vault file fails is skipped, the rest is learned
    assert not {inline, host_file} & found_wrong
    assert wrong.from_file(host_vars) == []
    assert VarsReader((tmp_path / "vault-pass",)).from_file(host_vars) == [host_file]
