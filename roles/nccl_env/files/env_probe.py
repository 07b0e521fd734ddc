#!/usr/bin/env python3
"""Read-only probe of the NCCL environment file and its directory, in one round trip.

usage: env_probe.py SPEC_JSON      (prints one JSON document on stdout; changes nothing)
SPEC: {"file": path}
Answers: "file": {"sha256", "owner", "group", "mode"} of the file (null when missing; {"type": ...}
when it is not a regular file), "dir": {"owner", "group", "mode"} of its directory (null when
missing). render.yml skips its tasks when both are what they would leave.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import pwd
import stat
import sys
from typing import Any


def owner_mode(st: os.stat_result) -> dict[str, str]:
    def name(lookup: Any, ident: int) -> str:
        try:
            return str(lookup(ident)[0])
        except KeyError:
            return str(ident)

    return {
        "owner": name(pwd.getpwuid, st.st_uid),
        "group": name(grp.getgrgid, st.st_gid),
        "mode": f"{st.st_mode & 0o7777:04o}",
    }


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    path = str(spec["file"])
    out: dict[str, Any] = {"file": None, "dir": None}
    try:
        st = os.lstat(path)
    except OSError:
        pass
    else:
        if stat.S_ISREG(st.st_mode):
            with open(path, "rb") as fh:
                out["file"] = {"sha256": hashlib.sha256(fh.read()).hexdigest(), **owner_mode(st)}
        else:
            out["file"] = {"type": "not a regular file"}
    with contextlib.suppress(OSError):
        out["dir"] = owner_mode(os.lstat(os.path.dirname(path) or "/"))
    return out


if __name__ == "__main__":
    print(json.dumps(probe(json.loads(sys.argv[1])), sort_keys=True))
