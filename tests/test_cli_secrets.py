"""The CLI never writes a secret in clear, and stops cleanly on SIGTERM/SIGHUP (issue 21 item 4).

Each leak of the issue, through the installed `sglang-deploy` console script and real
ansible-runner/ansible-playbook runs on localhost: a vault encrypted with a vault id (`--vault-id`,
a password file and a password script), a key starting with `/`, a key reaching `sglang_api_key`
through a template over a name that does not look secret, the key in JSON-escaped (`\\/` too),
URL-encoded, shell-quoted and `Authorization: Bearer` forms; and SIGTERM/SIGHUP/SIGINT in the middle
of a play. "Leaked" is checked strictly: no 8-character fragment of the key in any file under the
artifacts dir (runner's job_events, stdout, command; summary.json, junit.xml) or in what the CLI
printed."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from modload import load_module

from sglang_deploy import cli
from sglang_deploy.known_secrets import VarsReader
from sglang_deploy.redact import MASK, SECRET_NAME, Redactor, looks_like_secret, secret_env_values

REPO = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "data" / "runner_project"
EXE = Path(sys.executable).parent / "sglang-deploy"
ANSIBLE_VAULT = Path(sys.executable).parent / "ansible-vault"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FRAGMENT = 8


def make_key(prefix: str = "") -> str:
    """A key of the whole allowed character set (A-Z a-z 0-9 . _ ~ + / = : @ -), random parts."""
    hexes = [secrets.token_hex(n) for n in (4, 2, 4, 3)]
    return f"{prefix}sk:{hexes[0]}@{hexes[1]}/x+y={hexes[2]}~z-{hexes[3]}"


def fragments(value: str) -> set[str]:
    return {value[i : i + FRAGMENT] for i in range(len(value) - FRAGMENT + 1)}


def assert_no_fragment(root: Path, output: str, *values: str) -> None:
    """No file under root and no line of output holds any 8-character piece of any value."""
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) > 5
    pieces = {piece for value in values for piece in fragments(value)}
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        for piece in pieces:
            assert piece not in text, (
                f"{piece!r} of a secret in {path}: {text[text.index(piece) - 80 :][:200]!r}"
            )
    for line in output.splitlines():
        for piece in pieces:
            assert piece not in line, line


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": os.environ.get("HOME", "/root"), "PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8",
            "LANG": "C.UTF-8", "TMPDIR": str(tmp_path / "tmp"), **extra}  # fmt: skip


# -- the leak routes ----------------------------------------------------------------------------


@dataclass
class Route:
    """How the key reaches the play: CLI arguments, the inventory, the key itself."""

    key: str
    args: list[str] = field(default_factory=list)
    inventory: Path = PROJECT / "inventory.yml"


def _vault_id_file(tmp_path: Path) -> Path:
    return tmp_path / "prod-pass"


def _encrypt(tmp_path: Path, path: Path) -> None:
    """ansible-vault encrypt with the vault id `prod` (the file's header names it)."""
    cmd = [str(ANSIBLE_VAULT), "encrypt", "--vault-id", f"prod@{_vault_id_file(tmp_path)}", str(path)]
    subprocess.run(cmd, check=True, capture_output=True)
    assert path.read_text().startswith("$ANSIBLE_VAULT;1.2;AES256;prod")


def _inventory(tmp_path: Path, files: dict[str, str]) -> Path:
    """A copy of the fixture inventory with group_vars/all/<name> files; `vault*` ones encrypted."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "hosts.yml").write_text((PROJECT / "inventory.yml").read_text())
    for name, text in files.items():
        path = inventory / "group_vars" / "all" / name
        path.write_text(text)
        if name.startswith("vault"):
            _encrypt(tmp_path, path)
    return inventory / "hosts.yml"


def _vault_id_args(tmp_path: Path) -> list[str]:
    return ["--vault-id", f"prod@{_vault_id_file(tmp_path)}"]


def _vault_id_group_vars(tmp_path: Path) -> Route:
    """A group_vars vault encrypted with --vault-id prod@FILE (the CLI learned nothing of it)."""
    key = make_key()
    inventory = _inventory(tmp_path, {"vault.yml": f"sglang_api_key: '{key}'\n"})
    return Route(key, _vault_id_args(tmp_path), inventory)


def _vault_id_script(tmp_path: Path) -> Route:
    """The same vault, its password from a password script (--vault-id prod@SCRIPT)."""
    key = make_key()
    inventory = _inventory(tmp_path, {"vault.yml": f"sglang_api_key: '{key}'\n"})
    script = tmp_path / "prod-pass.sh"
    script.write_text(f"#!/bin/sh\ncat {_vault_id_file(tmp_path)}\n")
    script.chmod(0o700)
    return Route(key, ["--vault-id", f"prod@{script}"], inventory)


def _vault_id_extra_vars_file(tmp_path: Path) -> Route:
    """A vault-id encrypted `-e @file`."""
    key = make_key()
    vault_file = tmp_path / "vault.yml"
    vault_file.write_text(f"sglang_api_key: '{key}'\n")
    _encrypt(tmp_path, vault_file)
    return Route(key, ["-e", f"@{vault_file}", *_vault_id_args(tmp_path)])


def _slash_key_extra_var(tmp_path: Path) -> Route:
    """A key starting with `/` (in the key's character set), `-e sglang_api_key=/...`."""
    key = make_key("/")
    return Route(key, ["-e", f"sglang_api_key={key}"])


def _slash_key_group_vars(tmp_path: Path) -> Route:
    """A key starting with `/` in plain group_vars (the old "path" skip dropped it)."""
    key = make_key("/")
    return Route(key, [], _inventory(tmp_path, {"main.yml": f"sglang_api_key: '{key}'\n"}))


def _indirection_plain_file(tmp_path: Path) -> Route:
    """sglang_api_key: "{{ demo_holder }}" in group_vars, demo_holder (no secret-like name) in a
    plain `-e @file`."""
    key = make_key()
    holder = tmp_path / "holder.yml"
    holder.write_text(f"demo_holder: '{key}'\n")
    inventory = _inventory(tmp_path, {"main.yml": "sglang_api_key: '{{ demo_holder }}'\n"})
    return Route(key, ["-e", f"@{holder}"], inventory)


def _indirection_vault_id(tmp_path: Path) -> Route:
    """demo_holder in a vault-id vault (whole file: no `!vault` value), referenced by
    sglang_api_key in plain group_vars, over two hops with a filter."""
    key = make_key()
    files = {
        "vault.yml": f"demo_holder: '  {key}  '\n",
        "main.yml": "demo_hop: '{{ demo_holder | trim }}'\nsglang_api_key: '{{ demo_hop }}'\n",
    }
    return Route(key, _vault_id_args(tmp_path), _inventory(tmp_path, files))


def _indirection_inline_extra_var(tmp_path: Path) -> Route:
    """`-e 'sglang_api_key={{ demo_holder }}'`, demo_holder in the inventory's vault-id vault."""
    key = make_key()
    inventory = _inventory(tmp_path, {"vault.yml": f"demo_holder: '{key}'\n"})
    return Route(key, ["-e", "sglang_api_key={{ demo_holder }}", *_vault_id_args(tmp_path)], inventory)


ROUTES: dict[str, Callable[[Path], Route]] = {
    "vault-id-group-vars": _vault_id_group_vars,
    "vault-id-script": _vault_id_script,
    "vault-id-extra-vars-file": _vault_id_extra_vars_file,
    "slash-key-extra-var": _slash_key_extra_var,
    "slash-key-group-vars": _slash_key_group_vars,
    "indirection-plain-file": _indirection_plain_file,
    "indirection-vault-id": _indirection_vault_id,
    "indirection-inline-extra-var": _indirection_inline_extra_var,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_key_by_every_leak_route_is_masked_in_every_form(tmp_path: Path, route: str) -> None:
    """leak_forms.yml prints the key as a Bearer header, JSON in JSON, through a slash-escaping
    encoder, URL-encoded and shell-quoted, registers and echoes it and fails with it: no piece of
    the key and none of the vault password in any artifact or printed line; the reports 0644, runner's
    dir 0700."""
    password = f"vault-pw-{secrets.token_hex(8)}"
    _vault_id_file(tmp_path).write_text(password + "\n")
    (tmp_path / "tmp").mkdir()
    spec = ROUTES[route](tmp_path)
    artifacts = tmp_path / "artifacts"
    argv = [str(EXE), "up", "-v", "-i", str(spec.inventory), "--artifacts", str(artifacts),
            "--playbook", str(PROJECT.relative_to(REPO) / "leak_forms.yml"),
            "-e", f"demo_key_sha256={hashlib.sha256(spec.key.encode()).hexdigest()}", *spec.args]  # fmt: skip
    proc = subprocess.run(
        argv, cwd=REPO, env=cli_env(tmp_path), capture_output=True, text=True, check=False, timeout=300
    )
    output = proc.stdout + proc.stderr
    # the play got the key (its sha256 matched) and failed on the last task, with the key masked
    assert proc.returncode == 2, output
    summary = json.loads((artifacts / "summary.json").read_text())
    [failed] = summary["failed_tasks"]
    assert (failed["task"], failed["message"]) == (
        "Fail with the key in the message",
        f"rejected Bearer {MASK}",
    )
    events = "".join(p.read_text() for p in (artifacts / "runner").rglob("job_events/*.json"))
    assert events.count(MASK) >= 8  # the forms were written, and masked
    assert_no_fragment(artifacts, output, spec.key, password)
    for path in artifacts.rglob("job_events/*.json"):
        json.loads(path.read_text())  # masking kept runner's event files valid JSON
    for report in ("summary.json", "junit.xml"):
        assert stat.S_IMODE((artifacts / report).stat().st_mode) == 0o644
    assert stat.S_IMODE((artifacts / "runner").stat().st_mode) == 0o700
    assert not list(artifacts.glob(".reports-*"))
    assert not list(artifacts.glob(".*.partial"))
    command = json.loads(next((artifacts / "runner" / "artifacts").glob("*/command")).read_text())
    if "--vault-id" in spec.args:  # passed through, by path
        assert spec.args[spec.args.index("--vault-id") + 1] in command["command"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("prompt", "a prompt cannot be answered here"),
        ("prod@prompt", "a prompt cannot be answered here"),
        ("bad label@{file}", "allowed: [LABEL@]FILE"),
        ("prod@/no/such/file", "/no/such/file is not a file"),
        ("prod@{file}\n", "allowed: [LABEL@]FILE"),
    ],
)
def test_bad_vault_id_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, problem: str
) -> None:
    password_file = tmp_path / "pw"
    password_file.write_text("pw\n")
    value = value.format(file=password_file)
    artifacts = tmp_path / "artifacts"
    argv = ["up", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(artifacts), "--vault-id", value]
    assert cli.main(argv) == 5
    err = capsys.readouterr().err
    assert repr(value) in err
    assert problem in err
    assert not artifacts.exists()


# -- signals --------------------------------------------------------------------------------------


def _tree(root: int) -> dict[int, tuple[str, str]]:
    """pid -> (start time, command) of every descendant of root, from /proc."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        info[int(entry.name)] = (fields[19], command)
    found: dict[int, tuple[str, str]] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child in info:
                found[child] = info[child]
                todo.append(child)
    return found


def _alive(pid: int, start: str) -> bool:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"


@dataclass
class Stopped:
    rc: int
    took: float  # seconds from the signal to the CLI's exit
    output: str
    left: dict[int, str]  # processes of the CLI's tree (seen during the sleep) still running after it


def _signal_mid_sleep(
    argv: list[str], tmp_path: Path, signo: signal.Signals, *, close_output: bool = False
) -> Stopped:
    """Runs the CLI until the play's `sleep 120` runs, sends it signo and waits for its exit.
    close_output: the CLI's stdout is closed once the sleep task started (as a terminal that hangs
    up: every later write fails)."""
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen(
        argv, cwd=REPO, env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)
            if close_output and "TASK Sleep long" in line:
                stdout.close()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        tree: dict[int, tuple[str, str]] = {}
        while not any(command.startswith("sleep 120") for _start, command in tree.values()):
            assert time.monotonic() < deadline, "the play never reached its sleep"
            assert proc.poll() is None, "the CLI ended before the sleep"
            time.sleep(0.2)
            tree = _tree(proc.pid)
        assert any("ansible-playbook" in command for _start, command in tree.values())
        assert list((tmp_path / "tmp").glob("sglang-deploy-ev-*"))  # the -e temp file exists now
        sent = time.monotonic()
        proc.send_signal(signo)
        rc = proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    time.sleep(0.5)
    left = {pid: command for pid, (start, command) in tree.items() if _alive(pid, start)}
    for pid in left:  # no orphan of a failing test keeps running either
        os.kill(pid, signal.SIGKILL)
    return Stopped(rc, took, "".join(lines.queue), left)


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_mid_play_stops_ansible_writes_reports_scrubs_and_cleans_up(
    tmp_path: Path, signo: signal.Signals
) -> None:
    """The CLI gets the signal while the play runs `sleep 120`: it exits 128+signo within seconds,
    ansible-playbook, its worker and the sleep are gone, summary.json/junit.xml say what ran (and the
    signal), no piece of the key is anywhere, the temp `-e` files are removed."""
    key = make_key("/")
    artifacts = tmp_path / "artifacts"
    argv = [str(EXE), "up", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(artifacts),
            "--playbook", str(PROJECT.relative_to(REPO) / "sleep_leak.yml"),
            "-e", f"sglang_api_key={key}"]  # fmt: skip
    stopped = _signal_mid_sleep(argv, tmp_path, signo)
    assert stopped.rc == 128 + signo, stopped.output
    assert stopped.took < 10, f"the CLI took {stopped.took:.1f}s to stop"
    assert stopped.left == {}, f"left running after {signo.name}: {stopped.left}"
    summary = json.loads((artifacts / "summary.json").read_text())
    assert (summary["status"], summary["rc"], summary["signal"]) == ("canceled", 128 + signo, signo.name)
    assert summary["hosts"]["localhost"]["ok"] == 1  # the task that ran before the signal
    junit = (artifacts / "junit.xml").read_text()
    assert 'name="Print the key"' in junit
    assert "Never reached" not in junit
    assert f"status=canceled rc={128 + signo}" in stopped.output
    assert_no_fragment(artifacts, stopped.output, key)
    assert not list((tmp_path / "tmp").glob("sglang-deploy-ev-*"))


def test_sighup_with_the_output_gone_still_stops_reports_and_cleans_up(tmp_path: Path) -> None:
    """SIGHUP as a closed terminal sends it: the CLI's output cannot be written any more. The run
    still stops (exit 129), nothing is left running, the reports are written."""
    artifacts = tmp_path / "artifacts"
    argv = [str(EXE), "up", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(artifacts),
            "--playbook", str(PROJECT.relative_to(REPO) / "sleep_leak.yml"),
            "-e", f"sglang_api_key={make_key()}"]  # fmt: skip
    stopped = _signal_mid_sleep(argv, tmp_path, signal.SIGHUP, close_output=True)
    assert stopped.rc == 129
    assert stopped.left == {}
    summary = json.loads((artifacts / "summary.json").read_text())
    assert (summary["status"], summary["signal"]) == ("canceled", "SIGHUP")
    assert not list((tmp_path / "tmp").glob("sglang-deploy-ev-*"))


def test_sigterm_stops_a_rolling_up_before_the_next_batch(tmp_path: Path) -> None:
    """`up --serial 1` over two hosts, SIGTERM during the first batch: exit 143, the second host not
    started, rollout.json says why."""
    inventory = tmp_path / "hosts.yml"
    host = '{ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}"}'
    inventory.write_text(f"all:\n  children:\n    sglang_servers:\n      hosts:\n        node1: {host}\n"
                         f"        node2: {host}\n")  # fmt: skip
    artifacts = tmp_path / "artifacts"
    argv = [str(EXE), "up", "-i", str(inventory), "--artifacts", str(artifacts), "--serial", "1",
            "--playbook", str(PROJECT.relative_to(REPO) / "sleep_leak.yml"),
            "-e", f"sglang_api_key={make_key()}"]  # fmt: skip
    stopped = _signal_mid_sleep(argv, tmp_path, signal.SIGTERM)
    assert stopped.rc == 143, stopped.output
    assert stopped.left == {}
    rollout = json.loads((artifacts / "rollout.json").read_text())
    assert [batch["hosts"] for batch in rollout["batches"]] == [["node1"]]
    assert (rollout["stopped"], rollout["not_started"]) == ("stopped by SIGTERM", ["node2"])
    assert "batch 2/2" not in stopped.output


# -- the pieces on their own ------------------------------------------------------------------------


def test_encoded_forms_and_bearer_values_are_masked() -> None:
    key = make_key("/")
    redactor = Redactor([key])
    slashed = key.replace("/", "\\/")
    texts = [
        json.dumps({"stdout": json.dumps({"key": slashed})}),  # a \/ encoder's output, in JSON, in JSON
        json.dumps(json.dumps(json.dumps(key))),
        f"curl -H 'Authorization: Bearer {key}' http://127.0.0.1:30000/v1/models",
        "https://example.invalid/?key=" + urllib.parse.quote(key, safe=""),
        "https://example.invalid/?key=" + urllib.parse.quote(key, safe="").lower(),  # lower-case escapes
        repr({"key": key}),
    ]
    for text in texts:
        cleaned = redactor(text)
        assert not any(piece in cleaned for piece in fragments(key)), cleaned
    assert json.loads(json.loads(redactor(texts[0]))["stdout"]) == {"key": MASK}  # still valid JSON
    # a Bearer value the run never learned: masked whole, `:` and `@` included
    assert Redactor()("Authorization: Bearer abc:def@ghi/jkl") == f"Authorization: Bearer {MASK}"


def test_slash_values_of_secret_names_are_secrets_locations_are_not() -> None:
    assert looks_like_secret("/sk:0123456789", "sglang_api_key")
    assert not looks_like_secret("/etc/sglang/api-key.env", "sglang_api_key_file")
    assert not looks_like_secret("/root/.ssh/id_ed25519", "ansible_ssh_private_key_file")
    env = {"SGLANG_API_KEY": "/sk:0123456789", "VAULT_PASSWORD_FILE": "/root/.vault-pass"}
    assert secret_env_values(env) == ["/sk:0123456789"]
    data = {"sglang_api_key": "/sk:0123456789", "sglang_api_key_file": "/etc/sglang/api-key.env"}
    assert list(VarsReader().secret_values(data)) == ["/sk:0123456789"]


def test_learning_renders_templates_with_read_only_lookups_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret's template may use env/file lookups (rendered, learned); a lookup with side effects
    (pipe) is not run while learning: its marker file is not created, its value not learned."""
    marker = tmp_path / "pipe-ran"
    monkeypatch.setenv("DEMO_SECRET_SOURCE", "from-env-0123456789")
    (tmp_path / "key.txt").write_text("from-file-0123456789\n")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n    web1:\n      ansible_connection: local\n"
        "      demo_token: \"{{ lookup('ansible.builtin.env', 'DEMO_SECRET_SOURCE') }}\"\n"
        f"      demo_password: \"{{{{ lookup('file', '{tmp_path / 'key.txt'}') }}}}\"\n"
        f"      demo_api_key: \"{{{{ lookup('pipe', 'touch {marker} && echo from-pipe-0123456789') }}}}\"\n"
    )
    found = set(VarsReader().from_inventory(inventory, tmp_path))
    assert {"from-env-0123456789", "from-file-0123456789"} <= found
    assert not any("from-pipe" in value for value in found)
    assert not marker.exists()


