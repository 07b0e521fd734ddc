#!/usr/bin/env python3
"""Read-only probe of the service's inputs and managed paths on the host, in one round trip.

usage: service_probe.py SPEC_JSON      (prints one JSON document on stdout; changes nothing)
SPEC: {"nccl_env": path or "", "current": path, "modprobe": path, "groups": [names],
       "dropin_dir": path, "paths": [{"path", "owner", "group", "mode"}], "unit": path,
       "key_file": {"path", "owner", "group", "mode"} or null}
Answers: the NCCL env file's sha256 (when asked), where `current` resolves (as stat's lnk_source),
whether nvidia-modprobe exists, which of the groups exist, the files in the unit's drop-in directory,
the managed directories that are missing or whose owner, group or mode differ, whether the unit file
exists, and whether the API key file is missing or has another owner, group or mode.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import sys
from typing import Any


def sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def name_of(lookup: Any, ident: int) -> str:
    try:
        return str(lookup(ident)[0])
    except KeyError:
        return str(ident)


def path_drift(paths: list[dict[str, str]]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for want in paths:
        try:
            st = os.lstat(want["path"])
        except OSError:
            out.append({"path": want["path"], "why": "missing"})
            continue
        have = {
            "owner": name_of(pwd.getpwuid, st.st_uid),
            "group": name_of(grp.getgrgid, st.st_gid),
            "mode": f"{st.st_mode & 0o7777:04o}",
        }
        diff = [
            f"{k} {have[k]} (want {want[k]})"
            for k in ("owner", "group", "mode")
            if k in want and have[k] != want[k]
        ]
        if diff:
            out.append({"path": want["path"], "why": ", ".join(diff)})
    return out


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    current = spec["current"]
    if os.path.islink(current):
        release = os.path.realpath(current)
    elif os.path.lexists(current):
        release = f"(not a link) {current}"
    else:
        release = "(missing)"
    try:
        dropins = sorted(
            e.name for e in os.scandir(spec["dropin_dir"]) if not e.is_dir(follow_symlinks=False)
        )
    except OSError:
        dropins = []
    existing = set()
    for name in spec.get("groups", []):
        try:
            grp.getgrnam(name)
            existing.add(name)
        except KeyError:
            pass
    return {
        "nccl_sha256": sha256(spec["nccl_env"]) if spec.get("nccl_env") else None,
        "release": release,
        "modprobe": os.path.isfile(spec["modprobe"]),
        "groups": [g for g in spec.get("groups", []) if g in existing],
        "dropins": dropins,
        "paths_drift": path_drift(spec.get("paths", [])),
        "unit_exists": os.path.isfile(spec["unit"]) if spec.get("unit") else False,
        # the key file's presence, owner and mode only (its content is a secret: never read here)
        "key_file": path_drift([spec["key_file"]]) if spec.get("key_file") else [],
    }


if __name__ == "__main__":
    print(json.dumps(probe(json.loads(sys.argv[1])), sort_keys=True))
