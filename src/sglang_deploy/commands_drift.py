"""`sglang-deploy drift`: site.yml in check + diff mode; every task that would change a host is drift.

Exit status: 0 no drift, 2 drift found, 1 error (a task failed, a host was unreachable, the playbook
did not run). The drifted tasks are listed per host with a summary of their diff; junit.xml carries
each as a failure of type "drift"; `--json` prints the same as one JSON document."""

from __future__ import annotations

import argparse
import re
from typing import Any

from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream, print_json, run_paths
from .runner import RunResult

# The router's worker drift (role sglang_router, tasks/workers.yml): each report task's message, one line
# per worker, e.g. "router r1: worker http://10.0.0.11:30000 registered but not in the inventory".
ROUTER_DRIFT = re.compile(
    r"router \S+: (?:worker \S+ (?:registered but .+|\(\S+\) missing: .+)|not answering on .+)"
)

NO_DRIFT_RC = 0
ERROR_RC = 1
DRIFT_RC = 2


def drift_report(summary: dict[str, Any], playbook_rc: int) -> dict[str, Any]:
    """Per host: drifted tasks (changed in check mode) and failed ones; the overall verdict."""
    hosts: dict[str, dict[str, Any]] = {}
    for name, counts in summary.get("hosts", {}).items():
        hosts[name] = {"status": "clean", "counts": counts, "drifted": [], "failed": []}
    for task in summary.get("changed_tasks", []):
        entry = hosts.setdefault(task["host"], {"status": "clean", "counts": {}, "drifted": [], "failed": []})
        entry["drifted"].append({k: task[k] for k in ("task", "role", "action", "detail")})
    for task in summary.get("failed_tasks", []):
        entry = hosts.setdefault(task["host"], {"status": "clean", "counts": {}, "drifted": [], "failed": []})
        entry["failed"].append({k: task[k] for k in ("task", "role", "action", "outcome", "message")})
    for entry in hosts.values():
        counts = entry["counts"]
        if counts.get("unreachable"):
            entry["status"] = "unreachable"
        elif entry["failed"] or counts.get("failed"):
            entry["status"] = "failed"
        elif entry["drifted"]:
            entry["status"] = "drift"
    router = [
        match.group(0)
        for entry in hosts.values()
        for task in entry["drifted"]
        if task.get("role") == "sglang_router"
        for match in ROUTER_DRIFT.finditer(task.get("detail") or "")
    ]
    drifted = sum(len(e["drifted"]) for e in hosts.values())
    errored = playbook_rc != 0 or any(e["status"] in ("failed", "unreachable") for e in hosts.values())
    if errored:
        result, rc = "error", ERROR_RC
    elif drifted:
        result, rc = "drift", DRIFT_RC
    else:
        result, rc = "clean", NO_DRIFT_RC
    return {
        "schema": 1,
        "command": "drift",
        "result": result,
        "rc": rc,
        "playbook_rc": playbook_rc,
        "drifted_tasks": drifted,
        "router_drift": router,
        "hosts": dict(sorted(hosts.items())),
    }


def render_text(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for host, entry in report["hosts"].items():
        if entry["drifted"]:
            lines.append(f"DRIFT {host}: {len(entry['drifted'])} task(s) would change the host")
            for task in entry["drifted"]:
                label = f"{task['role']} : {task['task']}" if task["role"] else task["task"]
                lines.append(f"  - {label}")
                lines += [f"      {line}" for line in (task["detail"] or "(no diff reported)").splitlines()]
        for task in entry["failed"]:
            label = f"{task['role']} : {task['task']}" if task["role"] else task["task"]
            first = task["message"].splitlines()[0] if task["message"] else task["outcome"]
            lines.append(f"ERROR {host}: {label}: {first}")
        if entry["status"] == "clean":
            lines.append(f"no drift: {host}")
    lines += [f"ROUTER DRIFT {line}" for line in report.get("router_drift", [])]
    hosts = report["hosts"]
    drifted_hosts = sum(1 for e in hosts.values() if e["drifted"])
    verdict = {
        "clean": "no drift",
        "drift": f"drift on {drifted_hosts} of {len(hosts)} host(s), {report['drifted_tasks']} task(s)",
        "error": f"error (ansible-playbook rc={report['playbook_rc']}): the check did not complete",
    }[report["result"]]
    lines.append(f"drift: {verdict} (exit {report['rc']})")
    return lines


def run(args: argparse.Namespace) -> int:
    request = make_request(
        args,
        args.playbook,
        tags=args.tags,
        skip_tags=args.skip_tags,
        check=True,
        diff=True,
        changed_is_failure=True,
    )
    if request is None:
        return BAD_INPUT_RC
    result: RunResult = execute(request, args, "drift (check + diff)")
    report = drift_report(result.summary, result.rc)
    if args.json:
        print_json({**report, **run_paths(result)})
    else:
        stream = out_stream(args)
        for line in render_text(report):
            print(line, file=stream)
        stream.flush()
    return int(report["rc"])
