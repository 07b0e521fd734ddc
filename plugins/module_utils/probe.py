"""What the probe modules read of a host's files, shared by them (plugins/modules/*_probe.py and
sglang_stack_audit.py; Ansible ships this file with each module that imports it): a file's sha256,
owner/group/mode by name, a venv's site-packages,
and the one `main` they all have (`exit_with_probe`)."""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import MASK, is_secret_name


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


# --- the running process of a unit (sglang_service_probe's `process` answer) -----------------------
# What a process runs is read from /proc/<pid> (argv, environment, executable, mappings, cwd) and
# compared here, on the host: environment values never leave the module (only names and whether they
# match), and argv words after a secret-named flag (the one rule, secret_names.py) are masked before
# anything is returned.

_SYSTEMD_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SYSTEMD_SPECIFIER = re.compile(r"%[A-Za-z]")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a value of a non-secret NCCL_* variable short and plain enough to be shown in a drift message
_SHOWABLE_VALUE = re.compile(r"[A-Za-z0-9_.,:+=/-]{0,64}")

# Reads /proc/<pid> as the process' own user (see read_process): printed as one JSON line.
_READ_AS_OWNER = r"""
import json, os, sys
pid = sys.argv[1]
def rd(name):
    with open('/proc/%s/%s' % (pid, name), 'rb') as fh:
        return fh.read().hex()
def rl(name):
    try:
        return os.fsencode(os.readlink('/proc/%s/%s' % (pid, name))).hex()
    except OSError:
        return ''
print(json.dumps({'environ': rd('environ'), 'maps': rd('maps'), 'exe': rl('exe'), 'cwd': rl('cwd')}))
"""


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines of a systemd EnvironmentFile= (never sourced): blank lines and lines starting
    with # or ; are skipped, one pair of surrounding quotes is removed, later lines win."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        name, value = line.split("=", 1)
        name, value = name.strip(), value.strip()
        if not _ENV_NAME_RE.fullmatch(name):
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[name] = value
    return out


def _ids(status: str, field: str) -> list[int]:
    for line in status.splitlines():
        if line.startswith(field + ":"):
            return [int(x) for x in line.split()[1:]]
    return []


def read_process_as_owner(pid: int) -> tuple[bytes, bytes, str, str]:
    """environ, maps, exe and cwd of process `pid`, read by a child python running as the process'
    own uid/gid with no supplementary groups (the kernel lets a process' own user read them; root
    needs CAP_SYS_PTRACE for another user's). The child runs this interpreter, or /usr/bin/python3
    when that user cannot execute it (a python under /root). Raises OSError when neither works."""
    base = f"/proc/{pid}"
    with open(f"{base}/status", encoding="utf-8") as fh:
        status = fh.read()
    uids, gids = _ids(status, "Uid"), _ids(status, "Gid")
    if not uids or not gids or len(set(uids)) != 1 or len(set(gids)) != 1:
        raise PermissionError(f"cannot read {base} as its owner: its uids or gids differ")
    why = "no python"
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        try:
            done = subprocess.run(
                [python, "-I", "-c", _READ_AS_OWNER, str(pid)],
                user=uids[0], group=gids[0], extra_groups=[], cwd="/",
                capture_output=True, check=True, timeout=30,
            )  # fmt: skip
            got = json.loads(done.stdout)
            break
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            why = type(exc).__name__
    else:
        raise PermissionError(f"cannot read {base} as its owner: {why}")
    return (
        bytes.fromhex(got["environ"]),
        bytes.fromhex(got["maps"]),
        os.fsdecode(bytes.fromhex(got["exe"])),
        os.fsdecode(bytes.fromhex(got["cwd"])),
    )


