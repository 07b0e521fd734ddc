"""Filters of the cuda_toolkit role: what the probe (module sglang.deploy.cuda_toolkit_probe) found drifted,
and the verdict on the toolkit after the install.

Pure functions, unit-tested in tests/test_cuda_toolkit_drift.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_BUILD = re.compile(r"V(\d+\.\d+\.\d+)")
_RELEASE = re.compile(r"release (\d+\.\d+)")


def cuda_toolkit_drift_text(probe: Mapping[str, Any], expected_build: str, expected_release: str) -> str:
    """Why the toolkit at the probed home is not the pinned one ('' when it is)."""
    nvcc = probe.get("nvcc") or {}
    why: list[str] = []
    if not nvcc.get("exists"):
        why.append("bin/nvcc is missing")
    elif not nvcc.get("executable"):
        why.append("bin/nvcc is not executable")
    else:
        text = str(nvcc.get("version", ""))
        build = _BUILD.search(text)
        release = _RELEASE.search(text)
        found = f"release {release[1] if release else '?'}, V{build[1] if build else '?'}"
        if not build or build[1] != expected_build or not release or release[1] != expected_release:
            why.append(f"nvcc is {found}, not release {expected_release}, V{expected_build}")
    missing = list(probe.get("missing_files") or [])
    if missing:
        why.append("missing " + ", ".join(missing))
    return "; ".join(why)


def named_release(probe: Mapping[str, Any], method: str, home: str, package: str) -> tuple[str, str]:
    """The release the install itself names, and where it says so ('' when it names none)."""
    if method == "apt":
        installed = str(probe.get("package_version") or "")
        return (installed.rsplit("-", 1)[0] if installed else ""), f"dpkg {package} {installed}"
    if method == "wheel":
        named = str((probe.get("wheel") or {}).get("version") or "")
        return named, f"pip cuda-toolkit {named}"
    named = str(probe.get("version_json") or "")
    return named, f"{home}/version.json cuda.version={named or '?'}"


def cuda_toolkit_verdict(
    probe: Mapping[str, Any],
    expected: Mapping[str, Any],
    install: Mapping[str, Any],
) -> dict[str, Any]:
    """Judge the toolkit at the probed home after the install (for sglang.deploy.findings).

    ``expected``: version (X.Y.Z, sglang_cuda_version), release (X.Y), build (nvcc's V...),
    builds (release -> nvcc build), require_exact. ``install``: home, method, check_mode, drift,
    package (the apt method's toolkit package), purelib (the wheel method's site-packages the prefix
    links point into). The release the install names is the probe's: the package's installed version
    (apt), the venv's cuda-toolkit version (wheel), version.json (existing). The answer: errors,
    verified (the toolkit was checked and held), release, build, releases (the releases the build is),
    version and version_source (the concluded release), msg.
    """
    nvcc = probe.get("nvcc") or {}
    home, method = str(install.get("home", "")), str(install.get("method", ""))
    check_mode = bool(install.get("check_mode"))
    answer: dict[str, Any] = {"errors": [], "verified": False, "release": "", "build": "", "releases": []}
    version, build_pin = str(expected.get("version", "")), str(expected.get("build", ""))
    if not nvcc.get("executable"):
        if method == "existing":
            answer["errors"].append(
                f"cuda_toolkit: cuda_toolkit_method=existing but cuda_toolkit_existing_path={home} has no"
                f" executable bin/nvcc (expected CUDA {version} there)."
            )
        elif not check_mode:
            answer["errors"].append(
                f"cuda_toolkit: no executable nvcc at {home}/bin/nvcc after the {method} install"
            )
        answer["msg"] = "check mode: nvcc not installed yet, verification happens on the real run"
        return answer
    wheel = probe.get("wheel") or {}
    if method == "wheel" and wheel.get("python") and wheel.get("purelib") != install.get("purelib"):
        answer["errors"].append(
            f"cuda_toolkit: the venv's site-packages is {wheel.get('purelib')}, but the prefix links point"
            f" into {install.get('purelib') or '(unknown)'} (predicted from cuda_toolkit_wheel_python);"
            " a rerun links the venv's own"
        )
        return answer
    if check_mode and install.get("drift") and method != "existing":
        answer["msg"] = (
            "check mode: the toolkit drifted and is reinstalled; verification happens on the real run"
        )
        return answer
    text = str(nvcc.get("version", ""))
    found_build, found_release = _BUILD.search(text), _RELEASE.search(text)
    build = found_build[1] if found_build else ""
    release = found_release[1] if found_release else ""
    builds = expected.get("builds") or {}
    releases = [str(k) for k, v in builds.items() if v == build]
    answer.update(release=release, build=build, releases=releases)
    missing = list(probe.get("missing_files") or [])
    if release != expected.get("release") or build != build_pin or missing:
        named = " or ".join(releases) if releases else "release not in sglang_cuda_nvcc_builds"
        said = text.strip().rsplit("\n", maxsplit=1)[-1] if text.strip() else ""
        answer["errors"].append(
            f"cuda_toolkit: wrong CUDA toolkit at {home}:"
            f" found nvcc release {release or '?'}, V{build or '?'}"
            f" (= CUDA {named}); expected release {expected.get('release')}, V{build_pin}"
            f" (= CUDA {version}, sglang_cuda_version)."
            + (f" Missing: {', '.join(missing)}." if missing else "")
            + f" nvcc said: {said}"
        )
        return answer
    precise, source = named_release(probe, method, home, str(install.get("package", "")))
    concluded = precise or version
    source = source if precise else f"nvcc build V{build} (shared by {', '.join(releases)})"
    answer.update(version=concluded, version_source=source)
    if concluded != version and (expected.get("require_exact") or concluded not in releases):
        exact = " (cuda_toolkit_require_exact_release=true)" if expected.get("require_exact") else ""
        answer["errors"].append(
            f"cuda_toolkit: the install at {home} is CUDA {concluded} ({source}), expected {version}"
            f" (sglang_cuda_version){exact}"
        )
        return answer
    answer["verified"] = True
    named = " or ".join(releases)
    answer["msg"] = (
        f"nvcc release {release}, V{build} = CUDA {named}; concluded CUDA {concluded} from {source}"
    )
    if concluded != version:
        answer["warnings"] = [
            f"cuda_toolkit: the install at {home} is CUDA {concluded} ({source}) - NOT the pinned {version},"
            f" accepted: same nvcc build V{build} (cuda_toolkit_require_exact_release=false)"
        ]
    return answer


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "cuda_toolkit_drift_text": cuda_toolkit_drift_text,
            "cuda_toolkit_verdict": cuda_toolkit_verdict,
        }
