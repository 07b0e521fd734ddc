"""Jinja test ``sglang.deploy.api_key``: the one API key rule (the service's and the router's key).

Documented for ansible-doc in ``api_key.yml`` beside this file; the logic is
plugins/module_utils/launch_spec.py (``valid_api_key``; tests/test_launch_spec.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.launch_spec import valid_api_key


class TestModule:
    """Ansible entry point."""

    def tests(self) -> dict[str, Callable[..., Any]]:
        return {"api_key": valid_api_key}
