"""The input rules of the role sglang_service (run by sglang.deploy.validate_inputs; see __init__.py).

Service-only inputs: the launch inputs (flags, endpoint, auth) were checked and resolved once by the
preflight role (fact preflight_launch_spec). The unit's own inputs and the key-delivery, device and
address inputs are checked by ``sglang_service_check`` / ``sglang_service_credential_check`` of
plugins/filter/sglang_service.py; the inputs the unit template renders verbatim here (issue 21: a newline
or a space there would add a directive or a word to the root-owned unit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.filter.sglang_service import (
    sglang_service_check,
    sglang_service_credential_check,
)
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import Errors, full

FACTS: tuple[str, ...] = ()
SYSCALL = r"@?[a-z0-9_-]+(:[A-Za-z0-9_]+)?"
# StateDirectory=/CacheDirectory= names: relative, no `.`/`..` component, no empty part
RELATIVE_DIR = r"(?!\.\.?(/|\Z))[A-Za-z0-9_.-]+(/(?!\.\.?(/|\Z))[A-Za-z0-9_.-]+)*"
DESCRIPTION = r"[A-Za-z0-9 _.,:;'()/+=@-]{0,200}"
FILE = r"/[A-Za-z0-9_@+=:,./-]*[A-Za-z0-9_@+=:,.-]"

_SERVICE = (
    "name", "user", "group", "exec_override", "launch_args_file", "unit_dir", "cuda_home", "path_dirs",
    "timeout_start_sec", "timeout_stop_sec", "health_timeout", "health_delay", "restart_sec",
    "start_limit_interval_sec", "start_limit_burst",
)  # fmt: skip
_CREDENTIAL = ("launcher_shim", "legacy_key_files", "ip_address_allow", "device_policy", "device_allow_extra")


def _verbatim(v: Mapping[str, Any], errors: Errors) -> None:
    for var, allowed in (
        (
            "sglang_service_syscall_filter",
            'a list of system call names or @groups (e.g. "@system-service", pidfd_getfd); [] = no filter',
        ),
        (
            "sglang_service_syscall_deny",
            'a list of system call names or @groups (e.g. "@privileged"); [] = none denied',
        ),
    ):
        value = v.get(var)
        if not (isinstance(value, list | tuple) and all(full(SYSCALL, item) for item in value)):
            errors.bad(var, value, allowed)
    for var, under in (("sglang_service_state_dir", "/var/lib"), ("sglang_service_cache_dir", "/var/cache")):
        if not full(RELATIVE_DIR, v.get(var)):
            errors.bad(
                var,
                v.get(var),
                f"a relative directory under {under} of letters, digits and _ . - "
                "(parts joined by /, no . or .. part)",
            )
    if not full(DESCRIPTION, v.get("sglang_service_description")):
        errors.bad(
            "sglang_service_description",
            v.get("sglang_service_description"),
            "at most 200 letters, digits, spaces and _ . , : ; ' ( ) / + = @ - "
            "(no % specifier, no backslash); empty = the default",
        )
    if not full(FILE, v.get("sglang_service_nvidia_modprobe")):
        errors.bad(
            "sglang_service_nvidia_modprobe",
            v.get("sglang_service_nvidia_modprobe"),
            "an absolute file path of letters, digits and _ @ + = : , . / -",
        )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the sglang_service inputs."""
    errs = Errors()
    errs += sglang_service_check({key: v.get(f"sglang_service_{key}") for key in _SERVICE})
    errs += sglang_service_credential_check({key: v.get(f"sglang_service_{key}") for key in _CREDENTIAL})
    _verbatim(v, errs)
    return [str(e) for e in errs]
