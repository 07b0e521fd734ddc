"""`sglang-deploy rollback [--to RELEASE]`: playbooks/rollback.yml switches `current` back to the
previous complete release (or the named one) atomically and lets the service role restart the unit.
A release that does not exist, is incomplete or failed its checks is refused, naming the allowed ones."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream, print_json, run_paths

PLAYBOOK = "playbooks/rollback.yml"


def host_outcomes(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    data = summary.get("stats_data", {}).get("sglang_rollback", {})
    return dict(sorted(data.items())) if isinstance(data, dict) else {}


def run(args: argparse.Namespace) -> int:
    request = make_request(args, PLAYBOOK)
    if request is None:
        return BAD_INPUT_RC
    if args.to:
        request = replace(
            request, extra_vars=(json.dumps({"sglang_rollback_to": args.to}), *request.extra_vars)
        )
    result = execute(request, args, f"rollback{' --to ' + args.to if args.to else ''}")
    outcomes = host_outcomes(result.summary)
    if args.json:
        print_json(
            {"schema": 1, "command": "rollback", "rc": result.rc, "hosts": outcomes, **run_paths(result)}
        )
    else:
        stream = out_stream(args)
        for host, outcome in outcomes.items():
            print(
                f"rollback {host}: current {outcome.get('from') or '-'} -> {outcome.get('to')}; "
                f"{outcome.get('service')}",
                file=stream,
            )
        for task in result.summary.get("failed_tasks", []):
            print(f"rollback {task['host']} refused/failed: {task['message']}", file=stream)
        stream.flush()
    return result.rc
