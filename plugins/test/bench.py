"""Jinja tests ``sglang.deploy.bench_levels`` and ``sglang.deploy.bench_prompts``: the benchmark's bounds.

Documented for ansible-doc in ``bench_levels.yml`` and ``bench_prompts.yml`` beside this file; the
logic and the reasons for the bounds are plugins/module_utils/bench_limits.py (tests/test_verify_gate.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.bench_limits import valid_levels, valid_prompts


class TestModule:
    """Ansible entry point."""

    def tests(self) -> dict[str, Callable[..., Any]]:
        return {"bench_levels": valid_levels, "bench_prompts": valid_prompts}
