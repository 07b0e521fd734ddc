#!/usr/bin/python
"""Read-only probe of the CUDA toolkit on the host, in one round trip (run by the host's python3).

module: sglang.deploy.cuda_toolkit_probe (returns `probe`; SPEC is its `spec` option)
SPEC: {"home": CUDA_HOME, "packages": [dpkg names], "needed": [files under home], "selftest_state": path,
       "selftest_key": str, "package": dpkg name (apt method), "wheel": {"venv": path, "interpreter": python}
       (wheel method)}
Answers: missing dpkg packages; nvcc (exists, `nvcc --version` output, sha256); toolkit files that are
missing; the dpkg package that owns nvcc; the self-test cache key (selftest_key + nvcc's sha256) and
whether the state file holds it; the release the install names: the toolkit package's installed version
(apt), home/version.json's cuda.version (an existing toolkit); for the wheel method the venv's
cuda-toolkit version and its site-packages (before the venv exists: the one `interpreter -m venv` will
make). The role's files,
directories and links are not probed here: sglang.deploy.managed_state compares and applies them.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: cuda_toolkit_probe
short_description: Read-only probe of the CUDA toolkit (prerequisites, nvcc, self-test cache, wheel venv)
description:
  - Answers the missing dpkg packages; nvcc (exists, C(nvcc --version) output, sha256); the toolkit files
    that are missing; the dpkg package that owns nvcc; the self-test cache key and whether the state file
    holds it; the release the install names (O(spec.package)'s installed version, C(version.json)'s
    C(cuda.version) under O(spec.home)); for the wheel method the venv's cuda-toolkit version and its
    site-packages (before the venv exists, the one O(spec.wheel.interpreter) C(-m venv) will create, so
    that the prefix links can be described before the install).
  - The role's files, directories and links are compared and applied by M(sglang.deploy.managed_state).
options:
  spec:
    suboptions:
      home: {description: The toolkit home (CUDA_HOME) probed., type: path, required: true}
      packages: {description: dpkg packages that must be installed., type: list, elements: str, default: []}
      needed:
        description: Files under O(spec.home) the toolkit must have.
        type: list
        elements: str
        default: []
      selftest_state: {description: The self-test cache file., type: path}
      selftest_key: {description: The self-test inputs (with nvcc's sha256 the cache key)., type: str}
      package: {description: The toolkit's dpkg package (apt method) whose version is read., type: str}
      wheel:
        description: The wheel method's layout.
        type: dict
        suboptions:
          venv: {description: The venv holding the cuda-toolkit wheels., type: path}
          interpreter:
            description: The Python that creates the venv (asked for its version while the venv is missing).
            type: str
            default: python3
extends_documentation_fragment: [sglang.deploy.probe]
"""

EXAMPLES = r"""
- name: Probe the toolkit
  sglang.deploy.cuda_toolkit_probe:
    spec:
      home: /usr/local/cuda-13.0
      packages: [python3-debian, python3-apt]
      needed: [bin/nvcc, include/cuda_runtime.h]
      selftest_state: /var/lib/sglang-deploy/cuda-selftest.json
      selftest_key: '{"release": "13.0"}'
  register: __probe
"""

RETURN = r"""probe: {description: The answers the docstring lists., returned: always, type: dict}"""


import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.probe import (
    exit_with_probe,
    sha256,
    site_packages,
)


def dpkg_status() -> dict[str, str]:
    """{package: version} of the packages dpkg lists as installed (`install ok installed`, or `hold ok
    installed`: the apt method holds the toolkit package)."""
    ok: dict[str, str] = {}
    try:
        text = Path("/var/lib/dpkg/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ok
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith(" ")
        )
        if fields.get("Status", "").split()[1:] == ["ok", "installed"]:
            ok[fields.get("Package", "").strip()] = fields.get("Version", "").strip()
    return ok


def dpkg_owner(path: str) -> str:
    """The package whose file list names path ('' when none does)."""
    info = Path("/var/lib/dpkg/info")
    try:
        lists = list(info.glob("*.list"))
    except OSError:
        return ""
    for lst in lists:
        try:
            if path in lst.read_text(encoding="utf-8", errors="replace").splitlines():
                return lst.name[: -len(".list")].split(":", 1)[0]
        except OSError:
            continue
    return ""


def nvcc_info(home: Path) -> dict[str, Any]:
    nvcc = home / "bin" / "nvcc"
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        return {"exists": nvcc.exists(), "executable": False, "version": "", "sha256": None}
    try:
        out = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except OSError as exc:
        out = f"(nvcc failed to run: {exc})"
    return {"exists": True, "executable": True, "version": out, "sha256": sha256(nvcc.resolve())}


def dist_version(purelib: Path, name: str) -> str:
    for info in purelib.glob("*.dist-info"):
        try:
            head = (info / "METADATA").read_text(encoding="utf-8", errors="replace").split("\n\n", 1)[0]
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in head.splitlines() if ":" in line)
        if fields.get("Name", "").strip().lower().replace("_", "-") == name:
            return fields.get("Version", "").strip()
    return ""


def venv_purelib(venv: Path, interpreter: str) -> str:
    """The venv's site-packages: the one it has, else the one `interpreter -m venv` creates on POSIX
    (lib/pythonX.Y/site-packages, X.Y the interpreter's version); '' when neither can be told."""
    found = site_packages(venv)
    if found:
        return str(found)
    try:
        out = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    version = out.stdout.strip()
    if out.returncode != 0 or not re.fullmatch(r"[0-9]+\.[0-9]+", version):
        return ""
    return str(venv / "lib" / f"python{version}" / "site-packages")


def version_json(home: Path) -> str:
    """The toolkit's own release (version.json's cuda.version, '' when there is none)."""
    try:
        doc = json.loads((home / "version.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    cuda = doc.get("cuda") if isinstance(doc, dict) else None
    return str(cuda.get("version", "")) if isinstance(cuda, dict) else ""


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    home = Path(spec["home"])
    installed = dpkg_status()
    nvcc = nvcc_info(home)
    key = hashlib.sha256(f"{spec.get('selftest_key', '')}|{nvcc['sha256']}".encode()).hexdigest()
    try:
        state = json.loads(Path(spec["selftest_state"]).read_text(encoding="utf-8"))
    except (OSError, KeyError, ValueError):
        state = {}
    cached = isinstance(state, dict) and state.get("key") == key
    out: dict[str, Any] = {
        "packages_missing": [p for p in spec.get("packages", []) if p not in installed],
        "nvcc": nvcc,
        "missing_files": [f for f in spec.get("needed", []) if not (home / f).exists()],
        "selftest_key": key,
        "selftest_cached": cached and bool(nvcc["sha256"]),
        "selftest_gpu_run": state.get("gpu_run", "not run") if cached else "not run",
        "version_json": version_json(home),
    }
    if spec.get("package"):
        out["package_version"] = installed.get(str(spec["package"]), "")
    if spec.get("dpkg_owner"):
        out["nvcc_package"] = dpkg_owner(str(home / "bin" / "nvcc"))
    wheel = spec.get("wheel")
    if wheel:
        venv = Path(wheel["venv"])
        purelib = site_packages(venv)
        out["wheel"] = {
            "python": (venv / "bin" / "python").exists(),
            "purelib": venv_purelib(venv, str(wheel.get("interpreter") or "python3")),
            "version": dist_version(purelib, "cuda-toolkit") if purelib else "",
        }
    return out


def main() -> None:
    exit_with_probe(probe)


if __name__ == "__main__":
    main()
