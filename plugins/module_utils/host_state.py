"""What the probe modules read of a host's files, shared by them (plugins/modules/*_probe.py and
sglang_stack_audit.py; Ansible ships this file with each module that imports it): a file's sha256,
owner/group/mode by name, the managed paths whose owner/group/mode drifted, a venv's site-packages,
and the one `main` they all have (`exit_with_probe`)."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]


def sha256(path: str | Path) -> str | None:
    """The file's sha256 (None when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            if hasattr(hashlib, "file_digest"):
                return hashlib.file_digest(fh, "sha256").hexdigest()
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def name_of(lookup: Any, ident: int) -> str:
    """pwd.getpwuid / grp.getgrgid name of an id, or the id itself when it has none."""
    try:
        return str(lookup(ident)[0])
    except KeyError:
        return str(ident)


def owner_mode(st: os.stat_result) -> dict[str, str]:
    """{"owner", "group", "mode"} of a stat result, as the file module names them ("0644")."""
    return {
        "owner": name_of(pwd.getpwuid, st.st_uid),
        "group": name_of(grp.getgrgid, st.st_gid),
        "mode": f"{st.st_mode & 0o7777:04o}",
    }


def path_drift(paths: list[dict[str, str]]) -> list[dict[str, str]]:
    """The paths that are missing or whose owner, group or mode differ from the wanted ones (each
    {"path", "owner"?, "group"?, "mode"?}), with why: [{"path", "why"}]."""
    out: list[dict[str, str]] = []
    for want in paths:
        try:
            have = owner_mode(os.lstat(want["path"]))
        except OSError:
            out.append({"path": want["path"], "why": "missing"})
            continue
        diff = [
            f"{k} {have[k]} (want {want[k]})"
            for k in ("owner", "group", "mode")
            if k in want and have[k] != want[k]
        ]
        if diff:
            out.append({"path": want["path"], "why": ", ".join(diff)})
    return out


def site_packages(venv: Path) -> Path | None:
    """The venv's lib/python3*/site-packages (None when it has none)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else None


def exit_with_probe(probe: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """A probe module's whole run: its `spec` option in, `probe` out, never changed (check mode too)."""
    module = AnsibleModule(
        argument_spec={"spec": {"type": "dict", "required": True}}, supports_check_mode=True
    )
    module.exit_json(changed=False, probe=probe(module.params["spec"]))
