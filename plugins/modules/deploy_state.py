#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""The deployed state of an SGLang host as one transaction: snapshot, restore, verdict records.

The state a run can change on a host: the `current` release link, the unit file and its drop-ins,
the NCCL environment file and launch-args.json. The key/credential file is ``kept``: never recorded,
never restored, so a key this run rotated stays in force with the restored release (a rollback must
not silently bring a retired key back). Before a stage changes
the host the state in force is recorded (``snapshot``) when it is the last one a verify verdict
passed (``mark_good``), or when nothing was recorded yet; a failed health wait, layer or gate puts
all of it back (``restore``) under the rules of a rollback (the release is complete, its receipt
says its checks passed, its SGLang parsed the argv of the restored launch-args.json). A failed
verdict's combination (release, launch spec, environment digests) is remembered (``mark_bad``)
and ``status`` reports it, so the next run can refuse to deploy it again; never the combination the
last passed verdict recorded (``verified.json``): a failure of that one is not the combination's.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: deploy_state
short_description: Snapshot, restore and verdict records of an SGLang host's deployed state
description:
  - Records the state in force (the release link, the unit and its drop-ins, the NCCL environment
    file, the key files, launch-args.json) under O(managed.state_dir), restores all of it atomically, and
    keeps the verdict records (the last verified-good state, known-bad combinations).
  - C(snapshot) writes the snapshot only when there is none yet or the state in force is the one
    the last passed verdict recorded (C(mark_good)), so a snapshot is always the last good state.
    C(mark_good) records the snapshot of the state it marks at once, so a no-op rerun's C(snapshot)
    changes nothing.
  - C(restore) checks the snapshot's release against the rollback rules before it touches anything
    (complete, receipt checks passed, C(.launch-ok-<hash>) marker of the restored argv), writes each
    file through a temporary file and rename(2), removes managed files the snapshot did not have, and
    moves the link with a temporary link and rename(2). Check mode reports what it would change.
  - Copies of the files are root 0600 inside a root 0700 directory.
  - Paths in O(managed.kept) (the API key/credential file) are outside the state, never copied, never
    restored (also when an older snapshot has them), not in the digest; a rotated key stays in force.
  - C(mark_bad) never records the combination C(mark_good) recorded in C(verified.json) (the last good
    one); C(recorded) then says so.
  - Secrets are never returned (only paths, digests and the release id).
options:
  action:
    description: What to do.
    type: str
    required: true
    choices: [status, snapshot, restore, switch, mark_good, mark_bad]
  managed:
    description: What the state is (one description, shared by every action).
    type: dict
    required: true
    suboptions:
      state_dir:
        description: Where the snapshot and the verdict records live (root 0700).
        type: path
        default: /var/lib/sglang-deploy/state
      files:
        description: The managed files (a missing one is recorded as absent and removed by a restore).
        type: list
        elements: path
        default: []
      dirs:
        description: Directories whose regular files are all managed (the unit's drop-in directory).
        type: list
        elements: path
        default: []
      kept:
        description: Files a run writes that are outside the state (the key/credential file) - never
          recorded, never restored, left as the run wrote them.
        type: list
        elements: path
        default: []
      link:
        description: The release link (C(<sglang_root>/current)); its target is part of the state.
        type: path
        required: true
      launch_args:
        description: The launch-args.json among O(managed.files) (its C(launch_spec.server_args) name the
          launch marker).
        type: path
      service:
        description: The systemd unit whose running process C(status) reports (MainPID, the release it runs).
        type: str
  combination:
    description: With C(mark_bad) and C(status), the combination a verdict judged (more keys are kept);
      with C(mark_good), the combination in force (recorded in C(verified.json) so C(mark_bad) can tell it).
      Or computed from O(launch).
    type: dict
    suboptions:
      release_id: {description: The release C(current) pointed at., type: str}
      launch_spec_sha256:
        description: sha256 of the launch spec's flags and environment (no secrets).
        type: str
      env_sha256: {description: sha256 of the NCCL environment file., type: str}
  launch:
    description:
      - The launch spec a verdict judges; the module computes the combination from it and the state in
        force before the action (a restore's is then the state it replaced), returns it (RV(combination))
        and uses it as O(combination). The one computation of a combination (the known-bad check, the
        verdict records).
      - C(launch_spec_sha256) is the sha256 of the JSON object of C(argv) and C(environment), in that
        order, as Ansible's C(to_json) writes it, so records written by the earlier Jinja computation match.
    type: dict
    suboptions:
      argv:
        description: The launcher and the server flags (the key a placeholder).
        type: list
        elements: str
        required: true
      environment:
        description: The launch environment.
        type: dict
        default: {}
      release_id:
        description: This run's release; empty for the release the link points at.
        type: str
        default: ""
      env_file:
        description: The NCCL environment file (its digest in force when O(launch.env_sha256) is empty).
        type: path
      env_sha256:
        description: This run's digest of the NCCL environment file; empty for the one in force (C(absent)
          without one).
        type: str
        default: ""
  release:
    description: With C(switch), the release to point the link at (the same rules as a restore).
    type: str
  server_args:
    description: The launch argv (server flags) in force; C(switch) and C(status) (C(allowed)) require
      the release's SGLang to have parsed it (its C(.launch-ok-<hash>) marker).
    type: list
    elements: str
  reason:
    description: With C(mark_bad), why the verdict failed.
    type: str
    default: ""
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Record the state in force before a stage changes the host
  sglang.deploy.deploy_state:
    action: snapshot
    managed:
      link: /opt/sglang/current
      files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/nccl.env, /etc/sglang/launch-args.json]
      dirs: [/etc/systemd/system/sglang-kimi.service.d]
      launch_args: /etc/sglang/launch-args.json

