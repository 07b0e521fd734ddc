"""Filters ``sglang.deploy.multinode_*``: multi-node tensor parallel (one replica of several hosts).

The logic lives in plugins/module_utils/multinode.py (pure Python, tested by tests/test_multinode.py);
the launch spec (plugins/module_utils/launch_spec.py) calls the same :func:`plan`, so "the hosts of
this replica" and "its rank-0 host" are computed in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.multinode import (
    check_host,
    check_ifnames,
    check_ip_allow,
    check_nodes,
    listening,
    plan,
)


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "multinode_plan": plan,
            "multinode_check_nodes": check_nodes,
            "multinode_check_ifnames": check_ifnames,
            "multinode_check_host": check_host,
            "multinode_check_ip_allow": check_ip_allow,
            "multinode_listening": listening,
        }
