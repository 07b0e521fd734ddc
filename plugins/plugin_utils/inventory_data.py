"""Write what a host reported into inventory files as data, never as templates.

Autotune and verify write records measured on a host (GPU names, versions, timestamps, figures)
into ``host_vars/<host>/*.yml``; the next run loads them as variables. A string a host printed is
untrusted: a GPU name of ``{{ lookup('pipe', 'id') }}`` must stay that text. :func:`dump` emits YAML in
which every string, key or value, carries Ansible's ``!unsafe`` tag, so Ansible's loader marks it
as not-a-template (it is read back as the literal text and never evaluated), while any YAML loader
still reads the same data. Control characters other than tab are refused (they would break the
record for a human reader and have no place in these records).

Pure Python (PyYAML only): the action ``sglang.deploy.inventory_record`` (plugins/action/
inventory_record.py) calls it on the controller; tests/test_inventory_data.py tests it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()


class _Unsafe(str):
    """A string to be emitted with the ``!unsafe`` tag."""


class _Dumper(yaml.SafeDumper):
    """SafeDumper that knows :class:`_Unsafe` and never emits aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_unsafe(dumper: yaml.SafeDumper, data: _Unsafe) -> yaml.ScalarNode:
    return dumper.represent_scalar("!unsafe", str(data), style="'")


_Dumper.add_representer(_Unsafe, _represent_unsafe)


def _number(value: Any, where: str) -> Any:
    """None, a bool, an int or a finite float as its plain type."""
    if value is None or isinstance(value, bool):
        return None if value is None else bool(value)
    if isinstance(value, int):
        return int(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{where}: {value!r} is not a finite number")
    return float(value)


def _wrap(value: Any, where: str) -> Any:
    # Ansible hands its own subclasses of the plain types (data tagging: tagged int, str, ...): each is
    # written as the plain type (the dumper represents exact types only)
    if value is None or isinstance(value, (bool, int, float)):
        return _number(value, where)
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise ValueError(f"{where}: {value!r} holds a control character")
        # Ansible resolves an !unsafe scalar as if it were plain ("2026-11-30T19:12:51Z" would come back
        # a datetime, "true" a bool, "2.5" a float): such a string is written quoted and untagged, which
        # keeps it a string and is inert (none of these forms can hold a Jinja delimiter).
        tag = _RESOLVER.resolve(yaml.ScalarNode, str(value), (True, False))  # type: ignore[no-untyped-call]
        if tag != _STR_TAG and "{" not in value:
            return str(value)
        return _Unsafe(value)
    if isinstance(value, Mapping):
        return {_wrap(str(k), f"{where} key"): _wrap(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wrap(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ValueError(f"{where}: {type(value).__name__} cannot be written as inventory data")


def dump(data: Mapping[str, Any], header: str = "") -> str:
    """YAML for ``data`` with every string tagged ``!unsafe``; ``header`` becomes leading comments.

    Top-level keys are variable names and must be identifiers; they are written plain.
    """
    body: dict[str, Any] = {}
    for name, value in data.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{name!r} is not a variable name")
        body[name] = _wrap(value, name)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text: str = yaml.dump(
        body, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=100
    )
    return "---\n" + comments + text
