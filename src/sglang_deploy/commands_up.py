"""`sglang-deploy up`: run site.yml with live progress and write the run reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .paths import default_artifacts, default_inventory, repo_root
from .progress import Progress
from .runner import RunRequest, run_playbook

UNREACHABLE_RC = 4  # ansible-playbook: some hosts were unreachable


def _resolve(path: Path | None) -> Path | None:
    return None if path is None else path.expanduser().resolve()


def run(args: argparse.Namespace) -> int:
    root = repo_root()
    inventory = _resolve(args.inventory) or default_inventory(root)
    if not inventory.exists():
        print(f"inventory {inventory} does not exist", file=sys.stderr)
        return 5
    for vault_file in args.vault_password_file:
        if not vault_file.expanduser().is_file():
            print(f"vault password file {vault_file} does not exist", file=sys.stderr)
            return 5
    request = RunRequest(
        project_dir=root,
        playbook=args.playbook,
        inventory=inventory,
        artifacts_dir=_resolve(args.artifacts) or default_artifacts(root),
        limit=args.limit,
        tags=args.tags,
        skip_tags=args.skip_tags,
        check=args.check,
        diff=args.diff,
        extra_vars=tuple(args.extra_vars),
        vault_password_files=tuple(args.vault_password_file),
        verbosity=args.verbose,
    )
    live = {"auto": None, "live": True, "plain": False}[args.progress]
    progress = Progress(sys.stdout, live=live, verbose=args.verbose > 0)
    print(f"sglang-deploy up: {args.playbook} on {inventory}", flush=True)
    with progress:
        result = run_playbook(request, on_event=progress)
    progress.final(result.summary)
    if result.rc == UNREACHABLE_RC and inventory == default_inventory(root):
        print("hint: is the lab host up? `sglang-deploy lab status` / `sglang-deploy lab create`")
    print(f"summary: {result.summary_path}  junit: {result.junit_path}  artifacts: {result.artifact_dir}")
    return result.rc
