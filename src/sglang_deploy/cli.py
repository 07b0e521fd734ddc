"""Command line parsing only. Each subcommand names its handler as "module:function" (imported lazily,
so `sglang-deploy up` never imports the docker SDK); a handler takes the parsed namespace and returns
the exit status. To add a subcommand: write `_add_<name>(subparsers)` below and a handler module."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .options import add_run_options, parse_percent, parse_serial

Handler = Callable[[argparse.Namespace], int]


def _add_tags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--tags", help="only run plays and tasks tagged with these values (comma separated)")
    p.add_argument("--skip-tags", help="skip plays and tasks tagged with these values (comma separated)")


def _add_up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "up",
        help="deploy site.yml (default onto the lab host) with live progress, summary.json and junit.xml",
        description="Run site.yml through ansible-runner. Exits with ansible-playbook's status "
        "(0 ok, 2 failed hosts, 4 unreachable hosts, ...). With --serial: a rolling deployment, the "
        "whole site.yml on one batch of hosts after the other; more than --max-fail-percent failed "
        "hosts in a batch (the verify gate included) stops the roll before the next batch.",
    )
    add_run_options(p, playbook="site.yml", json_output=False)
    _add_tags(p)
    p.add_argument(
        "-C", "--check", action="store_true", help="dry run: change nothing, report what would change"
    )
    p.add_argument("-D", "--diff", action="store_true", help="show differences of changed files/templates")
    p.add_argument(
        "--serial",
        type=parse_serial,
        metavar="N|N%",
        help="roll in batches of N hosts (or N%% of them), in inventory order (default: all at once)",
    )
    p.add_argument(
        "--max-fail-percent",
        type=parse_percent,
        metavar="P",
        help="stop when more than P%% of a batch failed (default with --serial: 0, any failure stops); "
        "without --serial: the plays' max_fail_percentage",
    )
    p.set_defaults(handler="sglang_deploy.commands_up:run")


def _add_drift(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "drift",
        help="site.yml in check + diff mode: list what would change (exit 0 none, 2 drift, 1 error)",
        description="Run site.yml with --check --diff; every task that would change a host is drift. "
        "Lists the drifted tasks per host with a summary of their diff; junit.xml has each as a "
        "failure. Exit status: 0 no drift, 2 drift found, 1 error (a failed task, an unreachable "
        "host, a playbook that did not run).",
    )
    add_run_options(p, playbook="site.yml", json_output=True)
    _add_tags(p)
    p.set_defaults(handler="sglang_deploy.commands_drift:run")


def _add_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="run every verify layer; fetch the results; write report.md and a throughput chart",
        description="Run playbooks/verify.yml (layers 1-9), fetch production_v2.md, verify-results.json "
        "and the benchmark logs of each host, render report.md and throughput-<host>.png (output tok/s "
        "against concurrency, this run vs the baseline). Exits with ansible-playbook's status.",
    )
    add_run_options(p, playbook="playbooks/verify.yml", json_output=True)
    _add_tags(p)
    p.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="where the report, charts and fetched files go (default: <artifacts>/verify/<run id>)",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="A/A calibration: benchmark the serving release against itself as both arms of the "
        "same-window pair and record the host's paired spread (verify_calibration_file); the gate's "
        "repetitions per arm then come from it",
    )
    p.set_defaults(handler="sglang_deploy.commands_verify:run")


def _add_releases(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "releases",
        help="list each host's stack releases, their receipts and which one is current",
        description="Read each host's release directory (changes nothing): releases newest first, "
        "complete or not, their receipt (installed at, versions, checks, patches) and `current`.",
    )
    add_run_options(p, playbook=None, json_output=True)
    p.set_defaults(handler="sglang_deploy.commands_releases:run")


def _add_status(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "status",
        help="per replica: router membership and health, unit, release, last verdict, /metrics figures",
        description="Run playbooks/status.yml (read-only: no restart, no request that generates) and "
        "print one row per replica: its membership and health in every router (sglang_routers), the "
        "unit, the release, the last verify verdict and, from SGLang's /metrics (--enable-metrics), "
        "running and queued requests, generation throughput and the speculative accept length (n/a "
        "with why). Writes sglang_prometheus_targets_file (file_sd JSON) when the inventory sets it. "
        "Exit status: 0 every replica healthy and in its router(s), 7 a replica down or out of a "
        "router (or a router not answering), else ansible-playbook's (2 failed, 4 unreachable).",
    )
    add_run_options(p, playbook=None, json_output=True)
    p.set_defaults(handler="sglang_deploy.commands_status:run")


def _add_rollback(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "rollback",
        help="switch current back to the previous release (or --to RELEASE) and restart the service",
        description="Move each host's `current` back to its previous complete release (the newest "
        "one before current), or to --to RELEASE, atomically, and restart the service through the "
        "service role. A release that does not exist, is incomplete or failed its checks is refused "
        "with the allowed ones named. Note: the next `up` moves current to the release of the pins.",
    )
    add_run_options(p, playbook=None, json_output=True)
    p.add_argument("--to", metavar="RELEASE", help="the release id to switch to (default: the previous one)")
    p.set_defaults(handler="sglang_deploy.commands_rollback:run")


def _add_autotune(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "autotune",
        help="run playbooks/autotune.yml (pass its inputs with -e)",
        description="Run playbooks/autotune.yml through ansible-runner with live progress.",
    )
    add_run_options(p, playbook=None, json_output=False)
    _add_tags(p)
    p.add_argument(
        "-C", "--check", action="store_true", help="dry run: change nothing, report what would change"
    )
    p.set_defaults(handler="sglang_deploy.commands_autotune:run")


LAB_NAME = "sglang-lab"
LAB_IMAGE = "sglang-deploy/debian12:latest"


def _add_lab_options(p: argparse.ArgumentParser, *, defaults: bool) -> None:
    """--name/--image, accepted before the action (`lab --name x create`) and after it (`lab create
    --name x`). Only the `lab` level sets defaults: on the action level they are SUPPRESSed, so an
    option given before the action is not overwritten by the action parser's default."""
    p.add_argument(
        "--name",
        default=LAB_NAME if defaults else argparse.SUPPRESS,
        help=f"container name (default: {LAB_NAME})",
    )
    p.add_argument(
        "--image",
        default=LAB_IMAGE if defaults else argparse.SUPPRESS,
        help=f"image (default: {LAB_IMAGE}, built by molecule/images/build.sh)",
    )


