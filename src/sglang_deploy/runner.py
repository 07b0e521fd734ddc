"""Run a playbook through ansible-runner and turn its events into the typed stream of events.py.

Secrets stay out of runner's artifacts: extra vars given as `key=value`/JSON are written to a private
temporary file (outside the artifacts dir, removed after the run) and passed as `-e @file`; vault
password files are passed by path on the command line; nothing secret goes through envvars/extravars
(runner writes both to disk). Runner copies the whole process environment into
artifacts/<id>/command: values of secret-named variables are masked there after the run, and every
known secret value and secret-looking `name=value` is masked in every artifact file."""

from __future__ import annotations

import contextlib
import json
import os
import secrets as _secrets
import shlex
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import ansible_runner
import yaml

from .events import Event, HostResult, parse_event
from .redact import MASK, SECRET_NAME, Redactor, secret_env_values
from .report import RunRecorder, write_reports

EventSink = Callable[[Event], None]
INTERRUPTED_RC = 130


@dataclass(frozen=True)
class RunRequest:
    project_dir: Path
    playbook: str
    inventory: Path
    artifacts_dir: Path
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    check: bool = False
    diff: bool = False
    extra_vars: tuple[str, ...] = ()
    vault_password_files: tuple[Path, ...] = ()
    verbosity: int = 0
    ident: str | None = None


@dataclass(frozen=True)
class RunResult:
    rc: int
    status: str
    ident: str
    artifact_dir: Path
    summary: dict[str, Any]
    run_dir: Path
    summary_path: Path
    junit_path: Path
    extra: dict[str, Any] = field(default_factory=dict)


def new_ident() -> str:
    return f"{datetime.now():%Y%m%dT%H%M%S}-{_secrets.token_hex(3)}"


def _secret_values(data: Any, under_secret: bool = False) -> Iterator[str]:
    """Leaf values found under secret-named keys of a loaded vars document."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _secret_values(value, under_secret or bool(SECRET_NAME.search(str(key))))
    elif isinstance(data, list):
        for value in data:
            yield from _secret_values(value, under_secret)
    elif under_secret and data is not None and not isinstance(data, bool):
        yield str(data)


def _kv_to_dict(text: str) -> dict[str, str]:
    """`a=1 b='x y'` -> {"a": "1", "b": "x y"} (strings, as ansible-playbook -e does)."""
    result: dict[str, str] = {}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(f"extra var {token!r} is not key=value, JSON/YAML, or @file")
        result[key] = value
    return result


@contextmanager
def _extra_var_args(extra_vars: tuple[str, ...], redactor: Redactor) -> Iterator[list[str]]:
    """Turns -e values into `-e @file` arguments; inline values go to a private temp file."""
    tmp = Path(tempfile.mkdtemp(prefix="sglang-deploy-ev-"))
    try:
        args: list[str] = []
        for index, value in enumerate(extra_vars):
            if value.startswith("@"):
                path = Path(value[1:]).expanduser().resolve()
                # vault-encrypted or unreadable: nothing to learn here, ansible reports it
                with contextlib.suppress(OSError, yaml.YAMLError, UnicodeDecodeError):
                    redactor.add(*_secret_values(yaml.safe_load(path.read_text(encoding="utf-8"))))
                args += ["-e", f"@{path}"]
                continue
            stripped = value.lstrip()
            data: Any = yaml.safe_load(value) if stripped.startswith(("{", "[")) else _kv_to_dict(value)
            redactor.add(*_secret_values(data))
            path = tmp / f"extra-{index}.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            args += ["-e", f"@{path}"]
        yield args
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _interruptible() -> Iterator[list[bool]]:
    """Ctrl-C asks runner to stop ansible (so the reports of the partial run are still written)."""
    flag = [False]
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        flag[0] = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def scrub_artifacts(artifact_dir: Path, redactor: Redactor) -> None:
    """Mask secret-named env values in runner's `command` file, then known secrets and secret-looking
    values in every file (the patterns stop at quotes and backslashes: JSON files stay valid)."""
    command = artifact_dir / "command"
    if command.is_file():
        data = json.loads(command.read_text(encoding="utf-8"))
        env = data.get("env")
        if isinstance(env, dict):
            for name in env:
                if SECRET_NAME.search(name):
                    env[name] = MASK
        command.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    for path in artifact_dir.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        cleaned = redactor(text)
        if cleaned != text:
            path.write_text(cleaned, encoding="utf-8")


def run_playbook(request: RunRequest, on_event: EventSink | None = None) -> RunResult:
    ident = request.ident or new_ident()
    artifacts = request.artifacts_dir.resolve()
    private_dir = artifacts / "runner"
    run_dir = artifacts / "runs" / ident
    private_dir.mkdir(parents=True, exist_ok=True)
    redactor = Redactor(secret_env_values(os.environ))
    recorder = RunRecorder(redact=redactor)

    def handle(raw: dict[str, Any]) -> bool:
        event = parse_event(raw)
        if isinstance(event, HostResult) and event.message:
            event = replace(event, message=redactor(event.message))
        if event is not None:
            recorder.feed(event)
            if on_event is not None:
                on_event(event)
        return True

    started = datetime.now()
    with _extra_var_args(request.extra_vars, redactor) as ev_args, _interruptible() as interrupted:
        cmdline: list[str] = [*ev_args]
        for vault_file in request.vault_password_files:
            cmdline += ["--vault-password-file", str(vault_file.expanduser().resolve())]
        if request.check:
            cmdline.append("--check")
        if request.diff:
            cmdline.append("--diff")
        runner = ansible_runner.run(
            private_data_dir=str(private_dir),
            project_dir=str(request.project_dir.resolve()),
            playbook=request.playbook,
            inventory=str(request.inventory.resolve()),
            limit=request.limit,
            tags=request.tags,
            skip_tags=request.skip_tags,
            verbosity=request.verbosity or None,
            cmdline=shlex.join(cmdline) if cmdline else None,
            ident=ident,
            quiet=True,
            suppress_env_files=True,
            envvars={"ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_NOCOLOR": "true"},
            event_handler=handle,
            cancel_callback=lambda: interrupted[0],
        )
    finished = datetime.now()
    artifact_dir = Path(runner.config.artifact_dir)
    scrub_artifacts(artifact_dir, redactor)
    status = str(runner.status)
    # ansible-playbook's own status; a run we stopped on Ctrl-C exits like an interrupted program
    rc = INTERRUPTED_RC if status == "canceled" else runner.rc if isinstance(runner.rc, int) else 1
    meta = {
        "run_id": ident,
        "playbook": request.playbook,
        "inventory": str(request.inventory.resolve()),
        "limit": request.limit,
        "tags": request.tags,
        "skip_tags": request.skip_tags,
        "check": request.check,
        "artifact_dir": str(artifact_dir),
    }
    summary = recorder.summary(rc=rc, status=status, started=started, finished=finished, meta=meta)
    write_reports(recorder, summary, [run_dir, artifacts])
    return RunResult(
        rc=rc,
        status=status,
        ident=ident,
        artifact_dir=artifact_dir,
        summary=summary,
        run_dir=run_dir,
        summary_path=artifacts / "summary.json",
        junit_path=artifacts / "junit.xml",
    )
