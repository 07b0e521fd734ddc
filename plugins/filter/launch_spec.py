"""Filter ``sglang.deploy.launch_spec``: the deployment inputs -> ``{"spec": ..., "errors": [...]}``.

The logic lives in plugins/module_utils/launch_spec.py (pure Python, tested by tests/test_launch_spec.py);
the preflight role calls this filter once and exports the spec as the fact ``preflight_launch_spec``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.launch_spec import resolve


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"launch_spec": resolve}