def test_vars_reader_learns_with_labelled_vault_ids(tmp_path: Path) -> None:
    """Two vault ids; values encrypted with either are learned, and both passwords."""
    secrets_by_label = {}
    args: list[str] = []
    for label in ("prod", "dev"):
        password_file = tmp_path / f"{label}-pass"
        password_file.write_text(f"pw-{label}-{secrets.token_hex(6)}\n")
        vault_file = tmp_path / f"{label}.yml"
        secrets_by_label[label] = make_key()
        vault_file.write_text(f"sglang_api_key: '{secrets_by_label[label]}'\n")
        cmd = [str(ANSIBLE_VAULT), "encrypt", "--vault-id", f"{label}@{password_file}", str(vault_file)]
        subprocess.run(cmd, check=True, capture_output=True)
        args.append(f"{label}@{password_file}")
    reader = VarsReader(vault_ids=tuple(args))
    assert len(reader.passwords) == 2
    for label, key in secrets_by_label.items():
        assert reader.from_file(tmp_path / f"{label}.yml") == [key]
    assert VarsReader().from_file(tmp_path / "prod.yml") == []  # without the vault id: nothing


ANSIBLE_CONNECTION_SECRETS = (
    "ansible_become_pass",
    "ansible_become_password",
    "ansible_ssh_pass",
    "ansible_password",
)


