"""A role's host state as one data structure, compared and applied in one pass (module
sglang.deploy.managed_state; plain Python on top of probe.py's helpers: tests load it by path).

`run(state, check=...)` first computes, for every item, what differs on the host (`why`), then, unless
`check`, applies exactly those differences. The same code path answers a check-mode run (what a real
run would change) and makes the change. Kinds, applied in this order (a file's owner may be the
user created before it):

  groups       {name, system}
  users        {name, group, groups, optional_groups, home, shell, comment, system}
  directories  {path, mode, owner, group}
  files        {path, content | secret_content, mode, owner, group, validate}
  links        {path, src}
  absent       {path}                          (removed when present; never read)
  prune        {path, keep}                    (each entry of directory `path` that is not a
                                                directory, not in `keep` and no file of the state
                                                is an `absent` item; a missing `path` is fine)
  units        {name, enabled, path, dropins}  (systemctl daemon-reload when `path`, a file under
                                                `path`.d/ or one of `dropins` (drop-ins systemd loads
                                                from other directories) changed, then enable/disable)

Every item may carry `trigger: true`: the result's `triggered` is true when such an item changed
(the role notifies its restart handler from it). Secret files (`secret_content`) never show their
content: not in `diff`, not in `items`, no hash either.
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.probe import name_of, owner_mode

KINDS = ("groups", "users", "directories", "files", "links", "absent", "units")
KEYS = (*KINDS, "prune")
MAX_DIFF_BYTES = 64 * 1024
SECRET = "(secret content)"


class StateError(Exception):
    """An item that cannot be applied (or checked): the message names it."""


Runner = Callable[[list[str]], "tuple[int, str, str]"]


def run_command(argv: list[str]) -> tuple[int, str, str]:
    """argv's exit status, stdout and stderr (rc 127 when it cannot be run)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr


