"""Filters of the sglang_service role: check the service-only inputs and render the launch spec's argv
and environment into a systemd unit with safe quoting.

Pure Python (no Ansible import): tests/test_service_filters.py loads this file directly. Inputs are read
as bool/int by plugins/module_utils/convert.py, as the launch spec reads them. The argv itself
comes from the launch spec (fact preflight_launch_spec, plugins/module_utils/launch_spec.py); nothing here
builds flags.

- ``sglang_service_check``: the service-only inputs (a dict) -> errors naming variable, value, allowed
  (a rule of the role's inputs, called by plugins/plugin_utils/input_rules/sglang_service.py; no filter).
- ``sglang_service_exec_start``: argv -> ``ExecStart=`` value, one flag per continuation line.
- ``sglang_service_env_line``: NAME + value -> a quoted ``Environment=`` assignment.
- ``sglang_service_credential_check``: the key-delivery, device and address inputs -> errors (likewise).
- ``sglang_service_device_allow``: the /dev/nvidia* nodes the host has (+ the GPU count) -> the
  ``DeviceAllow=`` paths.
- ``sglang_service_ip_allow``: the bind address + the host's interface addresses -> the default
  ``IPAddressAllow=`` entries (localhost + the bind address's network).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_int as _int
from ansible_collections.sglang.deploy.plugins.module_utils.convert import show as _show
from ansible_collections.sglang.deploy.plugins.module_utils.convert import unset as _unset

# The one word systemd must expand: %d = the unit's credentials directory (LoadCredential=).
CONFIG_ARG = "%d/sglang-config.yaml"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# The NVIDIA nodes CUDA opens: /dev/nvidia<N>, nvidiactl, nvidia-uvm(-tools), nvidia-modeset, and
# the MIG capability nodes under /dev/nvidia-caps/.
_NVIDIA_NODE = re.compile(
    r"/dev/(nvidia[0-9]+|nvidiactl|nvidia-uvm|nvidia-uvm-tools|nvidia-modeset|nvidia-caps/nvidia-cap[0-9]+)"
)
_IP_SPECIAL = ("any", "localhost", "link-local", "multicast")
# Unquoted in a systemd command line: no whitespace, quotes, backslash, `$` (env expansion),
# `%` (specifiers) or `;` (command separator).
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_ABS_PATH = re.compile(r"^/[^\s\"'\\$%;]*$")


def sglang_service_check(cfg: Mapping[str, Any]) -> list[str]:
    """Errors of the service-only inputs (the launch inputs are checked by the launch spec)."""
    errors: list[str] = []
    name = cfg.get("name")
    if not isinstance(name, str) or not _UNIT_NAME.match(name) or name.endswith(".service"):
        errors.append(
            f"sglang_service_name={_show(name)} is not a unit name; allowed: letters, digits, : _ . @ - "
            "(without the .service suffix)"
        )
    for var, key in (("sglang_service_user", "user"), ("sglang_service_group", "group")):
        val = cfg.get(key)
        if not isinstance(val, str) or not _USER_NAME.match(val) or val == "root":
            errors.append(
                f"{var}={_show(val)} is not a system account name (and not root); allowed: [a-z_][a-z0-9_-]*"
            )
    for var, val, required in (
        ("sglang_service_launch_args_file", cfg.get("launch_args_file"), True),
        ("sglang_service_unit_dir", cfg.get("unit_dir"), True),
        ("sglang_service_cuda_home", cfg.get("cuda_home"), False),
    ):
        if not required and _unset(val):
            continue
        if not isinstance(val, str) or not _ABS_PATH.match(val) or val.rstrip("/") == "":
            errors.append(
                f"{var}={_show(val)} is not an absolute path; allowed: /absolute/path without whitespace, "
                "quotes, backslash, $, % or ;"
            )
    path_dirs = cfg.get("path_dirs")
    if not isinstance(path_dirs, list) or not all(
        isinstance(p, str) and _ABS_PATH.match(p) and ":" not in p for p in path_dirs
    ):
        errors.append(f"sglang_service_path_dirs={_show(path_dirs)} is not a list of absolute directories")
    override = cfg.get("exec_override")
    if not isinstance(override, list) or (
        override
        and (
            not all(isinstance(w, str) and w and "\n" not in w for w in override)
            or not _ABS_PATH.match(str(override[0]))
        )
    ):
        errors.append(
            f"sglang_service_exec_override={_show(override)}; allowed: [] or a list of strings whose first "
            "item is an absolute executable path"
        )
    for var, key in (
        ("sglang_service_timeout_start_sec", "timeout_start_sec"),
        ("sglang_service_timeout_stop_sec", "timeout_stop_sec"),
        ("sglang_service_health_timeout", "health_timeout"),
        ("sglang_service_health_delay", "health_delay"),
        ("sglang_service_restart_sec", "restart_sec"),
        ("sglang_service_start_limit_interval_sec", "start_limit_interval_sec"),
        ("sglang_service_start_limit_burst", "start_limit_burst"),
    ):
        num = _int(cfg.get(key))
        if num is None or num < 1:
            errors.append(f"{var}={_show(cfg.get(key))} is not a positive integer; allowed: >= 1")
    return errors


def sglang_service_systemd_quote(word: Any, raw: Sequence[str] = (CONFIG_ARG,)) -> str:
    """Quote one word for a systemd command line (ExecStart=).

    `$` and `%` are doubled so systemd neither expands variables nor specifiers in them, except
    for the exact words listed in ``raw`` (``%d/sglang-config.yaml``: systemd expands %d to the
    unit's credentials directory, where LoadCredential= put the key's YAML file).
    """
    text = str(word)
    if text in raw:
        return text
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"a systemd command line word cannot contain newlines or NUL: {text!r}")
    text = text.replace("$", "$$").replace("%", "%%")
    if _SAFE_WORD.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sglang_service_exec_start(argv: Sequence[Any], indent: str = "    ") -> str:
    """ExecStart value: launcher on the first line, then one flag (with its values) per line."""
    words = [str(w) for w in argv]
    if not words:
        raise ValueError("empty argv")
    first = 1
    # The launcher: `python -m module` stays on the first line.
    while first < len(words) and not words[first].startswith("--"):
        first += 1
    lines = [" ".join(sglang_service_systemd_quote(w) for w in words[:first])]
    group: list[str] = []
    for word in words[first:]:
        if word.startswith("--") and group:
            lines.append(" ".join(group))
            group = []
        group.append(sglang_service_systemd_quote(word))
    if group:
        lines.append(" ".join(group))
    return (" \\\n" + indent).join(lines)


def sglang_service_env_line(name: str, value: Any) -> str:
    """`"NAME=value"` for Environment=: quoted, `%` doubled (specifiers); `$` is literal there."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"not an environment variable name: {name!r}")
    text = f"{name}={value}"
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"environment value of {name} contains a newline or NUL")
    return '"' + text.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ip_entry_ok(entry: Any) -> bool:
    if not isinstance(entry, str) or _CONTROL.search(entry) or entry != entry.strip() or not entry:
        return False
    if entry in _IP_SPECIAL:
        return True
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def sglang_service_credential_check(cfg: Mapping[str, Any]) -> list[str]:
    """Errors of the key-delivery, device and address inputs (their own variables, named)."""
    errors: list[str] = []
    shim = cfg.get("launcher_shim")
    if not isinstance(shim, str) or not re.fullmatch(r"/[A-Za-z0-9_@+=:,./-]*\.py", shim) or "/../" in shim:
        errors.append(
            f"sglang_service_launcher_shim={_show(shim)} is not valid; allowed: an absolute path of "
            "letters, digits and _ @ + = : , . / - ending in .py"
        )
    legacy = cfg.get("legacy_key_files")
    if not isinstance(legacy, list) or not all(
        isinstance(p, str)
        and re.fullmatch(r"/[A-Za-z0-9_@+=:,./-]*[A-Za-z0-9_@+=:,.-]", p)
        and "/../" not in p
        for p in legacy
    ):
        errors.append(
            f"sglang_service_legacy_key_files={_show(legacy)} is not valid; allowed: a list of absolute "
            "file paths of letters, digits and _ @ + = : , . / -"
        )
    allow = cfg.get("ip_address_allow")
    if allow is not None and (not isinstance(allow, list) or not all(_ip_entry_ok(e) for e in allow)):
        bad = [e for e in allow if not _ip_entry_ok(e)] if isinstance(allow, list) else allow
        errors.append(
            f"sglang_service_ip_address_allow={_show(bad)} is not valid; allowed: null (localhost + the "
            "bind address's network) or a list of IPv4/IPv6 addresses or networks (10.0.0.0/24) and "
            f"{', '.join(_IP_SPECIAL)}"
        )
    policy = cfg.get("device_policy")
    if policy not in ("closed", "auto"):
        errors.append(f"sglang_service_device_policy={_show(policy)} is not valid; allowed: closed, auto")
    extra = cfg.get("device_allow_extra")
    if not isinstance(extra, list) or not all(
        isinstance(e, str)
        and re.fullmatch(r"(/dev/[A-Za-z0-9_./-]+|char-[A-Za-z0-9_-]+) (r?w?m?)", e)
        and not e.endswith(" ")
        for e in extra
    ):
        errors.append(
            f"sglang_service_device_allow_extra={_show(extra)} is not valid; allowed: a list of "
            "'/dev/<node> <r|w|m...>' or 'char-<class> <r|w|m...>' entries"
        )
    return errors


