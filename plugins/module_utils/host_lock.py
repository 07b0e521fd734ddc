"""The host lock of a deployment run (module sglang.deploy.host_lock and its action plugin).

One JSON file on the host (default ``/run/sglang-deploy/lock``: a tmpfs, so a reboot, which ends every
run, also clears it) names the run that holds the host: ``holder`` = {run_id, controller, pid,
pid_start, command, started_at} of the controller's ansible-playbook, plus ``taken_epoch`` (the host's
clock when it was taken). Every read-modify-write of the file happens under ``flock(2)`` of a guard
file beside it, so two runs that race for a free or stale lock cannot both win; the file itself is
replaced with rename(2), so a reader never sees half a record. The record is written 0600 (root
only: it holds a command line), and the guard, the temporary file and the record are opened with
``O_NOFOLLOW`` (the temporary file with ``O_CREAT|O_EXCL``): a symbolic link planted in a writable
lock directory cannot make root write through it to another file.

- :func:`acquire`: free -> taken; held by the same run id -> kept (re-entrant: each stage playbook
  of one site.yml run asks again); held by another run -> refused with the holder, unless its run id
  is the one the caller was told is dead (``takeover``: the action plugin checked the pid on the
  controller) or it is older than ``stale_after_s``: then taken over and the old holder returned.
  ``check``: nothing is written, the answer says what would happen.
- :func:`release`: removes the file only when this run holds it.
- :func:`process_start` / :func:`alive` / :func:`scrub_command`: what the controller side knows of a
  pid (start time from ``/proc``, so a reused pid is not taken for the holder); its command line is
  recorded with the values of every ``-e``/``--extra-vars`` spelling and of every secret-named
  ``NAME=VALUE`` masked (the one secret-name rule and mask, plugins/module_utils/secret_names.py, that
  the CLI uses).

Pure Python (no Ansible import): tests/test_host_lock.py tests it with real files and processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import MASK, is_secret_name

HOLDER_KEYS = ("run_id", "controller", "pid", "pid_start", "command", "started_at")
RECORD_MODE = 0o600  # root only: the record holds the controller's command line
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# ansible-playbook's short options that take a value (the rest of a cluster such as `-ve@f`, or the next
# word): -e's value is masked; any other ends the cluster without one
_SHORT_WITH_VALUE = frozenset("ecfilMtTu")
EXTRA_VARS = "--extra-vars"


# The lock's inputs: option -> (the play variable that sets it, the pattern its whole value matches, what
# is allowed). One rule, applied by the action plugin before the host is contacted.
LOCK_INPUTS = {
    "path": ("sglang_lock_path", r"/[A-Za-z0-9_./-]+", "an absolute path of [A-Za-z0-9_./-]"),
    "stale_after_s": (
        "sglang_lock_stale_after_s",
        r"[0-9]{1,9}",
        "an integer >= 0 (seconds; 0 = a lock never goes stale by age)",
    ),
}


def input_errors(args: dict[str, Any]) -> list[str]:
    """Each lock input given in ``args`` that its rule refuses, naming the variable, the value and what is
    allowed (a value with a ``..`` path segment is refused too)."""
    errors: list[str] = []
    for option, (name, pattern, allowed) in LOCK_INPUTS.items():
        if option not in args:
            continue
        value = args[option]
        text = str(value)
        if not re.fullmatch(pattern, text) or (option == "path" and ".." in text.split("/")):
            errors.append(f"bad lock input: {name}={json.dumps(value)}: allowed {allowed}")
    return errors


@contextlib.contextmanager
def _guard(path: str) -> Iterator[None]:
    os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
    fd = os.open(path + ".guard", os.O_RDWR | os.O_CREAT | _NOFOLLOW, RECORD_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def read(path: str) -> dict[str, Any] | None:
    """The lock record, None when there is none; an unreadable file is {"invalid": its start}."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as fh:
        text = fh.read(65536)
    try:
        doc = json.loads(text)
    except ValueError:
        return {"invalid": _CONTROL.sub("?", text[:200])}
    if not isinstance(doc, dict) or not isinstance(doc.get("holder"), dict):
        return {"invalid": _CONTROL.sub("?", text[:200])}
    return doc


