"""The one "restart and await health" rule set: the timeout, the start-up record, the journal excerpt.

Pure Python (no Ansible import), used by plugins/modules/service_health.py, the only place any role
restarts or starts a served unit and waits for its /health (the server's unit, its rollback, autotune's
candidates, the router, and verify's wait for a start it did not make). tests/test_service_health.py
tests it.

The timeout rule: the start-up of a unit (unit start -> first /health 200: weight load and CUDA-graph
capture for SGLang) is measured by the module each time it sees one and kept per unit in a small JSON
record on the host. When a start-up of the unit was measured, the wait allows
``max(STARTUP_FLOOR_S, STARTUP_FACTOR x that start-up)``, never more than the configured ceiling;
when none was, the configured ceiling. So a server that took 4 minutes to start is given 12 instead of
30 when it hangs, and a lab double that took 40 s is given 5 minutes (a loaded 2-core machine took 148 s
once); a start-up grown past the ceiling fails and says so.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import (
    MASK,
    is_secret_name,
    mask_text,
)

STARTUP_FACTOR = 3.0
STARTUP_FLOOR_S = 300
RECORD_DIR = "/var/lib/sglang-deploy/startup"
_UNIT = re.compile(r"[A-Za-z0-9@_.:-]{1,200}\.service")


def unit_name(name: str) -> str:
    """``name`` with ``.service`` appended when it has no unit suffix; ValueError for anything else
    than a plain unit name (full-matched, no path, no control characters)."""
    unit = name if name.endswith(".service") else f"{name}.service"
    if not _UNIT.fullmatch(unit):
        raise ValueError(f"name={name!r}: allowed a systemd service name (letters, digits and @ _ . : -)")
    return unit


def record_path(record_dir: str, unit: str) -> str:
    """The start-up record of ``unit`` (a name unit_name accepted) in ``record_dir``."""
    return f"{record_dir.rstrip('/')}/{unit}.json"


def parse_record(text: str | None) -> dict[str, Any]:
    """The record ({unit, invocation, startup_s, measured_at, resolution_s}) or {} when it is absent
    or not a record (a damaged file is ignored, not trusted: it is rewritten at the next start)."""
    try:
        data = json.loads(text or "null")
        startup = float(data["startup_s"])
    except (ValueError, TypeError, KeyError):
        return {}
    if not math.isfinite(startup) or startup < 0:
        return {}
    return {**data, "startup_s": startup, "invocation": str(data.get("invocation") or "")}


def timeout(ceiling_s: float, record: Mapping[str, Any]) -> tuple[int, str]:
    """(seconds to wait for /health, the rule that gave them): see the module docstring."""
    ceiling = math.ceil(ceiling_s)
    measured = record.get("startup_s")
    if measured is None:
        return ceiling, f"{ceiling} s (configured; no start-up of this unit measured yet)"
    allowed = max(STARTUP_FLOOR_S, math.ceil(STARTUP_FACTOR * float(measured)))
    if allowed >= ceiling:
        return ceiling, (
            f"{ceiling} s (the configured ceiling; {STARTUP_FACTOR:g} x the last measured start-up "
            f"{float(measured):.1f} s would be {allowed} s)"
        )
    return allowed, (
        f"{allowed} s ({STARTUP_FACTOR:g} x the last measured start-up {float(measured):.1f} s, "
        f"at least {STARTUP_FLOOR_S} s, at most the configured {ceiling} s)"
    )


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show --property=...`` output as a dict (first ``=`` splits)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            out[name.strip()] = value.strip()
    return out


def startup_seconds(uptime_text: str, exec_main_start_monotonic_us: str) -> float | None:
    """Seconds from the unit's main process start (systemd's ExecMainStartTimestampMonotonic, in µs)
    to now (the first field of /proc/uptime); None when systemd has no start time."""
    try:
        start_us = int(exec_main_start_monotonic_us)
        now_s = float(uptime_text.split(maxsplit=1)[0])
    except (ValueError, IndexError):
        return None
    if start_us <= 0:
        return None
    return round(max(0.0, now_s - start_us / 1_000_000.0), 1)


def secret_values(file_texts: Iterable[str]) -> list[str]:
    """The values to mask from the files holding a unit's secrets: a one-line file's whole content (a
    key file), and the value of every ``name: value`` / ``name=value`` line whose name is a secret
    name (SGLang's --config YAML, an environment file). Values shorter than 4 characters are kept
    (flags like ``true``), longest first."""
    values: set[str] = set()
    for text in file_texts:
        stripped = text.strip()
        if stripped and "\n" not in stripped and not re.search(r"[:=]", stripped):
            values.add(stripped)
        for line in text.splitlines():
            match = re.match(r"""\s*(?:export\s+)?["']?([\w.-]+)["']?\s*[:=]\s*(.*?)\s*\Z""", line)
            if match and is_secret_name(match.group(1)):
                values.add(match.group(2).strip("'\""))
    return sorted((v for v in values if len(v) >= 4), key=len, reverse=True)


def mask(text: str, values: Iterable[str]) -> str:
    """``text`` with each known value and each secret-named ``name=value`` replaced by the mask."""
    for value in values:
        text = text.replace(value, MASK)
    masked: str = mask_text(text)
    return masked
