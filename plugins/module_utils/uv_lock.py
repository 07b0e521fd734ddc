"""The one parser of uv's ``requirements.lock`` (``uv pip compile --generate-hashes`` output).

Pure Python (no Ansible import). The stack audit module (plugins/modules/sglang_stack_audit.py, on the
host) compares the installed distributions with :func:`parse_lock`; the sglang_stack role's receipt
records :func:`pins` (filter ``sglang.deploy.sglang_stack_lock_summary``). Names are canonical
(PEP 503: runs of ``-_.`` become ``-``, lower case), so both read the same names.
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"[-_.]+")
_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:==\s*(?P<ver>[^\s;\\]+)|@\s*(?P<url>\S+))"
)


def canon(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return _NAME.sub("-", name).lower()


def parse_lock(text: str) -> dict[str, dict[str, Any]]:
    """A requirements lock -> {name: {"version": v or None, "url": u or None, "hashed": bool}}.

    A pin is a line at column 0 (``name==version`` or ``name @ url``, extras and markers allowed); its
    ``--hash=`` continuation lines (indented) mark it hashed; comments and options (``-e``, ``--index-url``)
    are skipped."""
    out: dict[str, dict[str, Any]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not raw.startswith((" ", "\t")) and not line.startswith("-"):
            match = _PIN.match(line)
            current = canon(match["name"]) if match else None
            if match and current:
                out[current] = {"version": match["ver"], "url": match["url"], "hashed": "--hash=" in line}
            continue
        if current and line.startswith("--hash="):
            out[current]["hashed"] = True
    return out


def pins(text: str) -> dict[str, str]:
    """A requirements lock -> {name: version, or the URL of a ``name @ url`` pin}."""
    return {name: pin["version"] or pin["url"] for name, pin in parse_lock(text).items()}