- name: Put the last good state back
  sglang.deploy.deploy_state:
    action: restore
    managed:
      link: /opt/sglang/current
      files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/nccl.env, /etc/sglang/launch-args.json]
      dirs: [/etc/systemd/system/sglang-kimi.service.d]
      launch_args: /etc/sglang/launch-args.json

- name: Read the state and refuse the combination this run deploys when a failed verdict recorded it
  sglang.deploy.deploy_state:
    action: status
    managed:
      link: /opt/sglang/current
      files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/nccl.env, /etc/sglang/launch-args.json]
    launch:
      argv: [/opt/sglang/current/venv/bin/python, -m, sglang.launch_server, --tp, "8"]
      environment: {NCCL_P2P_LEVEL: SYS}
      env_file: /etc/sglang/nccl.env
  register: state
  failed_when: state.known_bad_match is not none
"""

RETURN = r"""
digest:
  description: sha256 over the state in force (each managed path's digest, mode, owner; the link target).
  returned: always
  type: str
release:
  description: The release id the link points at (basename of its target; "" without a link).
  returned: always
  type: str
file_sha256:
  description: The sha256 of each managed file in force (path -> digest; null when absent).
  returned: always
  type: dict
snapshot:
  description: The snapshot (exists, digest, release, taken_at, paths).
  returned: always
  type: dict
verified:
  description: The last passed verdict's record (digest, at, status) or null.
  returned: always
  type: dict
in_force_is_verified:
  description: Whether the state in force is the one the last passed verdict recorded.
  returned: always
  type: bool
known_bad:
  description: The known-bad combinations recorded on this host.
  returned: always
  type: list
  elements: dict
known_bad_match:
  description: The known-bad record equal to O(combination) (release, launch spec, env digests), or null.
  returned: always
  type: dict
combination:
  description: The combination of O(launch) (release_id, launch_spec_sha256, env_sha256), computed before the
    action (a restore's is the state it replaced), or O(combination) as given; null without either.
  returned: always
  type: dict
running:
  description: With O(managed.service), the unit's ActiveState, MainPID, the release its process runs and
    ActiveEnterTimestampMonotonic (microseconds).
  returned: always
  type: dict
items:
  description: With C(restore), each path it changed (or would change in check mode) and how.
  returned: always
  type: list
  elements: dict
allowed:
  description: With O(server_args), the complete releases other than the current one that the rollback
    rules allow (newest completion first).
  returned: always
  type: list
  elements: str
taken:
  description: With C(snapshot), whether the snapshot was (or would be) written, and why not.
  returned: always
  type: str
recorded:
  description: With C(mark_bad), whether the combination was recorded known-bad, and why not.
  returned: always
  type: str
"""


import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.combination import (
    known_bad_match,
    normalized,
    of_launch,
)
from ansible_collections.sglang.deploy.plugins.module_utils.managed_state import switch_link, write_atomic


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _describe(path: str) -> dict[str, Any]:
    """What the state records of one managed path (absent, or a regular file's digest/mode/owner)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"path": path, "present": False}
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a managed path must be one)")
    return {
        "path": path,
        "present": True,
        "sha256": _sha256(path),
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "uid": st.st_uid,
        "gid": st.st_gid,
    }


def _managed_paths(
    files: list[str], dirs: list[str], extra: list[str] | None = None, kept: frozenset[str] = frozenset()
) -> list[str]:
    paths = set(files) | set(extra or [])
    for folder in dirs:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in os.scandir(folder):
                if entry.is_file(follow_symlinks=False):
                    paths.add(entry.path)
    return sorted(paths - kept)


def _link_target(link: str) -> str | None:
    try:
        return os.readlink(link)
    except (FileNotFoundError, OSError):
        return None


def state_in_force(
    files: list[str],
    dirs: list[str],
    link: str,
    extra: list[str] | None = None,
    kept: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    entries = [_describe(p) for p in _managed_paths(files, dirs, extra, kept)]
    target = _link_target(link)
    body = json.dumps({"entries": entries, "link": target}, sort_keys=True)
    return {
        "entries": entries,
        "link": target,
        "release": os.path.basename(target) if target else "",
        "digest": hashlib.sha256(body.encode()).hexdigest(),
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def _move_aside(path: Path, aside: Path) -> None:
    """rename(2) ``path`` to ``aside``. On overlayfs without redirect_dir (a container whose image holds
    the directory: docker's default), renaming a directory of a lower layer fails with EXDEV; it is
    then copied aside and removed, which is not atomic, but only once: the snapshot written next is in
    the upper layer, and later swaps are rename(2) again."""
    try:
        os.replace(path, aside)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copytree(path, aside, symlinks=True)
        shutil.rmtree(path)


def _write_atomic(path: Path, data: bytes, mode: int, uid: int = 0, gid: int = 0) -> None:
    write_atomic(str(path), data, mode, uid, gid)


def _ensure_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    os.chown(path, 0, 0)


def launch_marker(server_args: list[str]) -> str:
    """The stack role's marker name for an argv its SGLang parsed (sglang_stack/vars/main.yml)."""
    digest = hashlib.sha256(json.dumps(server_args).encode()).hexdigest()
    return f".launch-ok-{digest[:16]}"


def _argv_of(launch_args_text: str) -> list[str] | None:
    try:
        return [str(a) for a in json.loads(launch_args_text)["launch_spec"]["server_args"]]
    except (ValueError, KeyError, TypeError):
        return None


def rule_violation(
    link: str, release: str, launch_args_text: str | None, server_args: list[str] | None = None
) -> str:
    """Why ``release`` may not be restored ("" when it may): the one set of rollback rules.

    The argv whose marker is required: ``server_args`` when given, else launch-args.json's.
    """
    releases = Path(os.path.dirname(link)) / "releases" / release
    receipt = (_read_json(releases / "receipt.json") or {}) if release else {}
    argv = (
        server_args if server_args is not None else (_argv_of(launch_args_text) if launch_args_text else None)
    )
    marker = launch_marker(argv) if argv is not None else ""
    problems = [
        (not release, "the snapshot has no release link"),
        (
            not (releases / ".complete").is_file(),
            f"release {release} is not complete (no {releases}/.complete)",
        ),
        (
            (receipt.get("checks") or {}).get("argv_ok") is False,
            f"the receipt of {release} says its checks failed",
        ),
        (
            launch_args_text is not None and server_args is None and argv is None,
            "the snapshot's launch-args.json names no launch_spec.server_args",
        ),
        (
            bool(marker) and not (releases / marker).exists(),
            f"SGLang of {release} never parsed the launch argv (no {marker}): it may reject a flag",
        ),
    ]
    return next((why for bad, why in problems if bad), "")


def allowed_releases(link: str, server_args: list[str]) -> list[str]:
    """Complete releases other than current that the rules allow, newest completion first."""
    releases = Path(os.path.dirname(link)) / "releases"
    current = os.path.basename(_link_target(link) or "")
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in releases.iterdir():
            marker = entry / ".complete"
            if (
                entry.name != current
                and marker.is_file()
                and not rule_violation(link, entry.name, None, server_args)
            ):
                found.append((marker.stat().st_mtime, entry.name))
    return [name for _mtime, name in sorted(found, reverse=True)]


def _running(service: str | None, link: str) -> dict[str, Any]:
    out: dict[str, Any] = {"active": "", "main_pid": 0, "release": "", "active_enter_us": 0}
    if not service:
        return out
    try:
        text = subprocess.run(
            ["systemctl", "show", "-p", "ActiveState,MainPID,ActiveEnterTimestampMonotonic", service],
            capture_output=True, text=True, check=False, timeout=30,
        ).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return out
    props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    out["active"] = props.get("ActiveState", "")
    out["main_pid"] = int(props.get("MainPID", "0") or 0)
    out["active_enter_us"] = int(props.get("ActiveEnterTimestampMonotonic", "0") or 0)
    if out["main_pid"] > 0:
        releases = os.path.join(os.path.dirname(link), "releases") + os.sep
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{out['main_pid']}/cmdline").read_bytes().split(b"\0")
            for word in [
                os.readlink(f"/proc/{out['main_pid']}/exe"),
                *(w.decode(errors="replace") for w in cmdline),
            ]:
                real = os.path.realpath(word) if word.startswith("/") else ""
                if real.startswith(releases):
                    out["release"] = real[len(releases) :].split(os.sep, 1)[0]
                    break
    return out


def launch_combination(launch: dict[str, Any], in_force: dict[str, Any]) -> dict[str, str]:
    """The combination a verdict judges, of ``launch`` (O(launch)) and the state in force (state_in_force):
    the one computation of module_utils/combination.py (the filter deploy_state_known_bad's too)."""
    combination: dict[str, str] = of_launch(
        launch, in_force["release"], {e["path"]: e.get("sha256") for e in in_force["entries"]}
    )
    return combination


class DeployState:
    """One host's state directory: snapshot/, verified.json, known-bad.json."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.dir = Path(params["state_dir"])
        self.snap = self.dir / "snapshot"
        self.files = [str(p) for p in params["files"]]
        self.dirs = [str(p) for p in params["dirs"]]
        self.link = str(params["link"])
        self.launch_args = params.get("launch_args")
        self.kept = frozenset(str(p) for p in params.get("kept") or [])

    def manifest(self) -> dict[str, Any] | None:
        data = _read_json(self.snap / "manifest.json")
        return data if isinstance(data, dict) else None

    def in_force(self) -> dict[str, Any]:
        manifest = self.manifest() or {}
        # paths the snapshot had stay managed (a drop-in added since is compared as present/absent)
        extra = [e["path"] for e in manifest.get("entries", [])]
        return state_in_force(self.files, self.dirs, self.link, extra, self.kept)

    def status(
        self, service: str | None, combination: dict[str, Any] | None, now: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """What the module returns of the host's state; ``now``: the state in force when the caller
        has just read it (nothing changed since), else it is read here."""
        now = now or self.in_force()
        manifest = self.manifest()
        verified = _read_json(self.dir / "verified.json")
        known_bad = _read_json(self.dir / "known-bad.json") or []
        match = known_bad_match(known_bad, combination)
        snap: dict[str, Any] = {"exists": manifest is not None}
        if manifest:
            snap.update({k: manifest.get(k) for k in ("digest", "release", "taken_at")})
            snap["paths"] = [e["path"] for e in manifest.get("entries", [])]
        return {
            "digest": now["digest"],
            "release": now["release"],
            "file_sha256": {e["path"]: e.get("sha256") for e in now["entries"]},
            "snapshot": snap,
            "verified": verified,
            "in_force_is_verified": bool(verified and verified.get("digest") == now["digest"]),
            "known_bad": known_bad,
            "known_bad_match": match,
            "running": _running(service, self.link),
        }

    def snapshot(self, check: bool) -> tuple[bool, str, dict[str, Any]]:
        now = self.in_force()
        manifest = self.manifest()
        verified = _read_json(self.dir / "verified.json") or {}
        if manifest and manifest.get("digest") == now["digest"]:
            return False, "the snapshot is the state in force already", now
        if manifest and verified.get("digest") != now["digest"]:
            return (
                False,
                (
                    f"kept the snapshot of release {manifest.get('release')} ({manifest.get('taken_at')}): "
                    "the state in force was never verified good"
                ),
                now,
            )
        if check:
            return True, "would record the state in force", now
        _ensure_dir(self.dir)
        fresh = self.dir / f".snapshot.new.{os.getpid()}"
        shutil.rmtree(fresh, ignore_errors=True)
        _ensure_dir(fresh)
        _ensure_dir(fresh / "files")
        entries = []
        for index, entry in enumerate(now["entries"]):
            if entry["present"]:
                name = f"{index:03d}"
                shutil.copyfile(entry["path"], fresh / "files" / name)
                os.chmod(fresh / "files" / name, 0o600)
                # the copy must be what was digested (a file rewritten meanwhile would mismatch)
                if _sha256(str(fresh / "files" / name)) != entry["sha256"]:
                    shutil.rmtree(fresh, ignore_errors=True)
                    raise RuntimeError(f"{entry['path']} changed while it was recorded; run again")
                entries.append({**entry, "copy": name})
            else:
                entries.append(entry)
        manifest = {
            "digest": now["digest"],
            "release": now["release"],
            "link": now["link"],
            "entries": entries,
            "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_atomic(fresh / "manifest.json", json.dumps(manifest, indent=2).encode(), 0o600)
        old = self.dir / f".snapshot.old.{os.getpid()}"
        if self.snap.exists():
            _move_aside(self.snap, old)
        os.replace(fresh, self.snap)
        shutil.rmtree(old, ignore_errors=True)
        return True, "recorded the state in force", now

    def _launch_text(self, manifest: dict[str, Any]) -> str | None:
        launch = next(
            (e for e in manifest["entries"] if e["path"] == self.launch_args and e["present"]), None
        )
        return (self.snap / "files" / launch["copy"]).read_text() if launch else None

    def _plan(self, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """What a restore changes: files to write or remove, the link to move."""
        now = self.in_force()
        have = {e["path"]: e for e in now["entries"]}
        keys = ("present", "sha256", "mode", "uid", "gid")
        items: list[dict[str, Any]] = []
        for entry in manifest["entries"]:
            if entry["path"] in self.kept:  # an older snapshot's key file: left as this run wrote it
                continue
            current = have.get(entry["path"], {"present": False})
            if all(current.get(k) == entry.get(k) for k in keys):
                continue
            if entry["present"]:
                items.append({"path": entry["path"], "action": "written", "entry": entry})
            elif current.get("present"):
                items.append({"path": entry["path"], "action": "removed"})
        recorded = {e["path"] for e in manifest["entries"]} | self.kept
        items += [
            {"path": path, "action": "removed (not in the snapshot)"}
            for path, current in have.items()
            if path not in recorded and current.get("present")
        ]
        if manifest.get("link") and now["link"] != manifest["link"]:
            items.append(
                {"path": self.link, "action": f"link -> {manifest['link']} (was {now['link']})", "link": True}
            )
        return items

    def _apply(self, item: dict[str, Any], manifest: dict[str, Any]) -> None:
        if item.get("link"):
            switch_link(self.link, manifest["link"])
        elif "entry" in item:
            entry = item["entry"]
            data = (self.snap / "files" / entry["copy"]).read_bytes()
            if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                raise RuntimeError(f"the snapshot's copy of {entry['path']} is damaged (sha256 mismatch)")
            _write_atomic(Path(entry["path"]), data, int(entry["mode"], 8), entry["uid"], entry["gid"])
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item["path"])

    def restore(self, check: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        manifest = self.manifest()
        if not manifest:
            raise RuntimeError(f"no snapshot under {self.snap}: nothing to restore")
        launch_text = self._launch_text(manifest) if self.launch_args else None
        why = rule_violation(self.link, str(manifest.get("release") or ""), launch_text)
        if why:
            raise RuntimeError(f"cannot restore the snapshot of {manifest.get('taken_at')}: {why}")
        items = self._plan(manifest)
        # files first, the link last: the release switches when everything it runs with is in place
        for item in items if not check else []:
            self._apply(item, manifest)
        return [{"path": i["path"], "action": i["action"]} for i in items], manifest

    def switch(self, check: bool, release: str, server_args: list[str] | None) -> list[dict[str, Any]]:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", release):
            raise ValueError(
                f"release {release!r} is not a release id (allowed: A-Z a-z 0-9 . _ -, no leading .)"
            )
        why = rule_violation(self.link, release, None, server_args)
        if why:
            allowed = allowed_releases(self.link, server_args or [])
            raise RuntimeError(f"cannot switch to {release}: {why}. Allowed: {', '.join(allowed) or 'none'}")
        target = f"releases/{release}"
        if _link_target(self.link) == target:
            return []
        if not check:
            switch_link(self.link, target)
        return [{"path": self.link, "action": f"link -> {target} (was {_link_target(self.link)})"}]

    def mark_good(self, check: bool, verdict: str, combination: dict[str, Any] | None = None) -> bool:
        now = self.in_force()
        old = _read_json(self.dir / "verified.json") or {}
        good = normalized(combination) if combination else None
        if old.get("digest") == now["digest"] and (good is None or old.get("combination") == good):
            return False
        if not check:
            _ensure_dir(self.dir)
            record = {"digest": now["digest"], "release": now["release"], "status": verdict,
                      "combination": good,
                      "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
            _write_atomic(self.dir / "verified.json", json.dumps(record, indent=2).encode(), 0o600)
            # the state just marked good is the last good state: recorded now, not by the next run's
            # snapshot (which would otherwise report a change on a no-op rerun)
            self.snapshot(check)
        return True

    def mark_bad(self, check: bool, combination: dict[str, Any], reason: str) -> tuple[bool, str]:
        records = _read_json(self.dir / "known-bad.json") or []
        want = normalized(combination)
        verified = _read_json(self.dir / "verified.json") or {}
        if verified.get("combination") == want:
            return False, (
                "not recorded known-bad: it is the last good combination; the failure is not the "
                f"combination's (verified good at {verified.get('at')})"
            )
        if any(normalized(r) == want for r in records):
            return False, "recorded known-bad already"
        if not check:
            _ensure_dir(self.dir)
            record = {**{k: str(v) for k, v in combination.items()}, "reason": reason,
                      "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
            _write_atomic(
                self.dir / "known-bad.json", json.dumps([*records, record], indent=2).encode(), 0o600
            )
        return True, "recorded known-bad"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "action": {
                "type": "str",
                "required": True,
                "choices": ["status", "snapshot", "restore", "switch", "mark_good", "mark_bad"],
            },
            "managed": {
                "type": "dict",
                "required": True,
                "options": {
                    "state_dir": {"type": "path", "default": "/var/lib/sglang-deploy/state"},
                    "files": {"type": "list", "elements": "path", "default": []},
                    "dirs": {"type": "list", "elements": "path", "default": []},
                    "kept": {"type": "list", "elements": "path", "default": []},
                    "link": {"type": "path", "required": True},
                    "launch_args": {"type": "path"},
                    "service": {"type": "str"},
                },
            },
            "combination": {"type": "dict"},
            "launch": {
                "type": "dict",
                "options": {
                    "argv": {"type": "list", "elements": "str", "required": True},
                    "environment": {"type": "dict", "default": {}},
                    "release_id": {"type": "str", "default": ""},
                    "env_file": {"type": "path"},
                    "env_sha256": {"type": "str", "default": ""},
                },
            },
            "release": {"type": "str"},
            "server_args": {"type": "list", "elements": "str"},
            "reason": {"type": "str", "default": ""},
        },
        required_if=[("action", "mark_bad", ("combination", "launch"), True)],
        mutually_exclusive=[("combination", "launch")],
        supports_check_mode=True,
    )
    params = module.params
    state = DeployState(params["managed"])
    check = module.check_mode
    # the state in force BEFORE the action, read once (the combination of a restore: the state it replaces)
    before = state.in_force()
    combination = params["combination"] or (
        launch_combination(params["launch"], before) if params["launch"] else None
    )
    result: dict[str, Any] = {"changed": False, "items": [], "taken": "", "recorded": ""}
    try:
        if params["action"] == "snapshot":
            changed, why, _in_force = state.snapshot(check)
            result.update(changed=changed, taken=why)
        elif params["action"] == "restore":
            items, _snapshot = state.restore(check)
            result.update(changed=bool(items), items=items)
        elif params["action"] == "switch":
            if not params.get("release"):
                raise ValueError("action=switch needs release")
            items = state.switch(check, params["release"], params.get("server_args"))
            result.update(changed=bool(items), items=items)
        elif params["action"] == "mark_good":
            verdict = params["reason"] or "passed"
            result["changed"] = state.mark_good(check, verdict, combination)
        elif params["action"] == "mark_bad":
            changed, note = state.mark_bad(check, combination or {}, params["reason"])
            result.update(changed=changed, recorded=note)
    except (RuntimeError, ValueError, OSError) as exc:
        module.fail_json(msg=str(exc), **result)
    # after an action that changed nothing (a read, a state already recorded) the state read before it
    unchanged = before if not result["changed"] else None
    result.update(state.status(params["managed"].get("service"), combination, unchanged))
    result["combination"] = combination
    result["allowed"] = (
        allowed_releases(state.link, params["server_args"]) if params.get("server_args") is not None else []
    )
    if module._diff and result["items"]:
        result["diff"] = {
            "before": "",
            "after": "".join(f"{i['path']}: {i['action']}\n" for i in result["items"]),
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
