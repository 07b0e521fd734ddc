"""Filters ``sglang.deploy.text_errors`` and ``sglang.deploy.argspec_inputs``: every role's
``tasks/validate.yml`` rejects control characters in all of its inputs (the options of its argument
spec) with them, before any host is changed.

Documented for ansible-doc in ``text_errors.yml`` and ``argspec_inputs.yml`` beside this file; the
logic is plugins/module_utils/text_checks.py (tests/test_validation_text.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.text_checks import argspec_inputs, text_errors


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"text_errors": text_errors, "argspec_inputs": argspec_inputs}
