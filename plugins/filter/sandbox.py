"""Filters ``sglang.deploy.sglang_sandbox_lines`` (the unit's hardening lines) and
``sglang.deploy.sglang_sandbox_run`` (``systemd-run`` argv with the same hardening, as the service
user): the one description is plugins/module_utils/sandbox.py (tests/test_sandbox.py).

Documented for ansible-doc in ``sglang_sandbox_lines.yml`` and ``sglang_sandbox_run.yml``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.sandbox import run_argv, unit_lines


def sglang_sandbox_lines(
    syscall_filter: Sequence[str] | None, syscall_deny: Sequence[str] | None = None
) -> list[str]:
    """The unit's hardening lines (syscall filter and deny list from the role's knobs)."""
    lines: list[str] = unit_lines(syscall_filter, syscall_deny)
    return lines


def sglang_sandbox_run(
    user: str,
    *,
    unit: str,
    workdir: str,
    read_write: Sequence[str],
    runtime_max_sec: int,
    loopback_only: bool,
    group: str | None = None,
    setenv: Sequence[str] = (),
    syscall_filter: Sequence[str] | None = None,
    syscall_deny: Sequence[str] | None = None,
) -> list[str]:
    """``systemd-run ... --`` running a command as ``user`` (group: ``group``, default the user's name)."""
    argv: list[str] = run_argv(
        unit=unit,
        user=user,
        group=str(group or user),
        workdir=workdir,
        read_write=read_write,
        runtime_max_sec=runtime_max_sec,
        loopback_only=loopback_only,
        setenv=setenv,
        syscall_filter=syscall_filter,
        syscall_deny=syscall_deny,
    )
    return argv


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sglang_sandbox_lines": sglang_sandbox_lines, "sglang_sandbox_run": sglang_sandbox_run}
