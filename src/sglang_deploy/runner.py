"""Run a playbook through ansible-runner and turn its events into the typed stream of events.py.

ansible-playbook is the one beside this interpreter (the venv's bin dir need not be on PATH), and that
dir goes first on the child's PATH.

Secrets stay out of runner's artifacts: extra vars given as `key=value`/JSON are written to a private
temporary file (outside the artifacts dir, removed after the run) and passed as `-e @file`; vault
password files and `--vault-id`s are passed by path on the command line; nothing secret goes through
envvars/extravars (runner writes both to disk). The secrets the run will use are learned
(known_secrets.py: `-e` values and the inventory's variables, vault-encrypted ones decrypted in memory
with Ansible's loaders and the run's vault secrets, secret-named templates rendered, plus
secret-named environment variables) while ansible-playbook starts (importing Ansible's loaders here
costs about as long as its own start-up, 0.3-0.4 s); no event is parsed, printed or recorded before
that learning is done, and every event is redacted (each secret in its plain, JSON-escaped, quoted
and URL-encoded forms) before it is printed or recorded. Runner copies the whole process environment
into artifacts/<id>/command: values of secret-named variables are masked there after the run, and
every known secret value and secret-looking `name=value` is masked in every artifact file.

Files: runner's private dir (`<artifacts>/runner`, job events, stdout, command) is 0700, so nothing
unscrubbed is readable by another user while the play runs; summary.json and junit.xml are written
into a private staging dir, scrubbed, and only then moved into place 0644 (CI reads them).

SIGINT, SIGTERM and SIGHUP stop a run the same way (PlaybookStop): ansible-playbook gets SIGTERM,
which it forwards to its workers (each runs in a session of its own, so runner's kill of
ansible-playbook's process group alone would leave them deploying); what of its process tree is still
alive after STOP_GRACE_S, or after ansible-playbook is gone, gets SIGKILL. Then the reports of what
ran are written, the artifacts scrubbed, the temporary `-e` files removed, and the run's rc is 128 +
the signal's number (SIGINT 130, SIGTERM 143, SIGHUP 129)."""

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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
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
INTERRUPTED_RC = 128 + signal.SIGINT  # 130: a run stopped by signal N exits 128 + N
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# how often runner asks whether to stop (its default: 5 s, or at the next output line)
CANCEL_POLL_S = 0.5
STOP_GRACE_S = 5.0  # SIGTERM to ansible-playbook, then SIGKILL to what is left of its process tree


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
    # --vault-id [LABEL@]SOURCE, SOURCE absolute (commands_run.vault_id_arg checked it)
    vault_ids: tuple[str, ...] = ()
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
    # SIGINT/SIGTERM/SIGHUP that arrived during the run (0: none): the caller stops too
    stop_signal: int = 0


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
    """`a=1 b='x y'` -> {"a": "1", "b": "x y"} (strings, as ansible-playbook -e does). A value with a
    template (`k={{ a }}`, spaces inside the braces) is split by Ansible's own parse_kv, as
    ansible-playbook splits it (imported only then: 80 ms)."""
    if "{{" in text or "{%" in text:
        from ansible.parsing.splitter import parse_kv  # type: ignore[import-untyped]  # noqa: PLC0415

        parsed: dict[str, str] = dict(parse_kv(text))
        if "_raw_params" in parsed:
            raise ValueError(f"extra var {parsed['_raw_params']!r} is not key=value, JSON/YAML, or @file")
        return parsed
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
    sources: list[Path] = field(default_factory=list)  # every -e file in order, the temp ones too


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
                out.sources.append(path)
                out.args += ["-e", f"@{path}"]
                continue
            stripped = value.lstrip()
            data: Any = yaml.safe_load(value) if stripped.startswith(("{", "[")) else _kv_to_dict(value)
            path = tmp / f"extra-{index}.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            out.sources.append(path)
            out.args += ["-e", f"@{path}"]
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def learn_secrets(request: RunRequest, extra: ExtraVars, redactor: Redactor) -> None:
    """Every secret the run will see, into the redactor: the vault passwords, vault files and `!vault`
    values decrypted in memory with the run's password files and vault ids (Ansible's own loaders),
    secret-named values of the inventory and of the extra vars, and the secret-named templates of
    both rendered against the variables a host gets (inventory, extra vars on top)."""
    from ansible.utils.vars import combine_vars  # type: ignore[import-untyped]  # noqa: PLC0415

    from .known_secrets import VarsReader  # noqa: PLC0415 - Ansible's loaders: 0.3 s to import

    reader = VarsReader(request.vault_password_files, request.vault_ids)
    redactor.add(*reader.passwords)
    merged: dict[str, Any] = {}
    # each -e as ansible-playbook reads it (inline values from their temp file: the same loader)
    for path in extra.sources:
        data = reader.load(path)
        if data is None:
            continue
        redactor.add(*reader.secret_values(data))
        if isinstance(data, dict):
            merged = combine_vars(merged, data)
    playbook_dir = (request.project_dir.resolve() / request.playbook).parent
    redactor.add(*reader.from_inventory(request.inventory.resolve(), playbook_dir, merged))


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


