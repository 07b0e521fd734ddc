"""Filters ``sglang.deploy.verify_*`` of the verify role (layers 6-9).

The logic lives in plugins/module_utils/verify_gate.py, verify_scrub.py and verify_doc.py (pure Python,
tested by tests/test_verify_gate.py, tests/test_verify_scrub.py, tests/test_verify_doc.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.verify_doc import doc_context
from ansible_collections.sglang.deploy.plugins.module_utils.verify_gate import (
    baseline_record,
    check_accept,
    check_speculation_gain,
    check_startup,
    combine_repetitions,
    failure_lines,
    fingerprint,
    gate,
    gate_outcome,
    gate_table,
    launch_spec_hash,
    pool_levels,
    prompts_per_level,
    records_with,
    select_baseline,
    summarize_level,
    verdict,
)
from ansible_collections.sglang.deploy.plugins.module_utils.verify_scrub import (
    scrub_data,
    scrub_text,
)


def verify_summarize(bench: dict[str, Any], num_prompts: Any) -> list[dict[str, Any]]:
    """The runner's ``{"levels": [{"level": C, "rep": r, "result": {...} | None}]}`` -> one summary
    per level, the median over its repetitions with their spread. ``num_prompts``: the prompts each
    level sent (``{C: n}``, or one integer for every level)."""
    per_level: dict[Any, Any] = num_prompts if isinstance(num_prompts, dict) else {}

    def prompts(level: int) -> int:
        if not per_level:
            return int(num_prompts)
        return int(per_level.get(level, per_level.get(str(level))) or 0)

    rows = [
        summarize_level(int(item["level"]), item.get("result"), prompts(int(item["level"])))
        for item in bench.get("levels", [])
    ]
    combined: list[dict[str, Any]] = combine_repetitions(rows)
    return combined


def verify_runs(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """The runner's per-level records without bench_serving's full result (kept in the JSONL files)."""
    return [{k: v for k, v in item.items() if k != "result"} for item in bench.get("levels", [])]


def verify_select_baseline(
    fp: dict[str, Any],
    *,
    records: Any,
    seed_table: dict[str, Any] | None,
    seed_match: dict[str, Any],
    seed_hardware: str = "",
) -> dict[str, Any]:
    selected: dict[str, Any] = select_baseline(
        fp, records=records, seed_table=seed_table, seed_match=seed_match, seed_hardware=seed_hardware
    )
    return selected


def verify_verdict(results: dict[str, Any], require_gate: bool) -> dict[str, Any]:
    decided: dict[str, Any] = verdict(results, require_gate=bool(require_gate))
    return decided


def verify_failure_lines(results: dict[str, Any], decided: dict[str, Any] | None, service: str) -> list[str]:
    lines: list[str] = failure_lines(results, decided, str(service))
    return lines


def verify_doc_context(inputs: dict[str, Any], secrets: list[str] | str | None = None) -> dict[str, Any]:
    """The production document's context, scrubbed of ``secrets`` (the API key)."""
    scrubbed: dict[str, Any] = scrub_data(doc_context(inputs), secrets)
    return scrubbed


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "verify_summarize": verify_summarize,
            "verify_select_baseline": verify_select_baseline,
            "verify_runs": verify_runs,
            "verify_gate": gate,
            "verify_gate_table": gate_table,
            "verify_pool_levels": pool_levels,
            "verify_baseline_record": baseline_record,
            "verify_records_with": records_with,
            "verify_prompts_per_level": prompts_per_level,
            "verify_fingerprint": fingerprint,
            "verify_launch_spec_hash": launch_spec_hash,
            "verify_gate_outcome": gate_outcome,
            "verify_check_accept": check_accept,
            "verify_check_startup": check_startup,
            "verify_check_speculation_gain": check_speculation_gain,
            "verify_verdict": verify_verdict,
            "verify_failure_lines": verify_failure_lines,
            "verify_doc_context": verify_doc_context,
            "verify_scrub": scrub_data,
            "verify_scrub_text": scrub_text,
        }
