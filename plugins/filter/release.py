"""The release lifecycle's prune rule as a filter (``release_prune``), used by the stack's and the
router's activate tasks. Documented for ansible-doc in release_prune.yml beside this file; the logic
is plugins/module_utils/release.py (tests/test_release_prune.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import release


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"release_prune": release.prune}
