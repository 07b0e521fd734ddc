"""The input rules of the role preflight (run by sglang.deploy.validate_inputs; see __init__.py).

The version manifest (each pin's format, the CUDA pins consistent), the lab OS list, ``sglang_root``,
the launch inputs (the one launch spec, plugins/module_utils/launch_spec.py: only its errors, which
never hold the API key), the disk floor, ``sglang_allow_known_bad``, and for a routed fleet (group
``sglang_routers`` not empty) the rolling upgrade's inputs (docs/rolling-upgrade.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.launch_spec import resolve
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import as_json, full

FACTS = (
    "__preflight_launch_inputs",
    "groups",
    "sglang_allow_known_bad",
    "sglang_router_drain_timeout_s",
    "sglang_router_min_healthy",
    "sglang_router_url",
    "sglang_router_worker_url",
    "sglang_service_timeout_stop_sec",
)
PEP440 = r"[0-9]+\.[0-9]+\.[0-9]+((a|b|rc|\.post|\.dev)[0-9]+)*"
# (name, pattern the whole value must match, what is allowed) of each version manifest entry
MANIFEST = (
    (
        "sglang_os_distribution",
        r"[A-Za-z][A-Za-z0-9 ._-]*",
        "a distribution name as ansible_facts.distribution spells it (Ubuntu, Debian)",
    ),
    ("sglang_os_version", r"[0-9]+(\.[0-9]+)?", "X or X.Y, e.g. 24.04"),
    ("sglang_python_version", r"3\.[0-9]+", "3.Y, e.g. 3.12"),
    ("sglang_driver_min_branch", r"[1-9][0-9]{2}", "a 3-digit driver branch, e.g. 580"),
    ("sglang_cuda_version", r"[0-9]+\.[0-9]+\.[0-9]+", "X.Y.Z, e.g. 13.0.1"),
    ("sglang_cuda_release", r"[0-9]+\.[0-9]+", "X.Y, e.g. 13.0"),
    ("sglang_torch_version", r"[0-9]+\.[0-9]+\.[0-9]+", "X.Y.Z without local tag, e.g. 2.9.1"),
    ("sglang_torch_cuda_tag", r"cu[0-9]{3}", "cuXYZ, e.g. cu130"),
    ("sglang_sgl_kernel_version", PEP440, "a PEP 440 release X.Y.Z[rcN|.postN], e.g. 0.3.21"),
    ("sglang_flashinfer_version", PEP440, "a PEP 440 release X.Y.Z[rcN|.postN], e.g. 0.6.4"),
    ("sglang_version", PEP440, "a PEP 440 release X.Y.Z[rcN|.postN], e.g. 0.5.9"),
    ("sglang_transformers_version", PEP440, "a PEP 440 release X.Y.Z, e.g. 4.57.1"),
    (
        "sglang_git_commit",
        r"[0-9a-f]{40}",
        "the full commit id: 40 lower-case hex digits (a short id can name another commit)",
    ),
    ("sglang_nccl_expected_version", r"[0-9]+\.[0-9]+\.[0-9]+", "X.Y.Z, e.g. 2.27.7"),
)
BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0", "1.0", "0.0")
ROUTER_URL = r"https?://[A-Za-z0-9._-]+(:[0-9]{1,5})?"


def _manifest(v: Mapping[str, Any], errs: list[str]) -> None:
    for name, pattern, allowed in MANIFEST:
        value = str(v.get(name))
        if not full(pattern, value):
            errs.append(f"{name}={as_json(value)} is not valid: allowed {allowed} (regex {pattern})")
    version, release = str(v.get("sglang_cuda_version")), str(v.get("sglang_cuda_release"))
    builds = v.get("sglang_cuda_nvcc_builds")
    keys = list(builds) if isinstance(builds, Mapping) else []
    tag = v.get("sglang_torch_cuda_tag")
    if not (
        ".".join(version.split(".")[:2]) == release
        and tag == "cu" + release.replace(".", "")
        and version in keys
    ):
        errs.append(
            f"Inconsistent CUDA pins: sglang_cuda_version={as_json(v.get('sglang_cuda_version'))}, "
            f"sglang_cuda_release={as_json(v.get('sglang_cuda_release'))}, "
            f"sglang_torch_cuda_tag={as_json(tag)}, "
            f"sglang_cuda_nvcc_builds keys={as_json(keys)}. Allowed: sglang_cuda_release = major.minor of "
            "sglang_cuda_version, sglang_torch_cuda_tag = cu + that release without the dot, and "
            "sglang_cuda_version a key of sglang_cuda_nvcc_builds."
        )


def _host(v: Mapping[str, Any], errs: list[str]) -> None:
    entries = v.get("sglang_os_lab_allowed")
    for entry in entries if isinstance(entries, list | tuple) else [entries]:
        item = entry if isinstance(entry, Mapping) else {}
        if not (
            full(r"[A-Za-z][A-Za-z0-9 ._-]*", str(item.get("distribution")))
            and full(r"[0-9]+(\.[0-9]+)?", str(item.get("version")))
        ):
            errs.append(
                f"sglang_os_lab_allowed entry {as_json(entry)} is not valid: "
                "allowed {distribution: <name>, version: X or X.Y}"
            )
    root = v.get("sglang_root")
    if not (full(r"/[A-Za-z0-9_@+=:,./-]*", root) and str(root).rstrip("/")):
        errs.append(
            f"sglang_root={as_json(root)} is not valid: allowed an absolute path other than / made of "
            "letters, digits and _ @ + = : , . / -, e.g. /opt/sglang"
        )
    disk = v.get("sglang_min_free_disk_gib")
    if not full("[0-9]+", str(disk)):
        errs.append(f"sglang_min_free_disk_gib={as_json(disk)} is not valid: allowed an integer >= 0 (GiB)")
    known_bad = v.get("sglang_allow_known_bad")
    if str(known_bad).lower() not in BOOL_WORDS:
        errs.append(
            f"sglang_allow_known_bad={as_json(known_bad)} is not valid: allowed true or false "
            "(deploy a combination a failed verdict recorded on this host anyway)"
        )


def _launch(v: Mapping[str, Any], errs: list[str]) -> None:
    """The launch inputs through the one launch spec; its errors never hold the API key."""
    inputs = v.get("__preflight_launch_inputs")
    if isinstance(inputs, Mapping):
        errs.extend(f"invalid launch input: {e}" for e in resolve(inputs)["errors"])


def _roll(v: Mapping[str, Any], errs: list[str]) -> None:
    """The rolling upgrade's inputs, for a routed fleet only (group sglang_routers not empty)."""
    groups = v.get("groups")
    if not (isinstance(groups, Mapping) and groups.get("sglang_routers")):
        return
    drain = str(v.get("sglang_router_drain_timeout_s", "(undefined)"))
    healthy = str(v.get("sglang_router_min_healthy", "(undefined)"))
    if not (full("[0-9]{1,6}", drain) and int(drain) >= 1 and full("[0-9]{1,4}", healthy)):
        errs.append(
            f"sglang_router_drain_timeout_s={as_json(drain)}, sglang_router_min_healthy={as_json(healthy)}: "
            "allowed: the drain timeout a whole number of seconds 1-999999, min_healthy a whole number 0-9999"
        )
    for name in ("sglang_router_url", "sglang_router_worker_url"):
        value = str(v.get(name, ""))
        if not full(ROUTER_URL, value):
            errs.append(
                f"{name}={as_json(value)} is not valid: allowed http(s)://<host>[:<port>] "
                "(host letters, digits, '.', '_', '-'; no path)"
            )
    stop = v.get("sglang_service_timeout_stop_sec", 120)
    stop_s = int(str(stop)) if re.fullmatch(r"\s*[+-]?[0-9]+\s*", str(stop)) else 0
    drain_s = int(drain) if full("[0-9]{1,6}", drain) else 0
    if stop_s < drain_s:
        errs.append(
            f"sglang_service_timeout_stop_sec={as_json(stop)} is shorter than "
            f"sglang_router_drain_timeout_s={as_json(v.get('sglang_router_drain_timeout_s'))}: allowed "
            f"sglang_service_timeout_stop_sec >= {drain} (the unit's TimeoutStopSec must cover the drain "
            "timeout; raise it, or lower the drain timeout)"
        )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of preflight's own inputs."""
    errs: list[str] = []
    _manifest(v, errs)
    _host(v, errs)
    _launch(v, errs)
    _roll(v, errs)
    return errs
