"""The one description of the service's sandbox: the hardening settings of ``sglang-kimi.service``
and the same settings on a transient unit (``systemd-run``) for the code verify and autotune run with
the release's Python (``sglang.bench_serving``, which loads the model directory's tokenizer).

* :func:`unit_lines` -> the ``[Service]`` lines the unit template writes
  (roles/sglang_service/templates/sglang.service.j2, through the filter ``sglang_sandbox_lines``);
* :func:`run_argv` -> ``systemd-run ... --`` with those settings as ``-p`` properties, as the service
  user, for a command that reads the model directory (filter ``sglang_sandbox_run``).

Why the benchmark runs there: bench_serving loads ``AutoTokenizer.from_pretrained(<model path>)``,
and a model directory whose ``tokenizer_config.json``/``config.json`` names code in ``auto_map``
runs that code in the loading process. The server runs it as the service user inside this sandbox;
verify and autotune run as root (become), so without the transient unit the same code would run as
root with the whole host writable. Tested by tests/test_sandbox.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The static hardening of the unit, in the unit's order. Not here: DevicePolicy/DeviceAllow and
# IPAddressAllow (per host: the unit computes them from its GPUs and bind address) and the syscall
# filter (a role knob, rendered by unit_lines from its two lists).
HARDENING: tuple[str, ...] = (
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectHostname=yes",
    "ProtectProc=invisible",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "RemoveIPC=yes",
    "KeyringMode=private",
    "SystemCallArchitectures=native",
)
TAIL: tuple[str, ...] = (
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
    "UMask=0027",
)
# The role's defaults (roles/sglang_service/defaults/main.yml; tests/test_sandbox.py holds them equal):
# used for a transient unit when the play does not know the service role's variables.
DEFAULT_SYSCALL_FILTER: tuple[str, ...] = ("@system-service", "pidfd_getfd")
DEFAULT_SYSCALL_DENY: tuple[str, ...] = ("@privileged",)

_SYSCALL_WORD = re.compile(r"[@A-Za-z0-9_:-]+")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_PATH = re.compile(r"/[^\s\"'\\$%;\x00-\x1f\x7f]*")
_UNIT = re.compile(r"[A-Za-z0-9:_.@-]+\.service")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^\s\"'\\$%;\x00-\x1f\x7f]*")


def _syscall_words(words: Sequence[str] | None, default: Sequence[str], var: str) -> list[str]:
    out = list(default if words is None else words)
    for word in out:
        if not isinstance(word, str) or not _SYSCALL_WORD.fullmatch(word):
            raise ValueError(f"{var}: {word!r} is not a system call or @group name")
    return out


def syscall_lines(filter_: Sequence[str] | None = None, deny: Sequence[str] | None = None) -> list[str]:
    """``SystemCallFilter=`` allow line, its ``~`` deny line and the error number ([] filter: none)."""
    allow = _syscall_words(filter_, DEFAULT_SYSCALL_FILTER, "sglang_service_syscall_filter")
    denied = _syscall_words(deny, DEFAULT_SYSCALL_DENY, "sglang_service_syscall_deny")
    if not allow:
        return []
    lines = [f"SystemCallFilter={' '.join(allow)}"]
    if denied:
        lines.append(f"SystemCallFilter=~{' '.join(denied)}")
    return [*lines, "SystemCallErrorNumber=EPERM"]


def unit_lines(filter_: Sequence[str] | None = None, deny: Sequence[str] | None = None) -> list[str]:
    """The unit's hardening lines: HARDENING, the syscall filter, TAIL."""
    return [*HARDENING, *syscall_lines(filter_, deny), *TAIL]


def run_argv(
    *,
    unit: str,
    user: str,
    group: str,
    workdir: str,
    read_write: Sequence[str],
    runtime_max_sec: int,
    loopback_only: bool,
    setenv: Sequence[str] = (),
    syscall_filter: Sequence[str] | None = None,
    syscall_deny: Sequence[str] | None = None,
) -> list[str]:
    """``systemd-run`` argv (up to and with ``--``) that runs a command as ``user`` in the unit's sandbox.

    ``--pipe``: the command's stdin/stdout/stderr are this process's (a secret goes in on stdin, never
    as a property or an environment value: those are in the unit's properties); ``--wait``: exit code
    of the command; ``--collect``: the transient unit is gone afterwards, also when it failed.
    ``read_write``: the only paths it may write (ProtectSystem=strict); they must exist.
    ``loopback_only``: ``IPAddressDeny=any`` + ``IPAddressAllow=localhost`` (a client of a server on
    this host); otherwise no address policy (the benchmark through a router on another host).
    DevicePolicy=closed with no DeviceAllow: the pseudo devices only, no GPU (a client needs none).
    """
    checks = [
        ("unit", unit, _UNIT), ("user", user, _USER), ("group", group, _USER), ("workdir", workdir, _PATH),
    ]  # fmt: skip
    checks += [("read_write", path, _PATH) for path in read_write]
    checks += [("setenv", env, _ENV) for env in setenv]
    for what, value, rule in checks:
        if not isinstance(value, str) or not rule.fullmatch(value):
            raise ValueError(f"sglang_sandbox_run: {what}={value!r} does not match {rule.pattern}")
    if not read_write:
        raise ValueError("sglang_sandbox_run: read_write names no path")
    if int(runtime_max_sec) < 1:
        raise ValueError(f"sglang_sandbox_run: runtime_max_sec={runtime_max_sec!r} is below 1")
    props = [*HARDENING, *syscall_lines(syscall_filter, syscall_deny), *TAIL, "DevicePolicy=closed"]
    if loopback_only:
        props += ["IPAddressDeny=any", "IPAddressAllow=localhost"]
    props += [f"ReadWritePaths={' '.join(read_write)}", f"RuntimeMaxSec={int(runtime_max_sec)}"]
    argv = [
        "systemd-run", "--quiet", "--wait", "--pipe", "--collect", "--service-type=exec",
        f"--unit={unit}", f"--uid={user}", f"--gid={group}", f"--working-directory={workdir}",
    ]  # fmt: skip
    for env in setenv:
        argv.append(f"--setenv={env}")
    for prop in props:
        argv += ["-p", prop]
    return [*argv, "--"]
