"""Filter ``sglang.deploy.to_inventory_yaml``: host-reported records as inventory data (``!unsafe``).

Documented in to_inventory_yaml.yml beside this file; logic in plugins/plugin_utils/inventory_data.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.plugin_utils.inventory_data import dump


def to_inventory_yaml(data: Mapping[str, Any], header: str = "") -> str:
    """YAML whose every string is tagged ``!unsafe`` (read back as text, never templated)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"to_inventory_yaml expects a mapping of variables, got {type(data).__name__}")
    text: str = dump(data, header)  # a ValueError names the offending field
    return text


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"to_inventory_yaml": to_inventory_yaml}