@pytest.mark.parametrize("name", ANSIBLE_CONNECTION_SECRETS)
def test_ansible_connection_passwords_are_secret_names(name: str) -> None:
    """Issue 32 item 5: Ansible's connection and become passwords are learned from the inventory and
    masked in free text, by the one secret-name rule (plugins/module_utils/secret_names.py)."""
    value = f"pw-{secrets.token_hex(8)}"
    assert list(VarsReader().secret_values({name: value, "ansible_user": "deploy-user"})) == [value]
    assert secret_env_values({name.upper(): value}) == [value]
    for text in (f"{name}={value}", f'"{name}": "{value}"', f"{name}: {value}"):
        assert value not in Redactor()(text), text
    # names that merely contain the letters are not secrets
    assert list(VarsReader().secret_values({"bypass_cache": value, "passes": value})) == []


def test_the_cli_and_the_collection_share_one_secret_name_rule() -> None:
    rule = load_module("secret_names_rule", REPO / "plugins/module_utils/secret_names.py")
    host_lock = load_module("host_lock_rule", REPO / "plugins/module_utils/host_lock.py")
    assert SECRET_NAME.pattern == rule.SECRET_NAME.pattern
    assert MASK == rule.MASK == host_lock.MASK
    assert host_lock.scrub_command(["ansible_ssh_pass=x1234567"]) == [f"ansible_ssh_pass={MASK}"]