@dataclass
class StopSignal:
    """The first of SIGINT/SIGTERM/SIGHUP that arrived during the run (0: none)."""

    signo: int = 0

    def __bool__(self) -> bool:
        return self.signo != 0


@contextmanager
def _interruptible() -> Iterator[StopSignal]:
    """SIGINT, SIGTERM and SIGHUP ask runner to stop ansible-playbook (so the reports of the partial
    run are still written, the artifacts scrubbed, the temp files removed); the previous handlers
    come back after the run."""
    stop = StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.signo = stop.signo or signum

    previous = {signo: signal.signal(signo, on_signal) for signo in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)


def _proc_children() -> dict[int, list[int]]:
    """Every process's children, from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): tells it apart from a later process
    that reuses its pid. None: gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _proc_cmdline(pid: int) -> list[str]:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class PlaybookStop:
    """Runner's cancel callback: stops ansible-playbook (a child of this process) once `requested()`
    says so. SIGTERM first: ansible-playbook forwards it to its workers, which kill their own
    sessions (the module and the commands it runs); runner's SIGKILL of ansible-playbook's process
    group only after STOP_GRACE_S; `reap()` kills what of the tree seen outlived it."""

    def __init__(self, binary: Path, requested: Callable[[], bool]) -> None:
        self.binary = str(binary)
        self.requested = requested
        self.tree: dict[int, str] = {}  # pid -> start time, ansible-playbook and its descendants
        self.deadline: float | None = None

    def _refresh(self) -> list[int]:
        """ansible-playbook's pid(s) now; its process tree added to self.tree."""
        children = _proc_children()
        mains = [pid for pid in children.get(os.getpid(), []) if self.binary in _proc_cmdline(pid)]
        todo = list(mains)
        while todo:
            pid = todo.pop()
            start = _start_time(pid)
            if start is not None:
                self.tree.setdefault(pid, start)
                todo += children.get(pid, [])
        return mains

    def __call__(self) -> bool:
        """True: runner kills ansible-playbook's process group now."""
        if not self.requested():
            return False
        mains = self._refresh()
        if self.deadline is None:
            self.deadline = time.monotonic() + STOP_GRACE_S
            for pid in mains:
                with suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
            return not mains  # not found (no /proc): runner's kill at once
        return time.monotonic() > self.deadline

    def reap(self) -> None:
        """SIGKILL to every process of ansible-playbook's tree that is still the one seen."""
        for pid, start in self.tree.items():
            if _start_time(pid) == start:
                with suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def scrub_artifacts(artifact_dir: Path, redactor: Redactor) -> None:
    """Mask secret-named env values in runner's `command` file, then known secrets and secret-looking
    values in every file (scrub_file: a JSON file as data, so it stays valid JSON)."""
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
        scrub_file(path, redactor)


def scrub_file(path: Path, redactor: Redactor) -> None:
    """Known secrets and secret-looking values of one text file masked in place. A JSON file (runner's
    job events, summary.json) is masked as data: masked as text, ``"secret": false`` became
    ``"secret": ********`` and the file invalid JSON; as data the field gets the mask as a string."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return
    cleaned = redactor(text)
    if path.suffix == ".json" and cleaned != text:
        with suppress(ValueError):
            cleaned = json.dumps(redactor.data(json.loads(text)), ensure_ascii=False)
    if cleaned != text:
        path.write_text(cleaned, encoding="utf-8")


REPORT_MODE = 0o644


def write_scrubbed_reports(
    recorder: RunRecorder,
    summary: dict[str, Any],
    directories: list[Path],
    redactor: Redactor,
    *,
    changed_is_failure: bool,
) -> None:
    """summary.json and junit.xml written into a private (0700) staging dir, scrubbed there, then
    0644 and renamed into each directory: no reader ever sees an unscrubbed or partial report."""
    directories[-1].mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".reports-", dir=directories[-1]) as staging:
        write_reports(recorder, summary, [Path(staging)], changed_is_failure=changed_is_failure)
        for name in ("summary.json", "junit.xml"):
            scrub_file(Path(staging) / name, redactor)
            os.chmod(Path(staging) / name, REPORT_MODE)
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)
            for name in ("summary.json", "junit.xml"):
                partial = directory / f".{name}.partial"
                shutil.copyfile(Path(staging) / name, partial)
                os.chmod(partial, REPORT_MODE)
                os.replace(partial, directory / name)


def _cmdline(request: RunRequest, extra: ExtraVars) -> list[str]:
    """ansible-playbook's arguments besides those runner adds (inventory, limit, tags, verbosity)."""
    cmdline: list[str] = [*extra.args]
    for vault_id in request.vault_ids:
        cmdline += ["--vault-id", vault_id]
    for vault_file in request.vault_password_files:
        cmdline += ["--vault-password-file", str(vault_file.expanduser().resolve())]
    if request.check:
        cmdline.append("--check")
    if request.diff:
        cmdline.append("--diff")
    # with binary= runner runs it as given (RAW mode) and leaves the playbook to us
    cmdline.append(request.playbook)
    return cmdline


