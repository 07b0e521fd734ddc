"""What every playbook subcommand shares: the run options (inventory, limit, extra vars, vault files,
artifacts, progress), the checks of those paths, and one run with live progress and the closing lines.

With `--json` the machine-readable result is the only thing on stdout: progress goes to stderr."""

from __future__ import annotations

import argparse
import json
import re
import sys
from contextlib import AbstractContextManager, suppress
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from .history import previous_run
from .paths import default_artifacts, default_inventory, repo_root
from .progress import Progress
from .runner import RunRequest, RunResult, run_playbook

UNREACHABLE_RC = 4  # ansible-playbook: some hosts were unreachable
BAD_INPUT_RC = 5  # the CLI's own: an input path does not exist, a --vault-id is not allowed


def _resolve(path: Path | None) -> Path | None:
    return None if path is None else path.expanduser().resolve()


# a vault id's label: what ansible-vault writes into the file header ($ANSIBLE_VAULT;1.2;AES256;LABEL)
_VAULT_LABEL = re.compile(r"[A-Za-z0-9_.:+-]{1,100}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def vault_id_arg(value: str) -> str:
    """`--vault-id [LABEL@]FILE` checked and with FILE absolute (ansible-playbook runs in the
    repository); ValueError naming the value and what is allowed. `prompt` is refused: the play runs
    without a terminal, nobody could answer."""
    label, sep, source = value.partition("@") if "@" in value else ("", "", value)
    allowed = (
        "allowed: [LABEL@]FILE, LABEL of A-Z a-z 0-9 . _ : + -, FILE an existing password file or script"
    )
    if _CONTROL.search(value) or not source or (sep and not _VAULT_LABEL.fullmatch(label)):
        raise ValueError(f"--vault-id {value!r}: {allowed}")
    if source in ("prompt", "prompt_ask_vault_pass"):
        raise ValueError(f"--vault-id {value!r}: a prompt cannot be answered here (no terminal); {allowed}")
    path = Path(source).expanduser()
    if not path.is_file():
        raise ValueError(f"--vault-id {value!r}: {source} is not a file; {allowed}")
    return f"{label}{sep}{path.resolve()}"


def make_request(args: argparse.Namespace, playbook: str, **overrides: Any) -> RunRequest | None:
    """The run request of the parsed options; None (after saying why on stderr) when an input path
    does not exist."""
    root = repo_root()
    inventory = _resolve(args.inventory) or default_inventory(root)
    if not inventory.exists():
        print(f"inventory {inventory} does not exist", file=sys.stderr)
        return None
    for vault_file in args.vault_password_file:
        if not vault_file.expanduser().is_file():
            print(f"vault password file {vault_file} does not exist", file=sys.stderr)
            return None
    try:
        vault_ids = tuple(vault_id_arg(value) for value in getattr(args, "vault_id", []))
    except ValueError as error:
        print(error, file=sys.stderr)
        return None
    request = RunRequest(
        project_dir=root,
        playbook=playbook,
        inventory=inventory,
        artifacts_dir=_resolve(args.artifacts) or default_artifacts(root),
        limit=args.limit,
        extra_vars=tuple(args.extra_vars),
        vault_password_files=tuple(args.vault_password_file),
        vault_ids=vault_ids,
        verbosity=args.verbose,
    )
    return replace(request, **overrides)


def out_stream(args: argparse.Namespace) -> IO[str]:
    """Where progress goes: stderr when stdout carries the JSON document."""
    return sys.stderr if getattr(args, "json", False) else sys.stdout


def _display_lost() -> AbstractContextManager[None]:
    """Around what only prints: a display that is gone (SIGHUP of a closed terminal, a closed pipe:
    OSError, or rich's SystemExit(1) on a broken pipe) does not change the run's exit status."""
    return suppress(OSError, SystemExit)


def execute(request: RunRequest, args: argparse.Namespace, title: str) -> RunResult:
    """One run with live progress and the closing lines (per host counts, failed tasks, status)."""
    stream = out_stream(args)
    live = {"auto": None, "live": True, "plain": False}[args.progress]
    previous = previous_run(
        request.artifacts_dir.resolve(),
        playbook=request.playbook,
        check=request.check,
        limit=request.limit,
        tags=request.tags,
        skip_tags=request.skip_tags,
    )
    progress = Progress(stream, live=live, verbose=args.verbose > 0, previous=previous, stage=title)
    print(f"sglang-deploy {title}: {request.playbook} on {request.inventory}", file=stream, flush=True)
    progress.__enter__()
    try:
        result = run_playbook(request, on_event=progress)
    finally:
        with _display_lost():
            progress.__exit__(None, None, None)
    with _display_lost():
        progress.final(result.summary)
        if result.rc == UNREACHABLE_RC and request.inventory == default_inventory(request.project_dir):
            print(
                "hint: is the lab host up? `sglang-deploy lab status` / `sglang-deploy lab create`",
                file=stream,
            )
        print(
            f"summary: {result.summary_path}  junit: {result.junit_path}  artifacts: {result.artifact_dir}",
            file=stream,
            flush=True,
        )
    return result


def print_json(data: dict[str, Any]) -> None:
    print(json.dumps(data, indent=2, sort_keys=False), flush=True)


def run_paths(result: RunResult) -> dict[str, str]:
    return {
        "run_id": result.ident,
        "summary": str(result.summary_path),
        "junit": str(result.junit_path),
        "artifacts": str(result.artifact_dir),
    }
