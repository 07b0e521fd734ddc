"""`sglang-deploy drift` names the router's worker drift (role sglang_router, tasks/workers.yml): the
report tasks' messages, as change_summary renders a looped debug result, become ROUTER DRIFT lines."""

from __future__ import annotations

from typing import Any

from sglang_deploy.commands_drift import drift_report, render_text
from sglang_deploy.diffs import change_summary

EXTRA = "router r1: worker http://10.0.0.99:30000 registered but not in the inventory"
MISSING = (
    "router r1: worker http://10.0.0.12:30000 (gpu-node-02) missing: "
    "in the inventory and verified, not registered"
)


def looped_debug(messages: list[str]) -> dict[str, Any]:
    """The result of a looped ansible.builtin.debug task with changed_when: true (as the callback sees it)."""
    return {
        "changed": True,
        "msg": "All items completed",
        "results": [
            {"changed": True, "msg": m, "item": f"i{n}", "_ansible_item_label": f"i{n}"}
            for n, m in enumerate(messages)
        ],
    }


def summary(*tasks: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "hosts": {"r1": {"ok": 9, "changed": len(tasks), "failed": 0, "unreachable": 0}},
        "changed_tasks": [
            {"host": "r1", "task": name, "role": role, "action": "debug", "detail": change_summary(res)}
            for name, role, res in tasks
        ],
        "failed_tasks": [],
    }


def test_router_worker_drift_is_named() -> None:
    report = drift_report(
        summary(
            ("Report the workers registered but not wanted (drift)", "sglang_router", looped_debug([EXTRA])),
            ("Report the workers missing from the router (drift)", "sglang_router", looped_debug([MISSING])),
        ),
        0,
    )
    assert report["rc"] == 2
    assert report["router_drift"] == [EXTRA, MISSING]
    text = render_text(report)
    assert f"ROUTER DRIFT {EXTRA}" in text
    assert f"ROUTER DRIFT {MISSING}" in text


def test_other_roles_messages_are_not_router_drift() -> None:
    report = drift_report(summary(("Some task", "sglang_service", looped_debug([EXTRA]))), 0)
    assert report["rc"] == 2
    assert report["router_drift"] == []
    assert not any(line.startswith("ROUTER DRIFT") for line in render_text(report))


def test_no_drift_no_router_lines() -> None:
    report = drift_report(summary(), 0)
    assert report["rc"] == 0
    assert report["router_drift"] == []


def test_the_router_workers_module_s_report_is_named() -> None:
    """Role sglang_router's workers entry point reports through module sglang.deploy.router_workers: in
    check mode its changed result carries the report as a list in msg (one line per server or worker)."""
    note = "router r1: gpu-node-03 (http://10.0.0.13:30000) is not registered: verify status 'failed'"
    result = {"changed": True, "msg": [note, MISSING, EXTRA], "missing": [], "removed": []}
    report = drift_report(
        summary(("Make the router's worker list equal to the verified servers", "sglang_router", result)), 0
    )
    assert report["rc"] == 2
    assert report["router_drift"] == [MISSING, EXTRA]  # the not-registered note is no drift