def test_the_benchmarks_background_run_and_progress_poll_keep_the_key_out(tmp_path: Path) -> None:
    """verify's benchmark path (roles/verify/tasks/bench_exec.yml without the sandbox:
    tests/data/runner_project/bench_progress.yml): the key in a 0600 file the real runner reads and
    removes, the runner in the background (async: its module arguments and job record hold no key),
    its progress polled and shown. No piece of the key in the artifacts, the printed lines or the
    async job record; the progress lines were shown."""
    (tmp_path / "tmp").mkdir()
    key = make_key()
    artifacts = tmp_path / "artifacts"
    async_dir = tmp_path / "async"
    argv = [str(EXE), "up", "-v", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(artifacts),
            "--playbook", str(PROJECT.relative_to(REPO) / "bench_progress.yml"),
            "-e", f"sglang_api_key={key}", "-e", "demo_keep_job=true"]  # fmt: skip
    env = cli_env(tmp_path, ANSIBLE_ASYNC_DIR=str(async_dir))
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "progress    localhost  benchmark: level " in output  # a poll saw the runner at work
    [job] = [p for p in async_dir.iterdir() if p.is_file() and p.name.startswith("j")]
    record = json.loads(job.read_text())
    assert '"auth": true' in record["stdout"]  # the runner had the key (from the file)
    # the job record keeps the module arguments: the runner's argv with the key file's path only
    assert "key.json" in json.dumps(record["invocation"]["module_args"])
    assert_no_fragment(artifacts, output, key)
    text = job.read_text()
    for piece in fragments(key):
        assert piece not in text, piece