def _add_lab(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lab",
        help="manage the local lab host (a systemd container)",
        description="The lab host of inventory/lab.yml: a local systemd container.",
    )
    _add_lab_options(p, defaults=True)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create and start the lab container (no-op when running)")
    create.add_argument(
        "--timeout", type=float, default=120, help="seconds to wait for systemd (default: 120)"
    )
    destroy = actions.add_parser("destroy", help="remove the lab container (--fleet: the demo's fleet)")
    destroy.add_argument(
        "--fleet",
        action="store_true",
        help="remove the fleet of `lab demo --fleet` instead: <name>-fleet-router, <name>-fleet-1..2, their "
        "network and the replicas' shared release store (docker volumes)",
    )
    status = actions.add_parser(
        "status", help="show the lab container and systemd state (exit 1 when not running)"
    )
    demo = actions.add_parser(
        "demo",
        help="the whole job on the lab host, its server a named TEST DOUBLE of SGLang (after `make up`)",
        description="On the lab host (converged first if needed): the test double sglang-protocol-double "
        "(SGLang's protocol, simulated tokens, no GPU; never SGLang) behind the real unit, `up` (a baseline "
        "recorded), `verify` (the gate passes; report.md and its chart), then a release made 30%% slower "
        "that `verify` fails at the gate and rolls back. Exit 0 when every step did what it should (the "
        "failed gate and the rollback included), 1 otherwise. With --fleet: a router host running SGLang's "
        "own router (sglang-router) in front of two replica hosts, each the test double behind the real "
        "unit; `up` of the fleet, then an `up --serial 1` roll behind the router while client threads send "
        "requests through it, with a live count of those sent and failed; exit 0 only when no request failed "
        "and every step did what it shows.",
    )
    demo.add_argument(
        "--fleet",
        action="store_true",
        help="the fleet demo: containers <name>-fleet-router and <name>-fleet-1..2 (made, or reused when "
        "running), a rolling upgrade behind the router under a live load (`lab destroy --fleet` removes it)",
    )
    demo.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="where the demo's inventory, runs and reports go (default: <repo>/artifacts; the demo "
        "writes under DIR/demo/<name>)",
    )
    demo.add_argument(
        "--progress",
        choices=("auto", "live", "plain"),
        default="auto",
        help="progress display of each run: a live table on a terminal, plain lines otherwise",
    )
    demo.add_argument("-v", "--verbose", action="count", default=0, help="ansible verbosity (-v ... -vvvv)")
    for action in (create, destroy, status, demo):
        _add_lab_options(action, defaults=False)
    p.set_defaults(handler="sglang_deploy.commands_lab:run")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-deploy",
        description="Deploy a tuned SGLang serving stack with Ansible (a thin ansible-runner front end).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        _add_lab,
        _add_up,
        _add_drift,
        _add_verify,
        _add_releases,
        _add_status,
        _add_rollback,
        _add_autotune,
    ):
        add(sub)
    return parser


def resolve_handler(spec: str) -> Handler:
    module_name, _sep, function = spec.partition(":")
    handler: Handler = getattr(importlib.import_module(module_name), function)
    return handler


def _detach_lost_output() -> None:
    """stdout/stderr that can no longer be written (the terminal closed: SIGHUP; the reader of a
    pipe gone) point at /dev/null, so the exit status stays the run's, not the 120 of a failed
    flush at interpreter exit."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return resolve_handler(args.handler)(args)
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):
            print("interrupted", file=sys.stderr)
        return 130
    finally:
        _detach_lost_output()


if __name__ == "__main__":
    sys.exit(main())
