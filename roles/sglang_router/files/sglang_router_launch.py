#!/usr/bin/env python3
# Managed by Ansible (role sglang_router): local edits are overwritten.
"""sglang-deploy's router launcher: ``python -m sglang_router.launch_router ARGS...`` with the client
API key read from a file instead of the command line.

usage: python sglang_router_launch.py --api-key-credential NAME [ROUTER ARGS...]

sglang-router 0.3.2 takes its key only as ``--api-key KEY`` (argv, visible in /proc/<pid>/cmdline and
``systemctl show``). systemd hands the unit the key file with ``LoadCredential=NAME:PATH`` (a private
copy under ``$CREDENTIALS_DIRECTORY``, readable by the service only); this launcher reads
``$CREDENTIALS_DIRECTORY/NAME``, parses the remaining argv with the router's own parser
(``sglang_router.launch_router.parse_router_args``: the same flags, defaults and checks as
``python -m sglang_router.launch_router``) and sets ``RouterArgs.api_key`` before it calls the
router's own ``launch_router`` - so the key is on no command line, in no environment and in no unit
file. ``--api-key`` on this launcher's own argv is refused. An empty or missing credential is an error
(the unit names the credential only when a key is configured).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def read_key(name: str) -> str:
    folder = os.environ.get("CREDENTIALS_DIRECTORY", "")
    if not folder:
        sys.exit(
            "sglang_router_launch: $CREDENTIALS_DIRECTORY is not set (LoadCredential= missing from the unit)"
        )
    key = (Path(folder) / name).read_text(encoding="utf-8").strip()
    if not key:
        sys.exit(f"sglang_router_launch: the credential {name} is empty")
    return key


def split_argv(argv: list[str]) -> tuple[str, list[str]]:
    """(credential name or '', the router's argv); --api-key on the command line is refused."""
    credential = ""
    rest: list[str] = []
    items = iter(argv)
    for arg in items:
        if arg == "--api-key-credential":
            credential = next(items, "")
        elif arg.startswith("--api-key-credential="):
            credential = arg.split("=", 1)[1]
        elif arg == "--api-key" or arg.startswith("--api-key="):
            sys.exit(
                "sglang_router_launch: --api-key on the command line is refused (use --api-key-credential)"
            )
        else:
            rest.append(arg)
    return credential, rest


def main(argv: list[str]) -> None:
    credential, rest = split_argv(argv)
    from sglang_router.launch_router import launch_router, parse_router_args  # noqa: PLC0415

    router_args = parse_router_args(rest)
    if credential:
        router_args.api_key = read_key(credential)
    launch_router(router_args)


if __name__ == "__main__":
    main(sys.argv[1:])