def read_process(pid: int) -> dict[str, Any]:
    """argv, environment, executable, cwd and file-backed mapped paths of process `pid`.

    root reads /proc/<pid> directly; where root lacks CAP_SYS_PTRACE (a container host), the
    environment, exe, cwd and maps of another user's process are refused, so they are read by a
    child python that runs as the process' own uid/gid (no supplementary groups) and hands them
    back through a pipe. Raises OSError when the process cannot be read.
    """
    base = f"/proc/{pid}"
    with open(f"{base}/cmdline", "rb") as fh:
        cmdline = fh.read()
    try:
        with open(f"{base}/environ", "rb") as fh:
            environ = fh.read()
        with open(f"{base}/maps", "rb") as fh:
            maps = fh.read()
        exe = os.readlink(f"{base}/exe")
        cwd = os.readlink(f"{base}/cwd")
    except PermissionError:
        environ, maps, exe, cwd = read_process_as_owner(pid)
    env: dict[str, str] = {}
    for item in environ.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(name)] = os.fsdecode(value)
    mapped = set()
    for line in maps.decode("utf-8", "surrogateescape").splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            mapped.add(fields[5].removesuffix(" (deleted)"))
    return {
        "argv": [os.fsdecode(w) for w in cmdline.removesuffix(b"\0").split(b"\0")] if cmdline else [],
        "environ": env,
        "exe": exe,
        "cwd": cwd,
        "mapped": sorted(mapped),
    }


def _release_of(path: str, releases: str) -> str | None:
    """<releases>/<id> when `path` lies inside it (no symlink resolution), else None."""
    if not path.startswith(releases + "/"):
        return None
    rel_id = path[len(releases) + 1 :].split("/", 1)[0]
    return f"{releases}/{rel_id}" if rel_id not in ("", ".", "..") else None


def process_release(proc: dict[str, Any], root: str) -> str:
    """The release `<root>/releases/<id>` the process runs, or "" when it cannot be told.

    In order: the executable the kernel resolved at exec (/proc/<pid>/exe), the files it mapped
    (/proc/<pid>/maps: a venv's python is a link to the base interpreter, but its torch/sglang
    libraries are mapped from the release, resolved at open time), argv[0] taken literally. argv[0]
    is never resolved now: `current` may have moved since the process started.
    """
    releases = root.rstrip("/") + "/releases"
    found = _release_of(os.path.normpath(proc.get("exe", "")), releases)
    if found:
        return found
    mapped = sorted({r for r in (_release_of(p, releases) for p in proc.get("mapped", [])) if r})
    if mapped:
        return mapped[0] if len(mapped) == 1 else "(several) " + " ".join(mapped)
    argv = proc.get("argv") or [""]
    return (_release_of(os.path.normpath(argv[0]), releases) or "") if argv[0].startswith("/") else ""


