"""The input rules of the role nccl_env (run by sglang.deploy.validate_inputs; see __init__.py).

The variable names and values themselves are checked by the NCCL variable rule of
plugins/filter/nccl_env.py (``nccl_env_errors``, also run on the composed file by
roles/nccl_env/tasks/main.yml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.filter.nccl_env import (
    DEFAULT_NAMES_ALLOWED,
    check_name,
    nccl_env_errors,
)
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import Errors, as_json, full

FACTS = ("preflight_interconnect", "preflight_launch_spec", "inventory_hostname")
FILE = r"/[A-Za-z0-9_@+=:,./-]*[A-Za-z0-9_@+=:,.-]"
FILE_ALLOWED = "an absolute file path of letters, digits and _ @ + = : , . / -"


def _profile(v: Mapping[str, Any], errors: Errors) -> None:
    profile = v.get("nccl_env_profile")
    allowed = v.get("nccl_env_profiles_allowed") or []
    profile_vars = v.get("nccl_env_profile_vars")
    defined = list(profile_vars) if isinstance(profile_vars, Mapping) else []
    if not (
        isinstance(profile, str)
        and profile in allowed
        and (profile in ("auto", "tuned") or profile in defined)
    ):
        errors.append(
            f"nccl_env_profile={as_json(profile)} is not a known profile; allowed: "
            f"{', '.join(map(str, allowed))} "
            f"(with variables defined in nccl_env_profile_vars: {', '.join(defined)})"
        )
    if profile == "tuned":
        tuned = v.get("nccl_env_tuned")
        if not (isinstance(tuned, Mapping) and isinstance(tuned.get("vars"), Mapping)):
            errors.append(
                "nccl_env_profile=tuned (sglang_nccl_profile) needs this host's recorded autotune result, "
                f"nccl_env_tuned (host_vars/{v.get('inventory_hostname', '<host>')}/nccl_tuned.yml, "
                "written by playbooks/autotune.yml --tags autotune_nccl); "
                f"got nccl_env_tuned={as_json(tuned)}: "
                "run the autotune first, or pick auto, pcie, nvlink or none"
            )


def _choices(v: Mapping[str, Any], errors: Errors) -> None:
    for var, value, allowed in (
        ("nccl_env_interconnect", v.get("nccl_env_interconnect", ""), ("", "nvlink", "pcie", "none")),
        ("nccl_env_safety_apply", v.get("nccl_env_safety_apply"), ("nvlink", "always", "never")),
    ):
        if value not in allowed:
            errors.bad(var, value, ", ".join(repr(a) if a == "" else a for a in allowed))
    if "preflight_interconnect" in v and v["preflight_interconnect"] not in ("nvlink", "pcie", "none"):
        errors.bad("preflight_interconnect", v["preflight_interconnect"], "nvlink, pcie, none")


def _file(v: Mapping[str, Any], errors: Errors) -> None:
    path = v.get("nccl_env_file")
    if not full(FILE, path):
        errors.bad("nccl_env_file", path, FILE_ALLOWED)
        return
    spec = v.get("preflight_launch_spec")
    if isinstance(spec, Mapping):
        loaded = (spec.get("nccl") or {}).get("env_file")
        if path != loaded:
            errors.bad(
                "nccl_env_file",
                path,
                f"the file the launch spec loads (sglang_nccl_env_file={as_json(loaded)}): "
                "set sglang_nccl_env_file instead",
            )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the nccl_env inputs."""
    errs = Errors()
    _profile(v, errs)
    _choices(v, errs)
    _file(v, errs)
    names = v.get("nccl_env_names_allowed")
    allowed = tuple(names) if isinstance(names, list | tuple) else DEFAULT_NAMES_ALLOWED
    dicts = {var: v.get(var) for var in ("nccl_env_extra", "nccl_env_safety", "nccl_env_profile_vars")}
    for var, value in dicts.items():
        if not isinstance(value, Mapping):
            errs.bad(
                var,
                value,
                "a dict NAME: value" if var != "nccl_env_profile_vars" else "a dict profile: {NAME: value}",
            )
    profile_vars = dicts["nccl_env_profile_vars"]
    if isinstance(profile_vars, Mapping):
        for profile, env in profile_vars.items():
            if not isinstance(env, Mapping):
                errs.bad(f"nccl_env_profile_vars.{profile}", env, "a dict NAME: value")
            else:
                errs.extend(f"nccl_env_profile_vars.{profile}: {e}" for e in nccl_env_errors(env, allowed))
    for var in ("nccl_env_extra", "nccl_env_safety"):
        if isinstance(dicts[var], Mapping):
            errs.extend(f"{var}: {e}" for e in nccl_env_errors(dicts[var], allowed))
    tuned = v.get("nccl_env_tuned")
    if (
        v.get("nccl_env_profile") == "tuned"
        and isinstance(tuned, Mapping)
        and isinstance(tuned.get("vars"), Mapping)
    ):
        errs.extend(f"nccl_env_tuned.vars: {e}" for e in nccl_env_errors(tuned["vars"], allowed))
    unset = v.get("nccl_env_unset")
    if not isinstance(unset, list | tuple):
        errs.bad("nccl_env_unset", unset, "a list of variable names")
    else:
        errs.extend(f"nccl_env_unset: {e}" for e in (check_name(n, allowed) for n in unset) if e)
    return [str(e) for e in errs]
