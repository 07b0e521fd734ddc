"""Run a playbook through ansible-runner and turn its events into the typed stream of events.py.

ansible-playbook is the one beside this interpreter (the venv's bin dir need not be on PATH), and that
dir goes first on the child's PATH.

Secrets stay out of runner's artifacts: extra vars given as `key=value`/JSON are written to a private
temporary file (outside the artifacts dir, removed after the run) and passed as `-e @file`; vault
password files are passed by path on the command line; nothing secret goes through envvars/extravars
(runner writes both to disk). The secrets the run will use are learned (known_secrets.py: `-e @file`s
and the inventory's variables, vault-encrypted ones decrypted in memory with Ansible's loaders, plus
secret-named environment variables) while ansible-playbook starts (importing Ansible's loaders here
costs about as long as its own start-up, 0.3-0.4 s); no event is parsed, printed or recorded before
that learning is done, and every event is redacted before it is printed or recorded. Runner copies
the whole process environment into artifacts/<id>/command: values of secret-named variables are
masked there after the run, and every known secret value and secret-looking `name=value` is masked
in every artifact file."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets as _secrets
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, cast

import ansible_runner
import yaml

from .events import CensoredLoops, Event, Stats, parse_event
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
    # a drift check (check mode on a converged host): changed tasks are JUnit failures
    changed_is_failure: bool = False


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


def ansible_playbook_binary() -> Path:
    """The ansible-playbook installed beside this interpreter (the venv's bin dir, which need not be
    on PATH: `.venv/bin/sglang-deploy up` from a plain login shell), else the one on PATH."""
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("ansible-playbook")
    return Path(found) if found else beside


def child_envvars(binary: Path) -> dict[str, str]:
    """What runner adds to the inherited environment of ansible-playbook (runner writes it into the
    artifacts: never a secret here). The binary's dir goes first on PATH, so everything ansible starts
    by name (ansible-galaxy, ansible-vault scripts, ...) comes from the same installation."""
    path = os.environ.get("PATH", "")
    return {
        "ANSIBLE_FORCE_COLOR": "false",
        "ANSIBLE_NOCOLOR": "true",
        "PATH": os.pathsep.join(p for p in (str(binary.parent), path) if p),
    }


def redact_event(event: Event, redactor: Redactor) -> Event:
    """Every text field of an event (task and play names are templated by ansible, messages and
    output carry module results) goes through the redactor before anyone prints or records it."""
    texts = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
    changes = {name: redactor(text) for name, text in texts.items() if isinstance(text, str) and text}
    changes = {name: text for name, text in changes.items() if text != texts[name]}
    if isinstance(event, Stats) and event.custom:
        raw = json.dumps(event.custom, ensure_ascii=False)
        cleaned = redactor(raw)
        if cleaned != raw:  # the patterns stop at quotes and backslashes: the JSON stays valid
            changes["custom"] = json.loads(cleaned)
    if not changes:
        return event
    redacted: Event = dataclasses.replace(cast(Any, event), **changes)  # mypy: replace() on a union
    return redacted


def _kv_to_dict(text: str) -> dict[str, str]:
    """`a=1 b='x y'` -> {"a": "1", "b": "x y"} (strings, as ansible-playbook -e does)."""
    result: dict[str, str] = {}
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(f"extra var {token!r} is not key=value, JSON/YAML, or @file")
        result[key] = value
    return result


@dataclass
class ExtraVars:
    """The -e values as `-e @file` arguments, and what the secrets are learned from (learn_secrets)."""

    args: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # -e @file, as given
    inline: list[Any] = field(default_factory=list)  # parsed key=value / JSON / YAML values


@contextmanager
def _extra_var_args(extra_vars: tuple[str, ...]) -> Iterator[ExtraVars]:
    """Turns -e values into `-e @file` arguments; inline values go to a private temp file."""
    tmp = Path(tempfile.mkdtemp(prefix="sglang-deploy-ev-"))
    try:
        out = ExtraVars()
        for index, value in enumerate(extra_vars):
            if value.startswith("@"):
                path = Path(value[1:]).expanduser().resolve()
                out.files.append(path)
                out.args += ["-e", f"@{path}"]
                continue
            stripped = value.lstrip()
            data: Any = yaml.safe_load(value) if stripped.startswith(("{", "[")) else _kv_to_dict(value)
            out.inline.append(data)
            path = tmp / f"extra-{index}.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            out.args += ["-e", f"@{path}"]
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def learn_secrets(request: RunRequest, extra: ExtraVars, redactor: Redactor) -> None:
    """Every secret the run will see, into the redactor: the vault passwords, vault files and `!vault`
    values decrypted in memory with the run's password files (Ansible's own loaders), secret-named
    values of the inventory and of the extra vars."""
    from .known_secrets import VarsReader  # noqa: PLC0415 - Ansible's loaders: 0.3 s to import

    reader = VarsReader(request.vault_password_files)
    redactor.add(*reader.passwords)
    playbook_dir = (request.project_dir.resolve() / request.playbook).parent
    redactor.add(*reader.from_inventory(request.inventory.resolve(), playbook_dir))
    for path in extra.files:
        redactor.add(*reader.from_file(path))
    for data in extra.inline:
        redactor.add(*reader.secret_values(data))


class SecretGate:
    """Runner's events wait here while the run's secrets are learned beside ansible-playbook's start:
    they pass once the secrets are known, and are dropped when learning failed."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.known = False

    def passes(self) -> bool:
        self._done.wait()
        return self.known

    @contextmanager
    def learning(self) -> Iterator[None]:
        try:
            yield
            self.known = True
        finally:
            self._done.set()


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
    loops = CensoredLoops()

    gate = SecretGate()

    def handle(raw: dict[str, Any]) -> bool:
        if not gate.passes():
            return False  # learning failed: dropped, and runner keeps no job event file of it either
        event = loops.fold(parse_event(raw))
        if event is not None:
            event = redact_event(event, redactor)
            recorder.feed(event)
            if on_event is not None:
                on_event(event)
        return True

    project_dir = request.project_dir.resolve()
    binary = ansible_playbook_binary()
    started = datetime.now()
    with _extra_var_args(request.extra_vars) as extra, _interruptible() as interrupted:
        cmdline: list[str] = [*extra.args]
        for vault_file in request.vault_password_files:
            cmdline += ["--vault-password-file", str(vault_file.expanduser().resolve())]
        if request.check:
            cmdline.append("--check")
        if request.diff:
            cmdline.append("--diff")
        # with binary= runner runs it as given (RAW mode) and leaves the playbook to us
        cmdline.append(request.playbook)
        thread, runner = ansible_runner.run_async(
            private_data_dir=str(private_dir),
            project_dir=str(project_dir),
            binary=str(binary),
            inventory=str(request.inventory.resolve()),
            limit=request.limit,
            tags=request.tags,
            skip_tags=request.skip_tags,
            verbosity=request.verbosity or None,
            cmdline=shlex.join(cmdline),
            ident=ident,
            quiet=True,
            suppress_env_files=True,
            # runner's default is a jsonfile fact cache in each run's artifacts (never read again);
            # ansible-core 2.19 decodes it on every task: 3 s of a 13 s no-op. ansible.cfg's memory cache
            fact_cache_type="memory",
            envvars=child_envvars(binary),
            event_handler=handle,
            cancel_callback=lambda: interrupted[0],
        )
        # learned here while ansible-playbook starts in runner's thread (its first event waits above)
        try:
            with gate.learning():
                learn_secrets(request, extra, redactor)
        except BaseException:
            interrupted[0] = True  # runner stops ansible-playbook; no event is shown or recorded
            raise
        finally:
            thread.join()
            if not gate.known:  # what ansible printed before it stopped was never redacted
                shutil.rmtree(runner.config.artifact_dir, ignore_errors=True)
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
    write_reports(recorder, summary, [run_dir, artifacts], changed_is_failure=request.changed_is_failure)
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
