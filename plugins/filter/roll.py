"""Filters of the rolling upgrade (playbooks/tasks/router_drain.yml, router_readmit.yml):
``roll_replicas``, ``roll_drain_plan``, ``roll_worker``, ``roll_in_flight``. Documented for ansible-doc
in the YAML files of the same names beside this one; the logic is plugins/module_utils/roll.py
(tests/test_rollout_roll.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import roll


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "roll_replicas": roll.replicas,
            "roll_drain_plan": roll.drain_plan,
            "roll_worker": roll.listed,
            "roll_in_flight": roll.in_flight,
        }
