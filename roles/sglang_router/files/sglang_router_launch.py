# Managed by Ansible (role sglang_router): local edits are overwritten.
"""sglang-deploy's router launcher: ``python -m sglang_router.launch_router ARGS...`` with the client
API key and the admin key read from files instead of the command line.

usage: python sglang_router_launch.py [--api-key-credential NAME] [--admin-api-key-credential NAME]
       [ROUTER ARGS...]

sglang-router 0.3.2 takes its key only as ``--api-key KEY`` (argv, visible in /proc/<pid>/cmdline and
``systemctl show``). systemd hands the unit the key file with ``LoadCredential=NAME:PATH`` (a private
copy under ``$CREDENTIALS_DIRECTORY``, readable by the service only); this launcher reads
``$CREDENTIALS_DIRECTORY/NAME``, parses the remaining argv with the router's own parser
(``sglang_router.launch_router.parse_router_args``: the same flags, defaults and checks as
``python -m sglang_router.launch_router``) and sets ``RouterArgs.api_key`` before it calls the
router's own ``launch_router`` - so the key is on no command line, in no environment and in no unit
file. ``--api-key`` on this launcher's own argv is refused. An empty or missing credential is an error
(the unit names the credential only when a key is configured).

The admin key: sglang-router 0.3.2 guards its control plane (``/workers``: list, add, remove) with
``--control-plane-api-keys 'id:name:role:key'`` when one is given (then the client key of
``--api-key`` is answered 401 there, a ``user`` role key 403, and the admin key is 401 on the client
routes); without one, ``--api-key`` guards both. This launcher reads the admin key from the credential
named by ``--admin-api-key-credential`` and sets ``RouterArgs.control_plane_api_keys`` to one ``admin``
entry (id and name ``sglang-deploy``); ``--control-plane-api-keys`` on its own argv is refused.
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


OWN_FLAGS = ("--api-key-credential", "--admin-api-key-credential")
REFUSED = {
    "--api-key": "--api-key-credential",
    "--control-plane-api-keys": "--admin-api-key-credential",
}


def split_argv(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """({own flag: credential name}, the router's argv); a key on the command line is refused."""
    credentials: dict[str, str] = {}
    rest: list[str] = []
    items = iter(argv)
    for arg in items:
        flag, eq, value = arg.partition("=")
        if flag in OWN_FLAGS:
            credentials[flag] = value if eq else next(items, "")
        elif flag in REFUSED:
            sys.exit(f"sglang_router_launch: {flag} on the command line is refused (use {REFUSED[flag]})")
        else:
            rest.append(arg)
    return credentials, rest


def main(argv: list[str]) -> None:
    credentials, rest = split_argv(argv)
    from sglang_router.launch_router import launch_router, parse_router_args  # noqa: PLC0415

    router_args = parse_router_args(rest)
    if credentials.get("--api-key-credential"):
        router_args.api_key = read_key(credentials["--api-key-credential"])
    if credentials.get("--admin-api-key-credential"):
        admin_key = read_key(credentials["--admin-api-key-credential"])
        # RouterArgs' own tuple form (id, name, key, role), as its parser builds it
        router_args.control_plane_api_keys = [("sglang-deploy", "sglang-deploy", admin_key, "admin")]
    launch_router(router_args)


if __name__ == "__main__":
    main(sys.argv[1:])
