"""Filter ``sglang.deploy.openpgp_fingerprints``: the fingerprints of an OpenPGP public key.

Documented in openpgp_fingerprints.yml beside this file; logic in plugins/module_utils/openpgp.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.openpgp import fingerprints


def openpgp_fingerprints(key: str) -> list[str]:
    """Fingerprints (upper hex) of the primary keys of an ASCII-armored OpenPGP key."""
    if not isinstance(key, str):
        raise TypeError(f"openpgp_fingerprints expects the armored key text, got {type(key).__name__}")
    found: list[str] = fingerprints(str(key))
    return found


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"openpgp_fingerprints": openpgp_fingerprints}
