"""Filters ``sglang.deploy.openpgp_fingerprints`` and ``sglang.deploy.openpgp_export``: an OpenPGP
public key's fingerprints, and the one key of a key file with the pinned fingerprint.

Documented in openpgp_fingerprints.yml and openpgp_export.yml beside this file; logic in
plugins/module_utils/openpgp.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.openpgp import export_key, fingerprints


def openpgp_fingerprints(key: str) -> list[str]:
    """Fingerprints (upper hex) of the primary keys of an ASCII-armored OpenPGP key."""
    if not isinstance(key, str):
        raise TypeError(f"openpgp_fingerprints expects the armored key text, got {type(key).__name__}")
    found: list[str] = fingerprints(str(key))
    return found


def openpgp_export(key: str, fingerprint: str) -> str:
    """The key with primary fingerprint ``fingerprint`` alone (its user IDs, signatures, subkeys), armored."""
    if not isinstance(key, str) or not isinstance(fingerprint, str):
        raise TypeError("openpgp_export expects the armored key text and the fingerprint, both strings")
    exported: str = export_key(str(key), str(fingerprint))
    return exported


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"openpgp_fingerprints": openpgp_fingerprints, "openpgp_export": openpgp_export}
