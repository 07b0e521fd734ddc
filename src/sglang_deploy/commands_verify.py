"""`sglang-deploy verify`: playbooks/verify.yml (every layer), its results fetched to the controller
(the role's verify_fetch_dir), then report.md + one PNG chart per host (verify_report.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from . import host_history
from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream, print_json, run_paths
from .report import INCONCLUSIVE_RC, inconclusive_hosts, ungated_hosts, verdict_rc
from .runner import new_ident
from .verify_report import build_report, collect

PLAYBOOK = "playbooks/verify.yml"


def run(args: argparse.Namespace) -> int:
    request = make_request(args, args.playbook, tags=args.tags, skip_tags=args.skip_tags)
    if request is None:
        return BAD_INPUT_RC
    ident = new_ident()
    out_dir: Path = (
        args.report_dir.expanduser().resolve()
        if args.report_dir
        else request.artifacts_dir / "verify" / ident
    )
    fetch_dir = out_dir / "fetched"
    fetch_dir.mkdir(parents=True, exist_ok=True)
    # ours first: a later -e verify_fetch_dir=... of the user's would win and the report finds nothing
    ours: dict[str, object] = {"verify_fetch_dir": str(fetch_dir)}
    if getattr(args, "calibrate", False):
        ours["verify_calibrate"] = True  # the A/A calibration (issue 34 item 4)
    extra = (json.dumps(ours), *request.extra_vars)
    request = replace(request, ident=ident, extra_vars=extra)
    result = execute(request, args, "verify")
    summary = result.summary
    failed: dict[str, str] = {}
    for task in summary.get("failed_tasks", []):
        first = task["message"].splitlines()[0] if task["message"] else task["outcome"]
        failed.setdefault(task["host"], f"{task['task']}: {first}")
    rc = verdict_rc(result.rc, summary)
    meta = {
        "run_id": ident,
        "playbook": request.playbook,
        "inventory": str(request.inventory),
        "rc": rc,
        "finished": summary.get("finished", ""),
        "history_dir": str(request.artifacts_dir / host_history.HISTORY_DIR),
    }
    # every gated run's figures into the host's history (the alarm that status and the report show)
    found = {name: entry.data for name, entry in collect(fetch_dir).items()}
    host_history.record_runs(Path(meta["history_dir"]), found, ident)
    built = build_report(fetch_dir, out_dir, meta, sorted(summary.get("hosts", {})), failed)
    if args.json:
        ungated = ungated_hosts(summary)
        paths = run_paths(result)
        inconclusive = inconclusive_hosts(summary)
        print_json(
            {
                "schema": 1, "command": "verify", "rc": rc, "ungated": ungated,
                "inconclusive": inconclusive, **built, **paths,
            }
        )  # fmt: skip
    else:
        stream = out_stream(args)
        for host, info in built["hosts"].items():
            chart = built["charts"].get(host, "no chart (no benchmark in this run)")
            print(f"verify {host}: {info['status']}, gate {info['gate'] or '-'}; chart: {chart}", file=stream)
        for host, why in built["missing"].items():
            print(f"verify {host}: no results fetched: {why}", file=stream)
        print(f"report: {built['report']}", file=stream, flush=True)
        if rc == INCONCLUSIVE_RC:
            print(
                f"verify: inconclusive on {', '.join(inconclusive_hosts(summary))} (the same-window pair "
                f"neither passed nor failed at its cap of repetitions; never passed): exit {rc}",
                file=stream,
                flush=True,
            )
        elif rc != result.rc:
            print(
                f"verify: ungated on {', '.join(ungated_hosts(summary))} (no comparable baseline, none "
                f"recorded): exit {rc}",
                file=stream,
                flush=True,
            )
    return rc