def _meta(request: RunRequest, ident: str, artifact_dir: Path, interrupted: StopSignal) -> dict[str, Any]:
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
    if interrupted:
        meta["signal"] = signal.Signals(interrupted.signo).name  # the reports say why the run stopped
    return meta


def run_playbook(request: RunRequest, on_event: EventSink | None = None) -> RunResult:
    ident = request.ident or new_ident()
    artifacts = request.artifacts_dir.resolve()
    private_dir = artifacts / "runner"
    run_dir = artifacts / "runs" / ident
    private_dir.mkdir(parents=True, exist_ok=True)
    private_dir.chmod(0o700)  # runner's files are unscrubbed until the run ends
    redactor = Redactor(secret_env_values(os.environ))
    recorder = RunRecorder(redact=redactor)
    loops = CensoredLoops()

    gate = SecretGate()
    shown = [True]

    def handle(raw: dict[str, Any]) -> bool:
        if not gate.passes():
            return False  # learning failed: dropped, and runner keeps no job event file of it either
        event = loops.fold(parse_event(raw))
        if event is not None:
            event = redact_event(event, redactor)
            recorder.feed(event)
            if on_event is not None and shown[0]:
                try:
                    on_event(event)
                except (OSError, SystemExit):  # the display is gone (a terminal closed: SIGHUP; a
                    # closed pipe; rich's Console raises SystemExit(1) on a broken pipe)
                    shown[0] = False  # the run goes on being recorded, and stops on the signal
        return True

    project_dir = request.project_dir.resolve()
    binary = ansible_playbook_binary()
    started = datetime.now()
    learning_failed = [False]
    with _extra_var_args(request.extra_vars) as extra, _interruptible() as interrupted:
        stopper = PlaybookStop(binary, lambda: bool(interrupted) or learning_failed[0])
        thread, runner = ansible_runner.run_async(
            private_data_dir=str(private_dir),
            project_dir=str(project_dir),
            binary=str(binary),
            inventory=str(request.inventory.resolve()),
            limit=request.limit,
            tags=request.tags,
            skip_tags=request.skip_tags,
            verbosity=request.verbosity or None,
            cmdline=shlex.join(_cmdline(request, extra)),
            ident=ident,
            quiet=True,
            suppress_env_files=True,
            # runner's default is a jsonfile fact cache in each run's artifacts (never read again);
            # ansible-core 2.19 decodes it on every task: 3 s of a 13 s no-op. ansible.cfg's memory cache
            fact_cache_type="memory",
            envvars=child_envvars(binary),
            event_handler=handle,
            cancel_callback=stopper,
            settings={"pexpect_timeout": CANCEL_POLL_S},
        )
        # learned here while ansible-playbook starts in runner's thread (its first event waits above)
        try:
            with gate.learning():
                learn_secrets(request, extra, redactor)
        except BaseException:
            learning_failed[0] = True  # runner stops ansible-playbook; no event is shown or recorded
            raise
        finally:
            thread.join()
            if stopper.deadline is not None:
                stopper.reap()
            if not gate.known:  # what ansible printed before it stopped was never redacted
                shutil.rmtree(runner.config.artifact_dir, ignore_errors=True)
    finished = datetime.now()
    artifact_dir = Path(runner.config.artifact_dir)
    scrub_artifacts(artifact_dir, redactor)
    # ansible-playbook's own status; a run stopped by a signal exits like a program it killed (also
    # when ansible-playbook ended on the forwarded SIGTERM before runner's cancel)
    status = "canceled" if interrupted else str(runner.status)
    rc = 128 + interrupted.signo if interrupted else runner.rc if isinstance(runner.rc, int) else 1
    summary = recorder.summary(
        rc=rc,
        status=status,
        started=started,
        finished=finished,
        meta=_meta(request, ident, artifact_dir, interrupted),
    )
    write_scrubbed_reports(
        recorder, summary, [run_dir, artifacts], redactor, changed_is_failure=request.changed_is_failure
    )
    return RunResult(
        rc=rc,
        status=status,
        ident=ident,
        artifact_dir=artifact_dir,
        summary=summary,
        run_dir=run_dir,
        summary_path=artifacts / "summary.json",
        junit_path=artifacts / "junit.xml",
        stop_signal=interrupted.signo,
    )
