"""Filters of the sglang_service role: check the service-only inputs and render the launch spec's argv
and environment into a systemd unit with safe quoting.

Pure Python (no Ansible import): tests/test_service_filters.py loads this file directly. The argv itself
comes from the launch spec (fact preflight_launch_spec, plugins/module_utils/launch_spec.py); nothing here
builds flags.

- ``sglang_service_check``: the service-only inputs (a dict) -> errors naming variable, value, allowed.
- ``sglang_service_exec_start``: argv -> ``ExecStart=`` value, one flag per continuation line.
- ``sglang_service_systemd_quote``: one word quoted for a systemd command line.
- ``sglang_service_env_line``: NAME + value -> a quoted ``Environment=`` assignment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

API_KEY_PLACEHOLDER = "${SGLANG_API_KEY}"
# Unquoted in a systemd command line: no whitespace, quotes, backslash, `$` (env expansion),
# `%` (specifiers) or `;` (command separator).
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_ABS_PATH = re.compile(r"^/[^\s\"'\\$%;]*$")


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _int(value: Any) -> int | None:
    """An int from an int or a decimal string; None when it is neither (bools are not ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return None


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def sglang_service_check(cfg: Mapping[str, Any]) -> list[str]:
    """Errors of the service-only inputs (the launch inputs are checked by the launch spec)."""
    errors: list[str] = []
    name = cfg.get("name")
    if not isinstance(name, str) or not _UNIT_NAME.match(name) or name.endswith(".service"):
        errors.append(
            f"sglang_service_name={_show(name)} is not a unit name; allowed: letters, digits, : _ . @ - "
            "(without the .service suffix)"
        )
    for var, key in (("sglang_service_user", "user"), ("sglang_service_group", "group")):
        val = cfg.get(key)
        if not isinstance(val, str) or not _USER_NAME.match(val) or val == "root":
            errors.append(
                f"{var}={_show(val)} is not a system account name (and not root); allowed: [a-z_][a-z0-9_-]*"
            )
    for var, val, required in (
        ("sglang_service_launch_args_file", cfg.get("launch_args_file"), True),
        ("sglang_service_unit_dir", cfg.get("unit_dir"), True),
        ("sglang_service_cuda_home", cfg.get("cuda_home"), False),
    ):
        if not required and _unset(val):
            continue
        if not isinstance(val, str) or not _ABS_PATH.match(val) or val.rstrip("/") == "":
            errors.append(
                f"{var}={_show(val)} is not an absolute path; allowed: /absolute/path without whitespace, "
                "quotes, backslash, $, % or ;"
            )
    path_dirs = cfg.get("path_dirs")
    if not isinstance(path_dirs, list) or not all(
        isinstance(p, str) and _ABS_PATH.match(p) and ":" not in p for p in path_dirs
    ):
        errors.append(f"sglang_service_path_dirs={_show(path_dirs)} is not a list of absolute directories")
    override = cfg.get("exec_override")
    if not isinstance(override, list) or (
        override
        and (
            not all(isinstance(w, str) and w and "\n" not in w for w in override)
            or not _ABS_PATH.match(str(override[0]))
        )
    ):
        errors.append(
            f"sglang_service_exec_override={_show(override)}; allowed: [] or a list of strings whose first "
            "item is an absolute executable path"
        )
    for var, key in (
        ("sglang_service_timeout_start_sec", "timeout_start_sec"),
        ("sglang_service_timeout_stop_sec", "timeout_stop_sec"),
        ("sglang_service_health_timeout", "health_timeout"),
        ("sglang_service_health_delay", "health_delay"),
        ("sglang_service_restart_sec", "restart_sec"),
        ("sglang_service_start_limit_interval_sec", "start_limit_interval_sec"),
        ("sglang_service_start_limit_burst", "start_limit_burst"),
    ):
        num = _int(cfg.get(key))
        if num is None or num < 1:
            errors.append(f"{var}={_show(cfg.get(key))} is not a positive integer; allowed: >= 1")
    return errors


def sglang_service_systemd_quote(word: Any, raw: Sequence[str] = (API_KEY_PLACEHOLDER,)) -> str:
    """Quote one word for a systemd command line (ExecStart=).

    `$` and `%` are doubled so systemd neither expands variables nor specifiers in them, except
    for the exact words listed in ``raw`` (the API key placeholder, expanded by systemd from the
    EnvironmentFile into exactly one argument).
    """
    text = str(word)
    if text in raw:
        return text
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"a systemd command line word cannot contain newlines or NUL: {text!r}")
    text = text.replace("$", "$$").replace("%", "%%")
    if _SAFE_WORD.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sglang_service_exec_start(argv: Sequence[Any], indent: str = "    ") -> str:
    """ExecStart value: launcher on the first line, then one flag (with its values) per line."""
    words = [str(w) for w in argv]
    if not words:
        raise ValueError("empty argv")
    first = 1
    # The launcher: `python -m module` stays on the first line.
    while first < len(words) and not words[first].startswith("--"):
        first += 1
    lines = [" ".join(sglang_service_systemd_quote(w) for w in words[:first])]
    group: list[str] = []
    for word in words[first:]:
        if word.startswith("--") and group:
            lines.append(" ".join(group))
            group = []
        group.append(sglang_service_systemd_quote(word))
    if group:
        lines.append(" ".join(group))
    return (" \\\n" + indent).join(lines)


def sglang_service_env_line(name: str, value: Any) -> str:
    """`"NAME=value"` for Environment=: quoted, `%` doubled (specifiers); `$` is literal there."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"not an environment variable name: {name!r}")
    text = f"{name}={value}"
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"environment value of {name} contains a newline or NUL")
    return '"' + text.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"') + '"'


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "sglang_service_check": sglang_service_check,
            "sglang_service_exec_start": sglang_service_exec_start,
            "sglang_service_systemd_quote": sglang_service_systemd_quote,
            "sglang_service_env_line": sglang_service_env_line,
        }
