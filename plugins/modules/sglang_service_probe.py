#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Read-only probe of the service's inputs and managed paths on the host, in one round trip.

module: sglang.deploy.sglang_service_probe (returns `probe`; changes nothing)
SPEC: {"nccl_env": path or "", "current": path, "modprobe": path, "unit": path, "service": unit name,
       "process": {...} or null, "devices": bool, "addresses": bool}
Answers what the role's host state (roles/sglang_service/vars/main.yml, applied by the module
sglang.deploy.managed_state) cannot describe, and what the unit is rendered from: the NCCL env
file's sha256 (when asked), where `current` resolves (as stat's lnk_source), whether
nvidia-modprobe exists, whether the unit file exists, `systemctl is-active` of the service, the
/dev/nvidia* character devices (`devices`: for DeviceAllow=), the interface addresses with their
prefix (`addresses`: `ip -j addr`, for the default IPAddressAllow=) and the running process' drift.
Files, directories, the user and the enablement are not read here: managed_state compares them.
Only `current` is required: the verify role asks for `current` and `service` alone (layer 5: where
current points and whether the unit is active, in one round trip).

The running process (`process`: {"unit", "root", "argv", "env", "env_files", "prefixes", "release",
"credentials": [{"name", "source"}]},
answered as `process`, null when not asked): when the unit is active (one `systemctl show -p
MainPID,ActiveState,ExecMainStartTimestamp`), its MainPID's argv and environment are compared here,
on the host, with the wanted ExecStart argv (`${NAME}` and `%x` specifiers are systemd's expansions:
`${NAME}` takes NAME's wanted value, an unknown one and a specifier match any word), the wanted
environment (`env`: the unit's Environment= plus what the controller knows of its files, overridden
by `env_files`, EnvironmentFile= files read here as KEY=VALUE, never sourced; names starting with a
`prefixes` entry that the process has but nothing wants are drift too) and the release (`release`,
or where `current` resolves now). Only a masked argv (values of secret-looking flags and secrets
replaced by ********), its sha256, names, whether they match and `differs` (one line per kind of
difference) come back: never an environment value, except the running and wanted value of a
differing non-secret NCCL_* name when short and plain. A LoadCredential= file (`credentials`) whose
source changed after systemd copied it into /run/credentials/<unit>/ for the running process (a
rotated key) is drift too, compared by sha256 only.

The unit's drop-ins (`dropins`: {"unit", "managed_dir"}, answered as `foreign_dropins`): every
drop-in systemd loads for the unit from a directory other than the role's own drop-in directory
`managed_dir` (whose files the role's host state prunes itself): what systemd says it loaded
(`systemctl show -p DropInPaths`) and, so that one written since the last daemon-reload is seen
too, the `*.conf` files of `<unit>.d/`, the unit's prefix directories (`sglang-.service.d/`) and
`service.d/` under every directory of systemd's unit search path (`systemd-analyze unit-paths`).
A drop-in an OS package owns (`dpkg-query -S`: a vendor default such as a distribution's top-level
`service.d/` file) is answered apart as `vendor_dropins` (the role never removes a package's file).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_service_probe
short_description: Read-only probe of the SGLang service's inputs and managed state on a host
description:
  - "The keys of O(spec) are below; only O(spec.current) is required (the verify role asks for it and
    O(spec.service) alone)."
  - "With C(process) in O(spec): when the unit is active, its MainPID's argv, environment and release
    are compared on the host with the wanted ExecStart argv, environment and release; C(probe.process)
    holds the masked argv, its sha256, variable names and C(differs) (what differs), never an
    environment value of a secret-looking name."
options:
  spec:
    suboptions:
      current: {description: The release link; answered as where it resolves., type: path, required: true}
      service: {description: The unit whose is-enabled / is-active state is answered., type: str}
      nccl_env: {description: The NCCL env file whose sha256 is answered (empty = not asked)., type: str}
      modprobe: {description: The nvidia-modprobe path whose existence is answered., type: path}
      groups: {description: Groups whose existence is answered., type: list, elements: str}
      dropin_dir: {description: The unit's drop-in directory (its files are listed)., type: path}
      paths:
        description: Managed directories (path, owner, group, mode) that must match.
        type: list
        elements: dict
      unit: {description: The unit file whose existence is answered., type: path}
      key_file: {description: "The API key file's path, owner, group and mode (null = no key).", type: dict}
      key_path: {description: The key file whose existence is answered (never its content)., type: path}
      files:
        description: Files whose sha256, owner, group and mode are answered.
        type: list
        elements: path
      config_paths:
        description: Configuration directories (path, owner, group, mode) that must match.
        type: list
        elements: dict
      user: {description: The service user whose passwd entry and groups are answered., type: str}
      legacy_key_files:
        description: Key files of earlier versions whose existence is answered.
        type: list
        elements: path
      devices: {description: Answer the /dev/nvidia* character devices., type: bool}
      dropins:
        description: The unit (C(unit)) and the role's drop-in directory (C(managed_dir)); the drop-ins
          systemd loads for the unit from any other directory are answered as C(foreign_dropins)
          (C(vendor_dropins) those an OS package owns).
        type: dict
      addresses: {description: Answer the interface addresses with prefix., type: bool}
      process:
        description: The wanted process (unit, root, argv, env, env_files, prefixes, release, credentials) to
          compare with the running one.
        type: dict
extends_documentation_fragment: [sglang.deploy.probe]
"""

EXAMPLES = r"""
- name: Where current points and whether the unit runs
  sglang.deploy.sglang_service_probe:
    spec:
      current: /opt/sglang/current
      service: sglang-kimi.service
  register: __probe
"""

RETURN = r"""probe: {description: The answers the docstring lists., returned: always, type: dict}"""


import glob
import json
import os
import stat
import subprocess
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.probe import (
    compare_process,
    exit_with_probe,
    parse_env_file,
    read_process,
    sha256,
)


def systemctl(verb: str, unit: str) -> str:
    try:
        done = subprocess.run(
            ["systemctl", verb, unit], capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() or "unknown"


def unit_main_process(unit: str) -> dict[str, str]:
    """MainPID, ActiveState and ExecMainStartTimestamp of the unit (one systemctl call; {} without)."""
    try:
        done = subprocess.run(
            ["systemctl", "show", "-p", "MainPID,ActiveState,ExecMainStartTimestamp", "--", unit],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def process_state(want: dict[str, Any], current_release: str) -> dict[str, Any]:
    """The unit's running process compared with the wanted argv, environment and release (see the
    docstring of this module): `differs` is empty when the process runs what the unit says, when
    the unit is not active and when the process cannot be read (then `error` says why)."""
    show = unit_main_process(str(want["unit"]))
    pid_text = show.get("MainPID", "0")
    pid = int(pid_text) if pid_text.isdigit() else 0
    out: dict[str, Any] = {
        "active": show.get("ActiveState", "unknown"),
        "pid": pid,
        "started": show.get("ExecMainStartTimestamp", ""),
        "differs": [],
    }
    if out["active"] != "active" or pid <= 0:
        return out
    env = {str(k): str(v) for k, v in (want.get("env") or {}).items()}
    for path in want.get("env_files") or []:
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                env.update(parse_env_file(fh.read()))
        except OSError:
            continue  # an optional (EnvironmentFile=-) file that does not exist
    try:
        proc = read_process(pid)
    except OSError as exc:
        out["error"] = f"cannot read /proc/{pid}: {exc.strerror or exc}"
        return out
    current = current_release if current_release.startswith("/") else ""
    out.update(
        compare_process(
            proc,
            want_argv=[str(w) for w in want.get("argv") or []],
            want_env=env,
            prefixes=[str(p) for p in want.get("prefixes") or []],
            want_release=str(want.get("release") or "") or current,
            root=str(want.get("root") or "/opt/sglang"),
        )
    )
    stale = stale_credentials(str(want["unit"]), want.get("credentials") or [])
    if stale:
        out["differs"] = [
            *out.get("differs", []),
            f"credential: {', '.join(stale)} changed since the process started",
        ]
    return out


def stale_credentials(unit: str, credentials: list[dict[str, str]]) -> list[str]:
    """Names of the unit's LoadCredential= files whose source changed after systemd copied them for
    the running process (/run/credentials/<unit>/<name> against the source, by sha256 only: a key
    is never read into a result)."""
    stale = []
    for cred in credentials:
        name, source = str(cred.get("name") or ""), str(cred.get("source") or "")
        loaded = sha256(os.path.join("/run/credentials", unit, name))
        if name and source and loaded is not None and loaded != sha256(source):
            stale.append(name)
    return stale


# systemd's unit search path for the system manager when systemd-analyze cannot say it
UNIT_PATHS = (
    "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
    "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
    "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
    "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/run/systemd/generator.late",
)  # fmt: skip


def _stdout(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def dropin_dirnames(unit: str) -> list[str]:
    """The drop-in directory names systemd reads for ``unit``: ``<unit>.d``, each dash prefix
    (``a-b-c.service`` -> ``a-b-.service.d``, ``a-.service.d``) and the type's ``service.d``."""
    stem, dot, kind = unit.rpartition(".")
    if not dot:
        return [f"{unit}.d"]
    names = [f"{unit}.d"]
    parts = stem.split("-")
    names += [f"{'-'.join(parts[:i])}-.{kind}.d" for i in range(len(parts) - 1, 0, -1)]
    return [*names, f"{kind}.d"]


def foreign_dropins(
    unit: str, managed_dir: str, loaded: list[str], unit_paths: list[str] | None = None
) -> list[str]:
    """Drop-ins of ``unit`` outside ``managed_dir``: ``loaded`` (systemd's DropInPaths) and the
    ``*.conf`` files of its drop-in directories under each unit path."""
    found = set(loaded)
    for base in unit_paths or UNIT_PATHS:
        for name in dropin_dirnames(unit):
            found.update(glob.glob(os.path.join(glob.escape(base), glob.escape(name), "*.conf")))
    managed = os.path.normpath(managed_dir)
    return sorted(p for p in found if os.path.dirname(os.path.normpath(p)) != managed)


def package_owned(paths: list[str]) -> set[str]:
    """The paths dpkg lists as a package's files (`dpkg-query -S`: `pkg[, pkg]: /path` lines)."""
    if not paths:
        return set()
    out = _stdout(["dpkg-query", "-S", "--", *paths])
    owned = {line.split(": ", 1)[1].strip() for line in out.splitlines() if ": /" in line}
    return owned & set(paths)


def unit_dropins(spec: dict[str, Any]) -> dict[str, list[str]]:
    """{"foreign": drop-ins the role removes, "vendor": package-owned ones it reports only}."""
    unit = str(spec["unit"])
    shown = _stdout(["systemctl", "show", "-p", "DropInPaths", "--value", "--", unit]).split()
    paths = [p for p in _stdout(["systemd-analyze", "unit-paths"]).splitlines() if p.startswith("/")]
    found = foreign_dropins(unit, str(spec["managed_dir"]), shown, paths or None)
    vendor = package_owned([p for p in found if p.startswith(("/usr/", "/lib/"))])
    return {"foreign": [p for p in found if p not in vendor], "vendor": sorted(vendor)}


def nvidia_devices() -> list[str]:
    """The NVIDIA character devices the host has (/dev/nvidia*, /dev/nvidia-caps/*)."""
    found = []
    for path in sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")):
        try:
            if stat.S_ISCHR(os.stat(path).st_mode):
                found.append(path)
        except OSError:
            continue
    return found


def addresses() -> list[str]:
    """Every interface address as ADDR/PREFIX (iproute2's JSON); [] when ip is missing."""
    try:
        done = subprocess.run(
            ["ip", "-j", "addr", "show"], capture_output=True, text=True, check=False, timeout=30
        )
        links = json.loads(done.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return []
    out = []
    for link in links if isinstance(links, list) else []:
        for info in link.get("addr_info", []) if isinstance(link, dict) else []:
            if isinstance(info, dict) and info.get("local") and isinstance(info.get("prefixlen"), int):
                out.append(f"{info['local']}/{info['prefixlen']}")
    return out


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    current = spec["current"]
    if os.path.islink(current):
        release = os.path.realpath(current)
    elif os.path.lexists(current):
        release = f"(not a link) {current}"
    else:
        release = "(missing)"
    return {
        "nccl_sha256": sha256(spec["nccl_env"]) if spec.get("nccl_env") else None,
        "release": release,
        "modprobe": os.path.isfile(spec["modprobe"]) if spec.get("modprobe") else False,
        "unit_exists": os.path.isfile(spec["unit"]) if spec.get("unit") else False,
        "active": systemctl("is-active", spec["service"]) if spec.get("service") else "unknown",
        "process": process_state(spec["process"], release) if spec.get("process") else None,
        "nvidia_devices": nvidia_devices() if spec.get("devices") else [],
        "addresses": addresses() if spec.get("addresses") else [],
        **(
            {f"{k}_dropins": v for k, v in unit_dropins(spec["dropins"]).items()}
            if spec.get("dropins")
            else {"foreign_dropins": [], "vendor_dropins": []}
        ),
    }


def main() -> None:
    exit_with_probe(probe)


if __name__ == "__main__":
    main()
