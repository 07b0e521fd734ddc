"""`sglang-deploy lab create|destroy|status|demo` (destroy --fleet, demo --fleet: commands_demo_fleet)."""

from __future__ import annotations

import argparse
import sys

from docker.errors import DockerException

from .lab import Lab, LabError
from .paths import repo_root


def run(args: argparse.Namespace) -> int:
    def log(message: str) -> None:
        print(message, flush=True)

    if args.action == "demo" or (args.action == "destroy" and args.fleet):
        from .commands_demo import run as demo  # noqa: PLC0415 (ansible-runner only for the demo)
        from .commands_demo_fleet import destroy  # noqa: PLC0415

        try:
            return destroy(repo_root(), args.name) if args.action == "destroy" else demo(args)
        except (LabError, DockerException) as exc:
            print(f"lab {args.action} failed: {exc}", file=sys.stderr)
            return 1
    try:
        lab = Lab(repo_root(), name=args.name, image=args.image)
        if args.action == "create":
            print(lab.create(timeout=args.timeout, log=log).line())
            return 0
        if args.action == "destroy":
            lab.destroy(log=log)
            return 0
        status = lab.status()
        print(status.line())
        return 0 if status.state == "running" else 1
    except (LabError, DockerException) as exc:
        print(f"lab {args.action} failed: {exc}", file=sys.stderr)
        return 1
