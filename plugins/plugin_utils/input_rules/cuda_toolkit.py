"""The input rules of the role cuda_toolkit (run by sglang.deploy.validate_inputs; see __init__.py).

Versions and paths, the apt repository URL (method apt), the driver gate (preflight's driver facts
against ``sglang_driver_min_branch``) and the supply chain (issue 21: the apt repository's key pinned
by fingerprint, no http:// unless allowed, every CUDA wheel pinned by sha256).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_bool, as_int
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import Errors, as_json, full

# the method as vars/main.yml resolves it (needs the OS facts: tasks/validate.yml gathers them)
FACTS = (
    "__cuda_toolkit_method",
    "__cuda_toolkit_home",
    "preflight_driver_branch",
    "preflight_gpu_count",
    "preflight_cuda_driver_ok",
    "sglang_driver_min_branch",
)
PATH = r"/[A-Za-z0-9_@+=:,./-]*"
PATH_ALLOWED = "a path starting with / made of letters, digits and _ @ + = : , . / -"
_NO_SPACE = r"[^\x00-\x20\x7f]+"
ARMORED = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


def _versions(v: Mapping[str, Any], errors: Errors) -> None:
    version, release = v.get("cuda_toolkit_expected_version"), v.get("cuda_toolkit_expected_release")
    if not full(r"[0-9]+\.[0-9]+\.[0-9]+", version):
        errors.bad("cuda_toolkit_expected_version", version, "X.Y.Z, e.g. 13.0.1 (sglang_cuda_version)")
    if not full(r"[0-9]+\.[0-9]+", release) or not str(version).startswith(f"{release}."):
        errors.bad(
            "cuda_toolkit_expected_release",
            release,
            "X.Y, the prefix of cuda_toolkit_expected_version (sglang_cuda_release)",
        )
    builds = v.get("cuda_toolkit_nvcc_builds")
    known = list(builds) if isinstance(builds, Mapping) else []
    build = builds.get(version, "") if isinstance(builds, Mapping) and isinstance(version, str) else ""
    if not full(r"[0-9]+\.[0-9]+\.[0-9]+", build):
        errors.bad(
            f"cuda_toolkit_nvcc_builds[{as_json(version)}]",
            build,
            "the nvcc build X.Y.NN of cuda_toolkit_expected_version "
            f"(sglang_cuda_nvcc_builds; known: {known})",
        )
    archs = v.get("cuda_toolkit_compile_archs")
    if not isinstance(archs, list | tuple) or not all(full(r"[0-9]+[a-z]?", str(a)) for a in archs):
        errors.bad("cuda_toolkit_compile_archs", archs, 'a list of architectures: digits, e.g. ["90", "120"]')


def _paths(v: Mapping[str, Any], errors: Errors) -> None:
    for var, optional in (
        ("cuda_toolkit_prefix", False),
        ("cuda_toolkit_existing_path", False),
        ("cuda_toolkit_apt_home", False),
        ("cuda_toolkit_wheelhouse", True),
        ("cuda_toolkit_profile_path", False),
    ):
        value = v.get(var)
        if not ((optional and value == "") or full(PATH, value)):
            errors.bad(var, value, PATH_ALLOWED + (", or empty" if optional else ""))
    url = v.get("cuda_toolkit_apt_repo_url")
    if v.get("__cuda_toolkit_method") == "apt" and not full(r"(https?|file)://\S+/", url):
        errors.bad(
            "cuda_toolkit_apt_repo_url",
            url,
            "an http(s):// or file:// URL of a flat repository ending in / "
            "(e.g. https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/)",
        )


def _known_branch(v: Mapping[str, Any]) -> bool:
    """preflight reported a driver branch of a host with GPUs (else the gate has nothing to judge)."""
    branch = v.get("preflight_driver_branch")
    return (
        full(r"[0-9]+", str(branch))
        and branch is not None
        and (as_int(v.get("preflight_gpu_count", 1)) or 0) > 0
    )


def _driver(v: Mapping[str, Any], errors: Errors) -> None:
    branch = v.get("preflight_driver_branch")
    known = _known_branch(v)
    minimum = as_int(v.get("sglang_driver_min_branch")) or 0
    if not known or as_bool(v.get("cuda_toolkit_allow_driver_mismatch")):
        return
    if int(str(branch)) < minimum or v.get("preflight_cuda_driver_ok", True) is False:
        errors.append(
            f"cuda_toolkit: preflight found NVIDIA driver branch {branch} (preflight_driver_branch) but CUDA "
            f"{v.get('cuda_toolkit_expected_version')} needs R{minimum}+ (sglang_driver_min_branch). "
            "Upgrade the driver, or set cuda_toolkit_allow_driver_mismatch=true to install anyway."
        )


def _supply(v: Mapping[str, Any], errors: Errors) -> None:
    def bad(var: str, value: Any, allowed: str) -> None:
        errors.append(f"bad cuda_toolkit input: {var}={as_json(value)}: allowed {allowed}")

    fingerprint = v.get("cuda_toolkit_apt_key_fingerprint")
    if not full(r"[0-9A-F]{40}([0-9A-F]{24})?", fingerprint):
        bad(
            "cuda_toolkit_apt_key_fingerprint",
            fingerprint,
            "the key's full fingerprint, 40 (v4) or 64 (v6) upper-case hex without spaces (gpg --show-keys)",
        )
    insecure = as_bool(v.get("cuda_toolkit_allow_insecure_repo"))
    if insecure is None:
        bad("cuda_toolkit_allow_insecure_repo", v.get("cuda_toolkit_allow_insecure_repo"), "true or false")
    url = v.get("cuda_toolkit_apt_repo_url")
    if not (full(r"https://" + _NO_SPACE, url) or (insecure and full(r"http://" + _NO_SPACE, url))):
        bad(
            "cuda_toolkit_apt_repo_url",
            url,
            "an https:// URL (http:// only with cuda_toolkit_allow_insecure_repo=true)",
        )
    key = v.get("cuda_toolkit_apt_signing_key")
    if not (
        (isinstance(key, str) and ARMORED in key)
        or full("/" + _NO_SPACE, key)
        or full("https://" + _NO_SPACE, key)
        or (insecure and full("http://" + _NO_SPACE, key))
    ):
        shown = "(an armored key)" if isinstance(key, str) and "BEGIN PGP" in key else key
        bad(
            "cuda_toolkit_apt_signing_key",
            shown,
            "an https:// key URL, an absolute path on the host or the ASCII-armored key "
            "(http:// only with cuda_toolkit_allow_insecure_repo=true)",
        )
    hashes, version = v.get("cuda_toolkit_wheel_hashes"), v.get("cuda_toolkit_expected_version")
    ok = (
        isinstance(hashes, Mapping)
        and len(hashes) > 0
        and all(re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!_-]+", str(name)) for name in hashes)
        and all(isinstance(sums, list | tuple) and sums for sums in hashes.values())
        and all(full(r"[0-9a-f]{64}", str(s)) for sums in hashes.values() for s in sums)
        and f"cuda-toolkit=={version}" in hashes
    )
    if not ok:
        bad(
            "cuda_toolkit_wheel_hashes",
            hashes,
            f'a mapping "name==version" -> [sha256 (64 lowercase hex)], with cuda-toolkit=={version} '
            "(cuda_toolkit_expected_version) among them",
        )


def errors(v: Mapping[str, Any]) -> list[str]:
    """Every error of the cuda_toolkit inputs."""
    errs = Errors()
    _versions(v, errs)
    _paths(v, errs)
    _driver(v, errs)
    _supply(v, errs)
    return [str(e) for e in errs]


def summary(v: Mapping[str, Any]) -> str:
    """The line the check prints when the inputs hold: what the driver gate judged, the method, the home."""
    gate = (
        f"branch {v.get('preflight_driver_branch')}"
        if _known_branch(v)
        else "driver unknown (no preflight facts / no GPU)"
    )
    method, home = v.get("__cuda_toolkit_method"), v.get("__cuda_toolkit_home")
    return f"driver gate: {gate}, method {method}, toolkit home {home}"
