"""Filters of the nccl_env role: build and validate the NCCL environment of the SGLang service.

Pure Python (no Ansible import): tests/test_nccl_env_filters.py loads this file directly. The profile is
decided by plugins/module_utils/nccl_profile.py (the one decider, also called by the launch spec and
preflight's export), the topology read by plugins/module_utils/gpu_facts.py (preflight's parser).

- ``nccl_env_build``: profile + interconnect + safety + user extras/unset -> resolved profile,
  reason line for the file header and the final ordered variable dict (values as strings).
- ``nccl_profile``: the profile decision alone (preflight's ``preflight_nccl_profile_resolved``).
- ``nccl_env_errors``: list of human-readable errors for a variable dict (empty = valid). Every
  message names the variable, the bad value and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.gpu_facts import interconnect_from_topo
from ansible_collections.sglang.deploy.plugins.module_utils.nccl_profile import resolve_profile

PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
NAME_RE = re.compile(r"^NCCL_[A-Z0-9_]+$")
# Characters a value may hold: safe unquoted in a systemd EnvironmentFile and in `set -a; . file`.
VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/^+=@%-]*$")
VALUE_CHARS = "letters, digits and _ . , : / ^ + = @ % -"
DEFAULT_NAMES_ALLOWED = ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
BOOLEAN_NAMES = (
    "NCCL_NVLS_ENABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


def _as_str(value: Any) -> str:
    """Render a YAML scalar the way it goes into the file (bools as 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _check_list(name: str, value: str, known: Iterable[str]) -> str | None:
    """NCCL_PROTO / NCCL_ALGO syntax: comma list of names, optionally prefixed by ^ (exclude)."""
    known = tuple(known)
    body = value[1:] if value.startswith("^") else value
    items = body.split(",")
    lowered = {k.lower(): k for k in known}
    bad = [i for i in items if i.strip().lower() not in lowered]
    if not body or bad:
        return (
            f"{name}={value!r}: unknown name(s) {', '.join(repr(b) for b in bad) or repr(body)}; allowed: "
            f"comma-separated list of {', '.join(known)} (prefix the list with ^ to exclude)"
        )
    return None


def _check_positive_int(name: str, value: str) -> str | None:
    if not re.fullmatch(r"[0-9]+", value) or int(value) <= 0:
        return f"{name}={value!r}: not a positive integer; allowed: integer >= 1"
    return None


def _check_nthreads(name: str, value: str) -> str | None:
    if not re.fullmatch(r"[0-9]+", value) or not (64 <= int(value) <= 512) or int(value) % 64:
        return f"{name}={value!r}: allowed: 64, 128, 192, 256, 320, 384, 448 or 512 (64..512, multiple of 64)"
    return None


def _check_p2p_level(name: str, value: str) -> str | None:
    if value not in P2P_LEVELS and not re.fullmatch(r"[0-5]", value):
        return f"{name}={value!r}: allowed: {', '.join(P2P_LEVELS)} or an integer 0-5"
    return None


def _check_bool(name: str, value: str) -> str | None:
    if value not in ("0", "1"):
        return f"{name}={value!r}: allowed: 0 or 1"
    return None


CHECKS: dict[str, Callable[[str, str], str | None]] = {
    "NCCL_PROTO": lambda n, v: _check_list(n, v, PROTOCOLS),
    "NCCL_ALGO": lambda n, v: _check_list(n, v, ALGORITHMS),
    "NCCL_MAX_NCHANNELS": _check_positive_int,
    "NCCL_MIN_NCHANNELS": _check_positive_int,
    "NCCL_BUFFSIZE": _check_positive_int,
    "NCCL_NTHREADS": _check_nthreads,
    "NCCL_P2P_LEVEL": _check_p2p_level,
    **dict.fromkeys(BOOLEAN_NAMES, _check_bool),
}


def check_name(name: Any, names_allowed: Iterable[str] = DEFAULT_NAMES_ALLOWED) -> str | None:
    """Error for a variable name that is neither NCCL_* (upper case) nor an allowed safety var."""
    allowed = tuple(names_allowed)
    if isinstance(name, str) and (NAME_RE.match(name) or name in allowed):
        return None
    return (
        f"variable name {name!r} is not allowed; allowed: names matching ^NCCL_[A-Z0-9_]+$ "
        f"or one of {', '.join(allowed)}"
    )


def nccl_env_errors(
    env: Mapping[str, Any], names_allowed: Iterable[str] = DEFAULT_NAMES_ALLOWED
) -> list[str]:
    """All problems of a NAME -> value dict (empty list: valid)."""
    if not isinstance(env, Mapping):
        return [f"expected a dict NAME: value, got {type(env).__name__} {env!r}"]
    allowed = tuple(names_allowed)
    errors: list[str] = []
    for name, raw in env.items():
        err = check_name(name, allowed)
        if err:
            errors.append(err)
            continue
        if raw is None or isinstance(raw, Mapping | list | tuple | set | float):
            errors.append(f"{name}={raw!r}: not a scalar string/integer value")
            continue
        value = _as_str(raw)
        if not VALUE_RE.match(value):
            errors.append(f"{name}={value!r}: bad characters; allowed: {VALUE_CHARS}")
            continue
        check = CHECKS.get(name)
        if check is not None:
            err = check(name, value)
            if err:
                errors.append(err)
    lo, hi = env.get("NCCL_MIN_NCHANNELS"), env.get("NCCL_MAX_NCHANNELS")
    if not errors and lo is not None and hi is not None and int(_as_str(lo)) > int(_as_str(hi)):
        errors.append(
            f"NCCL_MIN_NCHANNELS={_as_str(lo)!r} is above NCCL_MAX_NCHANNELS={_as_str(hi)!r}; "
            "allowed: MIN_NCHANNELS <= MAX_NCHANNELS"
        )
    return errors


def nccl_env_build(
    profile: str,
    profile_vars: Mapping[str, Mapping[str, Any]],
    *,
    interconnect: str = "",
    preflight_interconnect: str = "",
    detected_interconnect: str = "",
    safety: Mapping[str, Any] | None = None,
    safety_mode: str = "nvlink",
    extra: Mapping[str, Any] | None = None,
    unset: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Resolve the profile and compose profile vars -> safety vars -> extra -> unset.

    Returns {profile, interconnect, reason, vars}. Inputs are assumed validated by the role's
    asserts (profile/interconnect names); the composed vars are validated with nccl_env_errors.
    """
    decided = resolve_profile(
        profile,
        interconnect=interconnect,
        preflight_interconnect=preflight_interconnect,
        detected_interconnect=detected_interconnect,
    )
    resolved, cls, reason = decided["profile"], decided["interconnect"], decided["reason"]
    env: dict[str, str] = {}
    for name, value in (profile_vars.get(resolved) or {}).items():
        env[name] = _as_str(value)
    if safety and (safety_mode == "always" or (safety_mode == "nvlink" and "nvlink" in (cls, resolved))):
        for name, value in safety.items():
            env[name] = _as_str(value)
    for name, value in (extra or {}).items():
        env[name] = _as_str(value)
    for name in unset or ():
        env.pop(name, None)
    return {"profile": resolved, "interconnect": cls, "reason": reason, "vars": env}


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "nccl_env_build": nccl_env_build,
            "nccl_env_errors": nccl_env_errors,
            "nccl_env_name_errors": lambda names, allowed=DEFAULT_NAMES_ALLOWED: [
                e for e in (check_name(n, allowed) for n in names) if e
            ],
            "nccl_env_interconnect_from_topo": interconnect_from_topo,
            "nccl_profile": resolve_profile,
        }
