"""The options shared by the subcommands that run a playbook, and the argparse types of `up`'s
rolling options. Light imports only: parsing the command line loads neither ansible nor docker."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path

_SERIAL = re.compile(r"^([1-9][0-9]*)(%?)$")


def add_run_options(p: argparse.ArgumentParser, *, playbook: str | None, json_output: bool) -> None:
    """Options of a subcommand that runs a playbook. playbook: the default of --playbook (None: the
    subcommand's playbook is fixed, no option)."""
    p.add_argument(
        "-i", "--inventory", type=Path, help="inventory file or directory (default: inventory/lab.yml)"
    )
    p.add_argument("-l", "--limit", help="further limit selected hosts to a pattern")
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
        "--vault-id",
        action="append",
        default=[],
        metavar="[LABEL@]FILE",
        help="vault identity: a password file or script, optionally labelled (repeatable); passed to "
        "ansible-playbook by path, and used to learn the secrets to mask",
    )
    p.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="where runner artifacts, summary.json and junit.xml go (default: <repo>/artifacts)",
    )
    if playbook is not None:
        p.add_argument(
            "--playbook",
            default=playbook,
            help=f"playbook relative to the repository root (default: {playbook})",
        )
    p.add_argument("-v", "--verbose", action="count", default=0, help="ansible verbosity (-v ... -vvvv)")
    p.add_argument(
        "--progress",
        choices=("auto", "live", "plain"),
        default="auto",
        help="progress display: a live table on a terminal, plain lines otherwise (default: auto)",
    )
    if json_output:
        p.add_argument(
            "--json",
            action="store_true",
            help="print one JSON document on stdout (progress goes to stderr)",
        )


@dataclass(frozen=True)
class Serial:
    """A batch size: a number of hosts, or a percentage of the hosts (Ansible's `serial` forms)."""

    value: int
    percent: bool = False

    def size(self, total: int) -> int:
        if total <= 0:
            return 0
        if self.percent:
            return max(1, min(total, math.floor(total * self.value / 100)))
        return min(total, self.value)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


def parse_serial(text: str) -> Serial:
    """argparse type of --serial: N (hosts) or N% (of the selected hosts), N >= 1."""
    match = _SERIAL.match(text.strip())
    if not match or (match.group(2) and int(match.group(1)) > 100):
        raise argparse.ArgumentTypeError(f"{text!r}: allowed a number of hosts >= 1 or a percentage 1%..100%")
    return Serial(int(match.group(1)), percent=bool(match.group(2)))


def parse_percent(text: str) -> float:
    """argparse type of --max-fail-percent: 0..100."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed a number 0..100 (percent of a batch)")
    return value
