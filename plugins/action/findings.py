# Copyright: sglang-deploy contributors
"""Action plugin sglang.deploy.findings: a decider's answer judged in one task (documented in
plugins/modules/findings.py): every error fails the task at once, every warning is a warning of the
task, the answer is the task's result (``register``). Controller side; no host is contacted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped]


def judge(decided: Any, what: str = "", errors_as_warnings: str = "") -> dict[str, Any]:
    """The task result for ``decided`` (a mapping with the lists ``errors`` and, optionally,
    ``warnings``): failed with every error in one message, or ok with the warnings (each error too,
    marked ``WARNING (<errors_as_warnings>): ``, when that reason is given)."""
    if not isinstance(decided, Mapping) or not isinstance(decided.get("errors"), list):
        return {
            "failed": True,
            "msg": f"findings: decided must be a mapping with a list `errors`, got {decided!r}",
        }
    errors = [str(e) for e in decided["errors"]]
    warnings = [str(w) for w in decided.get("warnings") or []]
    result: dict[str, Any] = {"changed": False, "decided": dict(decided)}
    if errors and not errors_as_warnings:
        joined = " | ".join(errors)
        return {**result, "failed": True, "errors": errors, "msg": f"{what}: {joined}" if what else joined}
    warnings += [f"WARNING ({errors_as_warnings}): {e}" for e in errors]
    if warnings:
        result["warnings"] = warnings
    if isinstance(decided.get("summary"), str) and decided["summary"]:
        # what the decider concluded, printed like an assert's success_msg (without -v too)
        result.update(msg=decided["summary"], _ansible_verbose_always=True)
    return result


class ActionModule(ActionBase):  # type: ignore[misc]
    """Fails on a decider's errors, warns its warnings, returns its answer."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("decided", "what", "errors_as_warnings"))
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = self._task.args
        result.update(
            judge(args.get("decided"), str(args.get("what") or ""), str(args.get("errors_as_warnings") or ""))
        )
        return result
