"""Command line parsing only. Each subcommand names its handler as "module:function" (imported lazily,
so `sglang-deploy up` never imports the docker SDK); a handler takes the parsed namespace and returns
the exit status. To add a subcommand: write `_add_<name>(subparsers)` below and a handler module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__

Handler = Callable[[argparse.Namespace], int]


def _add_up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "up",
        help="deploy site.yml (default onto the lab host) with live progress, summary.json and junit.xml",
        description="Run site.yml through ansible-runner. Exits with ansible-playbook's status "
        "(0 ok, 2 failed hosts, 4 unreachable hosts, ...).",
    )
    p.add_argument(
        "-i", "--inventory", type=Path, help="inventory file or directory (default: inventory/lab.yml)"
    )
    p.add_argument("-l", "--limit", help="further limit selected hosts to a pattern")
    p.add_argument("-t", "--tags", help="only run plays and tasks tagged with these values (comma separated)")
    p.add_argument("--skip-tags", help="skip plays and tasks tagged with these values (comma separated)")
    p.add_argument(
        "-C", "--check", action="store_true", help="dry run: change nothing, report what would change"
    )
    p.add_argument("-D", "--diff", action="store_true", help="show differences of changed files/templates")
    p.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="EXTRA",
        help="key=value, JSON/YAML, or @file (repeatable); inline values never reach the artifacts",
    )
    p.add_argument(
        "--vault-password-file",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="vault password file (repeatable); passed by path, never by value",
    )
    p.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="where runner artifacts, summary.json and junit.xml go (default: <repo>/artifacts)",
    )
    p.add_argument(
        "--playbook",
        default="site.yml",
        help="playbook relative to the repository root (default: site.yml; e.g. playbooks/preflight.yml)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="ansible verbosity (-v ... -vvvv)")
    p.add_argument(
        "--progress",
        choices=("auto", "live", "plain"),
        default="auto",
        help="progress display: a live table on a terminal, plain lines otherwise (default: auto)",
    )
    p.set_defaults(handler="sglang_deploy.commands_up:run")


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
    destroy = actions.add_parser("destroy", help="remove the lab container")
    status = actions.add_parser(
        "status", help="show the lab container and systemd state (exit 1 when not running)"
    )
    for action in (create, destroy, status):
        _add_lab_options(action, defaults=False)
    p.set_defaults(handler="sglang_deploy.commands_lab:run")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-deploy",
        description="Deploy a tuned SGLang serving stack with Ansible (a thin ansible-runner front end).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_add_lab, _add_up):
        add(sub)
    return parser


def resolve_handler(spec: str) -> Handler:
    module_name, _, function = spec.partition(":")
    handler: Handler = getattr(importlib.import_module(module_name), function)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return resolve_handler(args.handler)(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