# --- small host readers -------------------------------------------------------------------------


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _gid(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _mode(value: Any) -> str | None:
    """A mode as "0644" (None: not managed). Accepts "644", "0644", 0o644 as an int."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return f"{value & 0o7777:04o}"
    text = str(value)
    try:
        return f"{int(text, 8) & 0o7777:04o}"
    except ValueError as exc:
        raise StateError(f"mode {text!r} is not an octal mode such as '0644'") from exc


def _attr_why(have: dict[str, str], item: dict[str, Any]) -> list[str]:
    why = []
    for key in ("owner", "group"):
        if item.get(key) and have[key] != item[key]:
            why.append(key)
    want_mode = _mode(item.get("mode"))
    if want_mode and have["mode"] != want_mode:
        why.append("mode")
    return why


def _want_attrs(item: dict[str, Any]) -> dict[str, str]:
    out = {"path": str(item["path"])}
    for key in ("owner", "group"):
        if item.get(key):
            out[key] = str(item[key])
    mode = _mode(item.get("mode"))
    if mode:
        out["mode"] = mode
    return out


def _text(data: bytes | None) -> str | None:
    """Content shown in a diff: text up to MAX_DIFF_BYTES, else None."""
    if data is None or len(data) > MAX_DIFF_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- the per-kind comparisons ---------------------------------------------------------------------


def _check_group(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    name = str(item["name"])
    if _gid(name) is None:
        return ["missing"], {
            "before": {"group": name, "state": "absent"},
            "after": {"group": name, "state": "present"},
        }
    return [], {}


def _user_have(name: str) -> dict[str, Any] | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return {
        "group": name_of(grp.getgrgid, entry.pw_gid),
        "groups": sorted(g.gr_name for g in grp.getgrall() if name in g.gr_mem),
        "home": entry.pw_dir,
        "shell": entry.pw_shell,
        "comment": entry.pw_gecos,
    }


def _user_want(item: dict[str, Any]) -> dict[str, Any]:
    groups = [str(g) for g in item.get("groups") or []]
    groups += [str(g) for g in item.get("optional_groups") or [] if _gid(str(g)) is not None]
    want: dict[str, Any] = {"groups": sorted(set(groups))}
    for key in ("group", "home", "shell", "comment"):
        if item.get(key) is not None:
            want[key] = str(item[key])
    return want


def _check_user(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    name = str(item["name"])
    have, want = _user_have(name), _user_want(item)
    if have is None:
        return ["missing"], {"before": {"user": name, "state": "absent"}, "after": {"user": name, **want}}
    why: list[str] = [
        k for k in ("group", "groups", "home", "shell", "comment") if k in want and have[k] != want[k]
    ]
    if not why:
        return [], {}
    return why, {
        "before": {"user": name, **{k: have[k] for k in why}},
        "after": {"user": name, **{k: want[k] for k in why}},
    }


def _check_directory(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    path = str(item["path"])
    want = _want_attrs(item)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ["missing"], {
            "before": {"path": path, "state": "absent"},
            "after": {**want, "state": "directory"},
        }
    if not stat.S_ISDIR(st.st_mode):
        return ["type"], {
            "before": {"path": path, "state": "not a directory"},
            "after": {**want, "state": "directory"},
        }
    have = owner_mode(st)
    why = _attr_why(have, item)
    if not why:
        return [], {}
    return why, {
        "before": {"path": path, **{k: have[k] for k in why}},
        "after": {"path": path, **{k: want[k] for k in why}},
    }


def _file_content(item: dict[str, Any]) -> bytes:
    if item.get("secret_content") is not None:
        return str(item["secret_content"]).encode("utf-8")
    return str(item.get("content") or "").encode("utf-8")


def _is_secret(item: dict[str, Any]) -> bool:
    return item.get("secret_content") is not None


def _read_file(path: str, item: dict[str, Any]) -> tuple[list[str], bytes | None, dict[str, str]]:
    """What differs of file `path` (why), its content (None when unreadable as text) and the
    owner/group/mode that differ, as they are."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ["missing"], b"", {}
    if stat.S_ISDIR(st.st_mode):
        raise StateError(f"file {path}: a directory is in its place")
    if not stat.S_ISREG(st.st_mode):
        return ["type"], None, {}
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise StateError(f"file {path}: cannot read it: {exc.strerror or exc}") from exc
    have = owner_mode(st)
    attr_why = _attr_why(have, item)
    return (
        (["content"] if data != _file_content(item) else []) + attr_why,
        data,
        {k: have[k] for k in attr_why},
    )


def _content_diff(path: str, why: list[str], before: bytes | None, item: dict[str, Any]) -> dict[str, Any]:
    content = _file_content(item)
    diff: dict[str, Any] = {"before_header": path, "after_header": path}
    if _is_secret(item):
        diff["before"] = SECRET + " (differs)\n"
        diff["after"] = SECRET + "\n"
    else:
        old, new = _text(before), _text(content)
        diff["before"] = old if old is not None else f"({len(before or b'')} bytes or not a regular file)\n"
        diff["after"] = new if new is not None else f"({len(content)} bytes)\n"
    if "missing" in why:
        diff["before"] = ""
    return diff


def _check_file(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    path = str(item["path"])
    why, before, attrs_before = _read_file(path, item)
    if not why:
        return [], {}
    diffs = []
    if {"missing", "content", "type"} & set(why):
        diffs.append(_content_diff(path, why, before, item))
    if attrs_before:
        want = _want_attrs(item)
        diffs.append(
            {
                "before": {"path": path, **attrs_before},
                "after": {"path": path, **{k: want[k] for k in attrs_before}},
            }
        )
    return why, (diffs[0] if len(diffs) == 1 else {"diffs": diffs})


def _check_link(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    path, src = str(item["path"]), str(item["src"])
    try:
        have = os.readlink(path)
    except FileNotFoundError:
        return ["missing"], {"before": {"path": path, "state": "absent"}, "after": {"path": path, "src": src}}
    except OSError:
        if os.path.isdir(path) and not os.path.islink(path):
            raise StateError(f"link {path}: a directory is in its place") from None
        return ["type"], {
            "before": {"path": path, "state": "not a link"},
            "after": {"path": path, "src": src},
        }
    if have != src:
        return ["src"], {"before": {"path": path, "src": have}, "after": {"path": path, "src": src}}
    return [], {}


def _check_absent(item: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    path = str(item["path"])
    if not os.path.lexists(path):
        return [], {}
    kind = "directory" if os.path.isdir(path) and not os.path.islink(path) else "file"
    return ["present"], {"before": {"path": path, "state": kind}, "after": {"path": path, "state": "absent"}}


def _is_enabled(name: str, runner: Runner) -> str:
    _rc, out, _err = runner(["systemctl", "is-enabled", "--", name])
    return out.strip().splitlines()[0] if out.strip() else "not-found"


# --- appliers -------------------------------------------------------------------------------------


def _must(runner: Runner, argv: list[str], what: str) -> None:
    rc, out, err = runner(argv)
    if rc != 0:
        raise StateError(f"{what}: {' '.join(argv[:2])} failed (rc {rc}): {(err or out).strip()[-400:]}")


def _ids(item: dict[str, Any], what: str) -> tuple[int, int]:
    uid = -1 if not item.get("owner") else _uid(str(item["owner"]))
    gid = -1 if not item.get("group") else _gid(str(item["group"]))
    if uid is None:
        raise StateError(f"{what}: owner {item['owner']!r} does not exist")
    if gid is None:
        raise StateError(f"{what}: group {item['group']!r} does not exist")
    return uid, gid


def _set_attrs(path: str, item: dict[str, Any], what: str) -> None:
    uid, gid = _ids(item, what)
    if uid != -1 or gid != -1:
        os.chown(path, uid, gid, follow_symlinks=False)
    mode = _mode(item.get("mode"))
    if mode:
        os.chmod(path, int(mode, 8))


def _apply_group(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    argv = ["groupadd"] + (["--system"] if item.get("system", True) else []) + ["--", str(item["name"])]
    _must(runner, argv, f"group {item['name']}")


def _apply_user(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    want = _user_want(item)
    args: list[str] = []
    if "group" in want:
        args += ["--gid", want["group"]]
    if want["groups"] or "missing" not in why:  # (usermod --groups "" clears them)
        args += ["--groups", ",".join(want["groups"])]
    for key, flag in (("home", "--home"), ("shell", "--shell"), ("comment", "--comment")):
        if key in want:
            args += [flag, want[key]]
    if "missing" in why:
        sysflag = ["--system"] if item.get("system", True) else []
        args = [a if a != "--home" else "--home-dir" for a in args]
        argv = ["useradd", *sysflag, "--no-create-home", *args, "--", str(item["name"])]
    else:
        argv = ["usermod", *args, "--", str(item["name"])]
    _must(runner, argv, f"user {item['name']}")


def _apply_directory(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    path = str(item["path"])
    if "type" in why:
        raise StateError(f"directory {path}: something other than a directory is in its place")
    if "missing" in why:
        mode = _mode(item.get("mode")) or "0755"
        os.makedirs(path, mode=int(mode, 8), exist_ok=True)
    _set_attrs(path, item, f"directory {path}")


def _apply_file(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    path = str(item["path"])
    if not ({"missing", "content", "type"} & set(why)):
        _set_attrs(path, item, f"file {path}")
        return
    parent = os.path.dirname(path) or "/"
    if not os.path.isdir(parent):
        raise StateError(f"file {path}: its directory {parent} does not exist (add it to `directories`)")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_file_content(item))
            fh.flush()
            os.fsync(fh.fileno())
        if not item.get("mode"):
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the file module's default for a new file
        _set_attrs(tmp, item, f"file {path}")
        if item.get("validate"):
            validate = str(item["validate"])
            if "%s" not in validate:
                raise StateError(f"file {path}: validate {validate!r} has no %s")
            rc, out, err = runner(shlex.split(validate.replace("%s", shlex.quote(tmp))))
            if rc != 0:
                raise StateError(f"file {path}: validate failed (rc {rc}): {(err or out).strip()[-400:]}")
        os.rename(tmp, path)
        tmp = ""
    finally:
        if tmp and os.path.lexists(tmp):
            os.unlink(tmp)


def write_atomic(path: str, data: bytes, mode: int, uid: int = 0, gid: int = 0) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it (mode and owner set before the
    data, fsync'd) and rename(2) over it: a reader sees the old or the new file, never half of one. The
    one atomic record write in Python: deploy_state's snapshot and records, service_health's start-up
    record (a role's desired files go through `files`, which can also validate)."""
    parent = os.path.dirname(path) or "/"
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    try:
        os.fchmod(fd, mode)
        os.fchown(fd, uid, gid)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def switch_link(path: str, src: str) -> None:
    """Point the link `path` at `src` with a temporary link beside it and rename(2) over it, so the
    link is never missing. The one link switch in Python: managed_state's links and deploy_state's
    restore use it; tasks use ansible.builtin.file with force, which does the same."""
    tmp = f"{path}.managed-state.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(src, tmp)
    os.rename(tmp, path)


def _apply_link(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    switch_link(str(item["path"]), str(item["src"]))


def _apply_absent(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    path = str(item["path"])
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


# --- one pass -------------------------------------------------------------------------------------

_CHECK = {
    "groups": _check_group,
    "users": _check_user,
    "directories": _check_directory,
    "files": _check_file,
    "links": _check_link,
    "absent": _check_absent,
}
_APPLY = {
    "groups": _apply_group,
    "users": _apply_user,
    "directories": _apply_directory,
    "files": _apply_file,
    "links": _apply_link,
    "absent": _apply_absent,
}
_KIND_NAME = {
    "groups": "group", "users": "user", "directories": "directory", "files": "file",
    "links": "link", "absent": "absent", "units": "unit",
}  # fmt: skip


def _normalize_kind(kind: str, items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise StateError(f"state.{kind} must be a list")
    key = "name" if kind in ("groups", "users", "units") else "path"
    norm = []
    for raw in items:
        item = {"path": raw} if kind == "absent" and isinstance(raw, str) else raw
        if not isinstance(item, dict):
            raise StateError(f"state.{kind}: {item!r} is not a mapping")
        if not item.get(key):
            raise StateError(f"state.{kind}: an item has no {key}")
        if key == "path" and not str(item[key]).startswith("/"):
            raise StateError(f"state.{kind}: {item[key]!r} is not an absolute path")
        norm.append(item)
    return norm


def _pruned(prune: Any, managed: set[str]) -> list[dict[str, Any]]:
    """The entries of a prune directory that are `absent` items."""
    if not isinstance(prune, dict) or not str(prune.get("path") or "").startswith("/"):
        raise StateError(f"state.prune: {prune!r} is not a mapping with an absolute path")
    keep = {str(k) for k in prune.get("keep") or []}
    try:
        entries = sorted(os.scandir(str(prune["path"])), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        entries = []
    return [
        {"path": e.path, "trigger": bool(prune.get("trigger"))}
        for e in entries
        if not e.is_dir(follow_symlinks=False) and e.name not in keep and e.path not in managed
    ]


def normalize(state: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The state with every kind present as a list of dicts (`absent` may list plain paths) and the
    `prune` directories' entries added to `absent`."""
    unknown = set(state) - set(KEYS)
    if unknown:
        raise StateError(f"state has unknown keys {sorted(unknown)} (allowed: {', '.join(KEYS)})")
    out = {kind: _normalize_kind(kind, state.get(kind) or []) for kind in KINDS}
    managed = {str(f["path"]) for f in out["files"]} | {str(f["path"]) for f in out["links"]}
    for prune in state.get("prune") or []:
        out["absent"] += _pruned(prune, managed)
    return out


def _touches_unit(path: str, unit_path: str, dropins: frozenset[str] = frozenset()) -> bool:
    return path in dropins or (bool(unit_path) and (path == unit_path or path.startswith(unit_path + ".d/")))


def run(state: dict[str, Any], *, check: bool, runner: Runner = run_command) -> dict[str, Any]:
    """Compare every item with the host, then (unless `check`) apply what differs.

    Returns {changed, triggered, items: [{kind, path|name, changed, why, secret?}], diff: [...]}.
    Groups and users are checked and applied before the paths (whose owner they may be), units last.
    Raises StateError naming the item that cannot be applied."""
    norm = normalize(state)
    items: list[dict[str, Any]] = []
    diffs: list[dict[str, Any]] = []
    changed_paths: list[str] = []
    triggered = False
    for kind in KINDS:
        for item in norm[kind]:
            key = "name" if kind in ("groups", "users", "units") else "path"
            label = str(item[key])
            leaves: dict[str, str] = {}
            if kind == "units":
                why, diff, leaves = _check_unit(item, changed_paths, runner, check)
            else:
                why, diff = _CHECK[kind](item)
            record: dict[str, Any] = {"kind": _KIND_NAME[kind], key: label, "changed": bool(why), "why": why}
            record.update(leaves)
            if kind == "files" and _is_secret(item):
                record["secret"] = True
            items.append(record)
            if not why:
                continue
            if kind != "units":
                changed_paths.append(label)
            triggered = triggered or bool(item.get("trigger"))
            for one in diff.pop("diffs", None) or ([diff] if diff else []):
                # every diff names its item (Ansible's --diff header, the CLI's drift line)
                one.setdefault("before_header", label)
                one.setdefault("after_header", label)
                diffs.append(one)
            if not check:
                if kind == "units":
                    _apply_unit(item, why, runner)
                else:
                    _APPLY[kind](item, why, runner)
    return {
        "changed": any(r["changed"] for r in items),
        "triggered": triggered,
        "items": items,
        "diff": diffs,
    }


def _check_unit(
    item: dict[str, Any], changed_paths: list[str], runner: Runner, check: bool
) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """Why the unit differs, its diff, and {"enabled": is-enabled's word as this call leaves the unit (in
    check mode, as it is)} when its enablement is managed, else {}."""
    name = str(item["name"])
    why: list[str] = []
    before: dict[str, Any] = {"unit": name}
    after: dict[str, Any] = {"unit": name}
    dropins = frozenset(str(d) for d in item.get("dropins") or [])
    if any(_touches_unit(p, str(item.get("path") or ""), dropins) for p in changed_paths):
        why.append("reload")
        before["loaded"] = "stale"
        after["loaded"] = "reloaded"
    leaves: dict[str, str] = {}
    if item.get("enabled") is not None:
        have = _is_enabled(name, runner)
        want = "enabled" if item["enabled"] else "disabled"
        leaves["enabled"] = have
        if (have == "enabled") != bool(item["enabled"]):
            why.append("enabled")
            before["enabled"] = have
            after["enabled"] = want
            leaves["enabled"] = have if check else want
    return why, ({"before": before, "after": after} if why else {}), leaves


def _apply_unit(item: dict[str, Any], why: list[str], runner: Runner) -> None:
    name = str(item["name"])
    if "reload" in why:
        _must(runner, ["systemctl", "daemon-reload"], f"unit {name}")
    if "enabled" in why:
        verb = "enable" if item["enabled"] else "disable"
        _must(runner, ["systemctl", verb, "--", name], f"unit {name}")
