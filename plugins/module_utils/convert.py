"""The one reading of loosely typed inputs (YAML, ``-e`` strings, Jinja results) as bool, int and float.

Pure Python (no Ansible import). The launch spec (plugins/module_utils/launch_spec.py) and the service
filters (plugins/filter/sglang_service.py) both read their inputs through these functions, so
``"yes"``, ``"1"`` and ``1`` mean the same to every role. Each returns None for a value it does not
accept (the caller names the variable and what is allowed); bools are never ints.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

_INT = re.compile(r"\s*[+-]?[0-9]+\s*")
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


def unset(value: Any) -> bool:
    """None, or a string of white space only."""
    return value is None or (isinstance(value, str) and value.strip() == "")


def as_int(value: Any) -> int | None:
    """An int from an int or a decimal string (ASCII digits); None otherwise (bools are not ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT.fullmatch(value):
        return int(value)
    return None


def as_bool(value: Any) -> bool | None:
    """A bool from a bool, 0/1 or one of the words true/yes/on/1, false/no/off/0 (any case); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in TRUE_WORDS:
            return True
        if low in FALSE_WORDS:
            return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


def as_float(value: Any) -> float | None:
    """A float from an int, a float or a numeric string; None otherwise (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def show(value: Any) -> str:
    """A value as an error message shows it: strings quoted (repr), null/true/false as YAML spells them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


# The one port rule (the service's, a multi-node replica's, the router's and its metrics' port): the units
# run without CAP_NET_BIND_SERVICE, so 1024-65535; an int, or a string of ASCII digits only (no sign,
# no white space: the stricter of the launch spec's as_int and the router's old `[0-9]{4,5}`).
PORT_MIN = 1024
PORT_MAX = 65535
PORT_ALLOWED = f"an integer {PORT_MIN}-{PORT_MAX} (the units run without CAP_NET_BIND_SERVICE)"
_PORT = re.compile(r"[0-9]{1,5}")


def as_port(value: Any) -> int | None:
    """The port ``value`` names (an int, or a string of ASCII digits, 1024-65535); None otherwise."""
    if isinstance(value, str):
        value = int(value) if _PORT.fullmatch(value) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if PORT_MIN <= value <= PORT_MAX else None


def valid_port(value: Any) -> bool:
    """Whether ``value`` is a port by the one port rule (:func:`as_port`)."""
    return as_port(value) is not None


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def valid_host(value: Any) -> bool:
    """An IPv4/IPv6 address or an RFC 1123 host name (the launch spec's --host, a replica's address)."""
    if not isinstance(value, str) or not value or value != value.strip():
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        return True
    if len(value) > 253 or re.fullmatch(r"[0-9.]+", value):
        return False
    return all(_HOST_LABEL.fullmatch(label) for label in value.rstrip(".").split("."))