def _write(path: str, doc: dict[str, Any]) -> None:
    """Write the record 0600 through a new temporary file (O_CREAT|O_EXCL|O_NOFOLLOW: never an existing
    file or a link planted there), then rename it over ``path`` (rename replaces a link, never follows it)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a leftover of a killed run of this pid (or a planted link): removed, not followed
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, RECORD_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fchmod(fh.fileno(), RECORD_MODE)  # whatever the umask
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def describe(doc: dict[str, Any] | None) -> str:
    """One line naming the holder: run id, pid and controller, when its process started, the command."""
    if doc is None:
        return "nobody"
    if "invalid" in doc:
        return f"an unreadable lock record ({doc['invalid']!r})"
    h = doc["holder"]
    command = h.get("command")
    cmd = " ".join(str(c) for c in command) if isinstance(command, list) else str(command)
    return (
        f"run {h.get('run_id')}: pid {h.get('pid')} on controller {h.get('controller')}, "
        f"process started {_iso(h.get('pid_start'))}, lock taken {h.get('started_at')}, command: {cmd}"
    )


def _iso(epoch: Any) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(epoch)))
    except (TypeError, ValueError, OverflowError):
        return str(epoch)


def acquire(
    path: str,
    holder: dict[str, Any],
    *,
    stale_after_s: int = 0,
    takeover: str = "",
    check: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """Take the lock for ``holder``. Returns {"status", "holder", "previous"}.

    status: acquired | held_by_us | taken_over (previous = the old record, reason in "why") |
    held (holder = the other run's record; nothing written). In check mode the same statuses
    prefixed with "would_" for what a real run would write, and nothing is written.
    """
    now = time.time() if now is None else now
    with _guard(path):
        old = read(path)
        mine = {"holder": dict(holder), "taken_epoch": now}
        if old is None:
            if not check:
                _write(path, mine)
            return {"status": "would_acquire" if check else "acquired", "holder": mine, "previous": None}
        if "invalid" not in old and old["holder"].get("run_id") == holder.get("run_id"):
            return {"status": "held_by_us", "holder": old, "previous": None}
        why = ""
        if "invalid" in old:
            why = "the lock record is unreadable"
        elif takeover and old["holder"].get("run_id") == takeover:
            why = "its process is gone (pid not running on this controller)"
        else:
            age = now - float(old.get("taken_epoch") or 0)
            if stale_after_s > 0 and age > stale_after_s:
                why = f"taken {int(age)} s ago, more than sglang_lock_stale_after_s={stale_after_s}"
        if not why:
            return {"status": "held", "holder": old, "previous": None}
        if not check:
            _write(path, mine)
        return {
            "status": "would_take_over" if check else "taken_over",
            "holder": mine,
            "previous": old,
            "why": why,
        }


def release(path: str, run_id: str, *, check: bool = False) -> dict[str, Any]:
    """Remove the lock when ``run_id`` holds it. status: released | free | held_by_other."""
    with _guard(path):
        old = read(path)
        if old is None:
            return {"status": "free", "holder": None}
        if "invalid" in old or old["holder"].get("run_id") != run_id:
            return {"status": "held_by_other", "holder": old}
        if not check:
            os.unlink(path)
        return {"status": "would_release" if check else "released", "holder": old}


def _boot_time() -> float:
    with open("/proc/stat", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def process_start(pid: int) -> float | None:
    """The start time (epoch seconds, 1/100 s resolution) of a running pid, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])  # field 22: starttime
        return round(_boot_time() + ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: Any, pid_start: Any) -> bool:
    """Whether the process ``pid`` that started at ``pid_start`` still runs (a reused pid does not)."""
    try:
        started = process_start(int(pid))
        return started is not None and abs(started - float(pid_start)) < 1.0
    except (TypeError, ValueError):
        return False


def command_line(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def _short_cluster(arg: str) -> tuple[str, bool]:
    """A cluster of short options (``-vve@f``, ``-e``, ``-ivx``): (the cluster with -e's value masked,
    whether -e takes the next word)."""
    for index, char in enumerate(arg[1:], start=1):
        if char not in _SHORT_WITH_VALUE:
            continue
        if char != "e":
            return arg, False  # another option's value follows: no -e in this cluster
        rest = arg[index + 1 :]
        return (arg[: index + 1] + MASK if rest else arg), not rest
    return arg, False


def scrub_command(argv: Sequence[str], limit: int = 1000) -> list[str]:
    """The command line without secrets: the value of every -e/--extra-vars spelling masked (inline
    values can hold keys: ``-e``, ``-ve``, ``-e@file``, ``--extra-vars``, and the abbreviations
    ansible-playbook's parser accepts: ``--extra``, ``--extra-var``, each also as ``--x=VALUE``), any
    NAME=VALUE or --NAME=VALUE with a secret name (the one rule, secret_names.py) masked; control
    characters dropped. (ansible-playbook has no option whose next word is a secret: its passwords are
    prompted for or read from files.)"""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, eq, _value = arg.partition("=")
        if arg.startswith("--") and len(name) > 2 and EXTRA_VARS.startswith(name):
            out.append(f"{name}={MASK}" if eq else arg)
            hide_next = not eq
            continue
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            cluster, hide_next = _short_cluster(arg)
            if cluster != arg or hide_next:
                out.append(cluster)
                continue
        if eq and is_secret_name(name):
            out.append(f"{_CONTROL.sub('', name)}={MASK}")
            continue
        out.append(_CONTROL.sub("", arg))
    text_len = 0
    kept: list[str] = []
    for arg in out:
        text_len += len(arg) + 1
        if text_len > limit:
            kept.append("...")
            break
        kept.append(arg)
    return kept