def sglang_service_device_allow(nodes: Sequence[Any], gpu_count: Any = 0) -> list[str]:
    """The NVIDIA device nodes for ``DeviceAllow=``: those the host has (the probe's /dev/nvidia*
    listing) and, once the driver is loaded (/dev/nvidiactl exists), the ones nvidia-modprobe creates
    at the first start (/dev/nvidia0..N-1, nvidia-uvm, nvidia-uvm-tools). No driver: none."""
    have = {str(n) for n in nodes if _NVIDIA_NODE.fullmatch(str(n))}
    if "/dev/nvidiactl" in have:
        count = _int(gpu_count) or 0
        have |= {f"/dev/nvidia{i}" for i in range(max(count, 0))}
        have |= {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

    def order(path: str) -> tuple[int, int, str]:
        m = re.fullmatch(r"/dev/nvidia([0-9]+)", path)
        return (0, int(m[1]), path) if m else (1, 0, path)

    return sorted(have, key=order)


def sglang_service_ip_allow(bind: Any, addresses: Sequence[Any]) -> list[str]:
    """Default IPAddressAllow=: localhost plus the bind address's network. ``addresses`` are the
    host's interface addresses with prefix (``10.0.0.5/24``, the probe's answer). A loopback bind:
    localhost only; a wildcard bind (0.0.0.0, ::) or a host name: the networks of every address the
    host has; one address: the network of the interface that has it (itself when none has it)."""
    nets: list[ipaddress.IPv4Interface | ipaddress.IPv6Interface] = []
    for text in addresses:
        try:
            nets.append(ipaddress.ip_interface(str(text)))
        except ValueError:
            continue
    out = ["localhost"]

    def add(net: str) -> None:
        if net not in out:
            out.append(net)

    try:
        ip = ipaddress.ip_address(str(bind))
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return out
    for iface in nets:
        if iface.ip.is_loopback:
            continue
        if ip is None or ip.is_unspecified or iface.ip == ip:
            add(str(iface.network))
    if ip is not None and not ip.is_unspecified and len(out) == 1:
        add(str(ipaddress.ip_network(ip)))
    return out


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "sglang_service_exec_start": sglang_service_exec_start,
            "sglang_service_env_line": sglang_service_env_line,
            "sglang_service_device_allow": sglang_service_device_allow,
            "sglang_service_ip_allow": sglang_service_ip_allow,
        }
