"""The release lifecycle's filter ``release_id`` (one rule for the stack and the router). Documented for
ansible-doc in release_id.yml beside this one; the logic is plugins/module_utils/release.py
(tests/test_release_lifecycle.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import release


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"release_id": release.release_id}
