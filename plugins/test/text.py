"""Jinja test ``sglang.deploy.safe_text``: the one string rule of the roles' input checks.

Documented for ansible-doc in ``safe_text.yml`` beside this file; the logic is
plugins/module_utils/text_checks.py (tests/test_validation_text.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.text_checks import safe_text


class TestModule:
    """Ansible entry point."""

    def tests(self) -> dict[str, Callable[..., Any]]:
        return {"safe_text": safe_text}
