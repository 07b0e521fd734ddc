"""The one string rule of every input check: full-match semantics and no control characters.

Pure Python (no Ansible import). Used by the launch spec (plugins/module_utils/launch_spec.py), the
Jinja test ``sglang.deploy.safe_text`` (plugins/test/text.py) and the filters
``sglang.deploy.text_errors`` / ``sglang.deploy.argspec_inputs`` (plugins/filter/text.py) that every
role's ``tasks/validate.yml`` runs over all of its inputs, so preflight is never looser than a role.

Why: ``re.match('^...$')`` and Jinja's ``is match('^...$')`` accept ONE trailing newline (``$``
matches before it); a vault value made with ``echo key | ansible-vault encrypt_string`` has one,
and a newline in a word of a systemd unit injects a directive (``ExecStartPre=+...``). Every pattern
here is applied with :func:`re.fullmatch` (or ``\\Z``) and every string is refused when it holds a
control character (``\\x00-\\x1f``, ``\\x7f``: newline, carriage return, tab, NUL, escape, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import is_secret_name

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
CONTROL_ALLOWED = "text without control characters (no newline, carriage return, tab, NUL, escape, DEL)"


# The path rule: an input that names a path (by its name: a ``*_path``, ``*_dir``, ``*_file``, ``*_root``,
# ... input, or the launch spec's paths) never holds a ``..`` component: ``/opt/models/../../etc`` passes
# every character check and climbs out of the place the input names (issue 32 item 8).
PATH_NAME = re.compile(
    r"(?:^|_)(?:path|paths|dir|dirs|directory|file|files|root|home|prefix|python|tokenizer|modprobe|link|dest"
    r"|wheelhouse|lock)\Z"
)
DOTDOT = re.compile(r"(?:^|/)\.\.(?:/|\Z)")
DOTDOT_ALLOWED = "a path without '..' components (a path input names its place; '..' climbs out of it)"


def has_dotdot(path: str) -> bool:
    """Whether the path ``path`` holds a ``..`` component."""
    return DOTDOT.search(path) is not None


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character."""
    return CONTROL.search(text) is not None


def safe_text(value: Any, pattern: str | None = None) -> bool:
    """A string without control characters that, when ``pattern`` is given, full-matches it."""
    if not isinstance(value, str) or has_control(value):
        return False
    return pattern is None or re.fullmatch(pattern, value) is not None


def _show(name: str, value: str) -> str:
    # inputs whose value never reaches a message: the one secret-name rule (secret_names.py)
    return "(value not printed)" if is_secret_name(name) else repr(value)


def _walk(name: str, value: Any, errors: list[str], depth: int = 0, path: bool = False) -> None:
    if depth > 32:  # a self-referencing structure: nothing an input file can hold
        errors.append(f"{name} is nested deeper than 32 levels: allowed plain data")
    elif isinstance(value, str):
        if has_control(value):
            errors.append(f"{name}={_show(name, value)} is not valid: allowed {CONTROL_ALLOWED}")
        elif path and has_dotdot(value):
            errors.append(f"{name}={_show(name, value)} is not valid: allowed {DOTDOT_ALLOWED}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and has_control(key):
                errors.append(f"{name} has the key {_show(name, key)}: allowed keys of {CONTROL_ALLOWED}")
            _walk(f"{name}.{key}", item, errors, depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(f"{name}[{index}]", item, errors, depth + 1, path)


def text_errors(values: Mapping[str, Any]) -> list[str]:
    """Errors for every string (keys of mappings included, at any depth) holding a control character,
    and for every string of a path input (named as one: :data:`PATH_NAME`; a list of them too) holding
    a ``..`` component.

    ``values`` maps an input's name to its value; each error names the input (with the path inside
    it, e.g. ``nccl_env_tuned.vars.NCCL_ALGO``), its value (never for secret-named inputs) and what is
    allowed.
    """
    errors: list[str] = []
    for name, value in values.items():
        _walk(str(name), value, errors, path=PATH_NAME.search(str(name)) is not None)
    return errors


def argspec_inputs(doc: Mapping[str, Any], entry: str = "main", skip: Iterable[str] = ()) -> list[str]:
    """The option names of one entry point of a role's ``meta/argument_specs.yml`` document."""
    specs = doc.get("argument_specs") or {}
    point = specs.get(entry) or specs.get("main") or {}
    options = point.get("options") or {}
    skipped = set(skip)
    return sorted(str(name) for name in options if name not in skipped)
