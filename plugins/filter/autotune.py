"""Filters ``sglang.deploy.autotune_*`` of the autotune role.

The logic lives in plugins/module_utils/autotune_nccl.py and autotune_preset.py (pure Python, tested by
tests/test_autotune_nccl.py and tests/test_autotune_preset.py on recorded data).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils import autotune_nccl, autotune_preset


def autotune_nccl_choose(
    doc: Mapping[str, Any], floor_pct: float = 5.0, min_gain_pct: float = 2.0, tie_pct: float = 1.0
) -> dict[str, Any]:
    """The measurement document -> the choice (with its rows and Markdown table).

    A choice outside the schema the nccl_env role renders (the host's output is data) is refused.
    """
    result: dict[str, Any] = autotune_nccl.choose(doc, float(floor_pct), float(min_gain_pct), float(tie_pct))
    refused = autotune_nccl.record_errors(result)
    if refused:
        raise AnsibleFilterError(refused)
    result["table"] = autotune_nccl.table(result)
    return result


def autotune_preset_choose(
    results: Sequence[Mapping[str, Any]],
    current: Mapping[str, Any],
    target: int,
    presets: Mapping[str, Any],
    *,
    min_gain_pct: float = 5.0,
    tie_pct: float = 2.0,
    test_numbers: bool = False,
) -> dict[str, Any]:
    """The per-candidate benchmark results -> the choice (with its Markdown table).

    A choice that is not one of the controller's candidates (a preset of ``presets``, an integer
    max-bs) is refused.
    """
    result: dict[str, Any] = autotune_preset.choose(
        results, current, int(target), presets, min_gain_pct=float(min_gain_pct), tie_pct=float(tie_pct)
    )
    refused = autotune_preset.choice_errors(result["choice"], presets)
    if refused:
        raise AnsibleFilterError(refused)
    result["table"] = autotune_preset.table(result, test_numbers=bool(test_numbers))
    return result


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "autotune_nccl_choose": autotune_nccl_choose,
            "autotune_preset_choose": autotune_preset_choose,
        }
