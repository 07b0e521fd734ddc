"""`sglang-deploy autotune`: playbooks/autotune.yml (extra vars passed through with -e)."""

from __future__ import annotations

import argparse
import sys

from .commands_run import BAD_INPUT_RC, execute, make_request

PLAYBOOK = "playbooks/autotune.yml"


def run(args: argparse.Namespace) -> int:
    request = make_request(args, PLAYBOOK, tags=args.tags, skip_tags=args.skip_tags, check=args.check)
    if request is None:
        return BAD_INPUT_RC
    if not (request.project_dir / PLAYBOOK).is_file():
        print(f"{PLAYBOOK} does not exist in {request.project_dir}", file=sys.stderr)
        return BAD_INPUT_RC
    return execute(request, args, "autotune").rc
