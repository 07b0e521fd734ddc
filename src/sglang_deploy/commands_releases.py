"""`sglang-deploy releases`: each host's releases (newest first), their receipt summary, which one
`current` points at. playbooks/releases.yml reads the hosts (changes nothing) and hands the listing
over with ansible.builtin.set_stats."""

from __future__ import annotations

import argparse
from typing import Any

from .commands_run import BAD_INPUT_RC, execute, make_request, out_stream, print_json, run_paths

PLAYBOOK = "playbooks/releases.yml"


def host_listings(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    data = summary.get("stats_data", {}).get("sglang_releases", {})
    return dict(sorted(data.items())) if isinstance(data, dict) else {}


def render_text(listings: dict[str, dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for host, listing in listings.items():
        current = listing.get("current") or "-"
        lines.append(f"{host}: current -> {current}  ({listing.get('root', '')}/releases)")
        releases = listing.get("releases") or []
        if not releases:
            lines.append("  (no release)")
        for rel in releases:
            mark = "*" if rel.get("current") else " "
            state = "complete" if rel.get("complete") else "INCOMPLETE"
            checks = {True: "checks ok", False: "checks FAILED"}.get(rel.get("checks_ok"), "checks -")
            versions = ", ".join(f"{k} {v}" for k, v in (rel.get("versions") or {}).items() if v)
            patches = len(rel.get("patches") or [])
            lines.append(
                f" {mark} {rel.get('id')}  {rel.get('installed_at') or '-'}  {state}, {checks}; {versions}; "
                f"{patches} patch(es); source {rel.get('source') or '-'}"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    request = make_request(args, PLAYBOOK)
    if request is None:
        return BAD_INPUT_RC
    result = execute(request, args, "releases")
    listings = host_listings(result.summary)
    if args.json:
        print_json(
            {"schema": 1, "command": "releases", "rc": result.rc, "hosts": listings, **run_paths(result)}
        )
    else:
        stream = out_stream(args)
        for line in render_text(listings):
            print(line, file=stream)
        stream.flush()
    return result.rc
