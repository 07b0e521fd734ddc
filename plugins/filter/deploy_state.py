"""The deploy_state role's filter ``deploy_state_known_bad``: the combination a run deploys and the
known-bad record equal to it, from the state the run recorded when it took the host lock. Documented for
ansible-doc in deploy_state_known_bad.yml beside this one; the logic is plugins/module_utils/combination.py,
the module sglang.deploy.deploy_state's own (tests/test_deploy_state.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import combination


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"deploy_state_known_bad": combination.known_bad}
