"""Jinja tests ``sglang.deploy.host`` and ``sglang.deploy.port``: the one host rule and the one port rule.

Documented for ansible-doc in ``host.yml`` and ``port.yml`` beside this file; the logic is
plugins/module_utils/convert.py (``valid_host``, ``valid_port``), which the launch spec and the
multi-node plan call too (tests/test_validation_rules.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import valid_host, valid_port


class TestModule:
    """Ansible entry point."""

    def tests(self) -> dict[str, Callable[..., Any]]:
        return {"host": valid_host, "port": valid_port}
