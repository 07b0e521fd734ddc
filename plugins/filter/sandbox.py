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


def sglang_sandbox_run(user: str, **kwargs: Any) -> list[str]:
    """``systemd-run ... --`` running a command as ``user`` (group: ``group``, default the user's name)."""
    group = str(kwargs.pop("group", None) or user)
    argv: list[str] = run_argv(user=user, group=group, **kwargs)
    return argv


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"sglang_sandbox_lines": sglang_sandbox_lines, "sglang_sandbox_run": sglang_sandbox_run}