def argv_word_matches(want: str, have: str, env: dict[str, str]) -> bool:
    """Whether the process' argv word `have` is what systemd makes of the unit's word `want`.

    `${NAME}` is replaced by the wanted environment's value of NAME (a wildcard when that value is
    not known here), a systemd specifier (`%d`, `%n`, ...) is a wildcard; the literal word matches
    too (a word the unit quoted with `$$`/`%%` reaches the process unexpanded).
    """
    if want == have:
        return True
    if not (_SYSTEMD_VAR.search(want) or _SYSTEMD_SPECIFIER.search(want)):
        return False
    pattern = ""
    pos = 0
    for m in re.finditer(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|%[A-Za-z]", want):
        pattern += re.escape(want[pos : m.start()])
        name = m.group(1)
        pattern += re.escape(env[name]) if name and name in env else "(?s:.*)"
        pos = m.end()
    pattern += re.escape(want[pos:])
    return re.fullmatch(pattern, have) is not None


def mask_argv(argv: list[str], want: list[str], env: dict[str, str]) -> list[str]:
    """argv with secret values replaced by MASK: the word after a secret-named flag
    (`--api-key`, any flag secret_names.is_secret_name calls secret), the value of `--secret-flag=value`, a
    word at a position where the unit has `${SECRET_NAME}`, and any word equal to the value of a
    secret-named variable of `env`."""
    secrets = {v for k, v in env.items() if is_secret_name(k) and v}
    out: list[str] = []
    for i, word in enumerate(argv):
        prev = argv[i - 1] if i else ""
        flag, eq, _value = word.partition("=")
        if (
            word in secrets
            or any(s in word for s in secrets if len(s) >= 8)
            or (prev.startswith("-") and is_secret_name(prev) and not word.startswith("--"))
            or (i < len(want) and any(is_secret_name(n) for n in _SYSTEMD_VAR.findall(want[i])))
        ):
            out.append(MASK)
        elif eq and flag.startswith("-") and is_secret_name(flag):
            out.append(f"{flag}={MASK}")
        else:
            out.append(word)
    return out


def _printable(word: str) -> str:
    return word.encode("utf-8", "backslashreplace").decode("utf-8")


def _argv_diff(have: list[str], masked: list[str], want: list[str], env: dict[str, str]) -> list[str]:
    """The argv positions that differ, at most 4, as 'argv[i] WORD (want WORD)' with masked words."""
    diffs: list[str] = []
    for i in range(max(len(have), len(want))):
        if i < len(have) and i < len(want) and argv_word_matches(want[i], have[i], env):
            continue
        shown = repr(_printable(masked[i])) if i < len(have) else "(none)"
        wanted = repr(_printable(want[i])) if i < len(want) else "(none)"
        diffs.append(f"argv[{i}] {shown} (want {wanted})")
    if len(have) != len(want):
        diffs.insert(0, f"{len(have)} argv words (want {len(want)})")
    return diffs[:4] + ([f"and {len(diffs) - 4} more"] if len(diffs) > 4 else [])


def compare_process(
    proc: dict[str, Any],
    *,
    want_argv: list[str],
    want_env: dict[str, str],
    prefixes: list[str],
    want_release: str,
    root: str,
) -> dict[str, Any]:
    """The secret-free comparison of a running process with the unit and environment in force.

    Returns the masked argv and its sha256, the names of the wanted environment that were checked
    and of those that differ (values are shown only for non-secret NCCL_* names with plain short
    values), the release the process runs ("" when it cannot be told: not compared) and its cwd, and
    `differs`: one line per kind of difference (argv, environment, release), empty when in sync.
    """
    have = proc["argv"]
    env = proc["environ"]
    masked = mask_argv(have, want_argv, want_env)
    argv_diff = _argv_diff(have, masked, want_argv, want_env)
    env_diff: list[str] = []
    mismatched: list[str] = []
    for name in sorted(want_env):
        want = want_env[name]
        if name not in env:
            env_diff.append(f"{name} not set")
        elif env[name] != want:
            if name.startswith("NCCL_") and not is_secret_name(name) \
                    and _SHOWABLE_VALUE.fullmatch(env[name]) and _SHOWABLE_VALUE.fullmatch(want):  # fmt: skip
                env_diff.append(f"{name}={env[name]} (want {want})")
            else:
                env_diff.append(f"{name} differs")
        else:
            continue
        mismatched.append(name)
    for name in sorted(env):
        if name not in want_env and any(name.startswith(p) for p in prefixes):
            env_diff.append(f"{_printable(name)} set (not in the unit or its environment files)")
            mismatched.append(_printable(name))
    release = process_release(proc, root)
    differs: list[str] = []
    if argv_diff:
        differs.append("argv: " + ", ".join(argv_diff))
    if env_diff:
        differs.append("environment: " + ", ".join(env_diff))
    if release and want_release and release != want_release:
        differs.append(f"release: {release} (want {want_release})")
    return {
        "argv": [_printable(w) for w in masked],
        "argv_sha256": hashlib.sha256("\0".join(masked).encode("utf-8", "surrogateescape")).hexdigest(),
        "env_checked": sorted(want_env),
        "env_mismatch": mismatched,
        "release": release,
        "cwd": _printable(proc.get("cwd", "")),
        "differs": differs,
    }
