"""`sglang-deploy up`: run site.yml with live progress and write the run reports; with --serial, a
rolling deployment batch by batch (rollout.py)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream
from .report import up_closing, verdict_rc
from .rollout import Rollout, fleet_hosts, fleet_replicas
from .runner import RunRequest, RunResult


def _max_fail_extra(percent: float) -> tuple[str, ...]:
    """The plays of site.yml read sglang_max_fail_percentage (default 100: Ansible's own behaviour)."""
    return (json.dumps({"sglang_max_fail_percentage": percent}),)


def inventory_arg(inventory: Path) -> str:
    """The inventory as the next commands should name it: relative to the current directory when it
    is below it (`inventory/lab.yml` for `make up`), else absolute."""
    try:
        return (
            os.path.relpath(inventory, Path.cwd()) if inventory.is_relative_to(Path.cwd()) else str(inventory)
        )
    except ValueError:
        return str(inventory)


def print_closing(result: RunResult, request: RunRequest, args: argparse.Namespace) -> None:
    """After a successful, real (not check mode) run: what was deployed where, what could not be done
    here and the next commands (report.up_closing, from the run's facts)."""
    if result.rc != 0 or request.check:
        return
    stream = out_stream(args)
    console = Console(file=stream, highlight=False, no_color=not stream.isatty(), soft_wrap=True)
    try:
        for text, style in up_closing(result.summary, inventory_arg(request.inventory)):
            console.print(text, style=style, markup=False, highlight=False)
    except (OSError, SystemExit):  # the display is gone: the run's status stands
        return


def run(args: argparse.Namespace) -> int:
    request = make_request(
        args, args.playbook, tags=args.tags, skip_tags=args.skip_tags, check=args.check, diff=args.diff
    )
    if request is None:
        return BAD_INPUT_RC
    if args.serial is None and args.max_fail_percent is None:
        result = execute(request, args, "up")
        print_closing(result, request, args)
        return verdict_rc(result.rc, result.summary)
    percent = 0.0 if args.max_fail_percent is None else float(args.max_fail_percent)
    # the option first: an explicit -e sglang_max_fail_percentage=... (later) wins
    request = replace(request, extra_vars=(*_max_fail_extra(percent), *request.extra_vars))
    if args.serial is None:
        result = execute(request, args, "up")
        print_closing(result, request, args)
        return verdict_rc(result.rc, result.summary)
    return roll(request, args, percent)


def roll(request: RunRequest, args: argparse.Namespace, max_fail_percent: float) -> int:
    hosts = fleet_hosts(request.inventory, request.limit, (request.project_dir / request.playbook).parent)
    if not hosts:
        print(
            f"no host of the inventory {request.inventory} matches (limit: {request.limit})", file=sys.stderr
        )
        return 1
    playbook_dir = (request.project_dir / request.playbook).parent
    rollout = Rollout(
        args.serial,
        max_fail_percent,
        hosts,
        replica_of=fleet_replicas(request.inventory, hosts, playbook_dir),
    )
    stop_rc = 0
    plan = rollout.plan()
    # --serial counts replicas (a multi-node replica rolls whole); one host = one replica by default
    replicas = rollout.replicas()
    in_replicas = f" ({replicas} replicas)" if replicas != len(hosts) else ""
    print(
        f"sglang-deploy up: rolling over {len(hosts)} host(s){in_replicas} in {len(plan)} batch(es) of "
        f"--serial {args.serial}, --max-fail-percent {rollout.max_fail_percent:g}",
        flush=True,
    )
    for index, batch in enumerate(plan, start=1):
        print(f"== batch {index}/{len(plan)}: {', '.join(batch)}", flush=True)
        result = execute(replace(request, limit=",".join(batch)), args, f"up (batch {index}/{len(plan)})")
        if not rollout.record(batch, result.ident, result.rc, result.summary) or result.stop_signal:
            if result.stop_signal:  # SIGINT/SIGTERM/SIGHUP: no later batch starts
                rollout.stopped = rollout.stopped or f"stopped by {signal.Signals(result.stop_signal).name}"
                stop_rc = result.rc
            break
    report = rollout.report()
    path = request.artifacts_dir / "rollout.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if rollout.stopped:
        print(f"ROLL STOPPED: {rollout.stopped}", flush=True)
        print(f"not started (left as they were): {', '.join(rollout.not_started()) or '-'}", flush=True)
    for number, batch_run in enumerate(report["batches"], start=1):
        failed = ", ".join(batch_run["failed"]) or "-"
        hosts_text = ", ".join(batch_run["hosts"])
        print(f"batch {number}: {hosts_text}  rc={batch_run['rc']}  failed: {failed}", flush=True)
    print(f"rollout: {path}", flush=True)
    return stop_rc or rollout.rc()
