"""Filters of the preflight role: the nvidia-smi parsers of plugins/module_utils/gpu_facts.py
(pure Python, tested by tests/test_gpu_facts.py). Documented in the YAML sidecars
plugins/filter/preflight_*.yml."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.gpu_facts import (
    parse_query_gpu,
    parse_topology,
    summarize_gpus,
)


class FilterModule:
    """Ansible entry point: the filters of the preflight role."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "preflight_gpu_query": parse_query_gpu,
            "preflight_gpu_summary": summarize_gpus,
            "preflight_gpu_topology": parse_topology,
        }
