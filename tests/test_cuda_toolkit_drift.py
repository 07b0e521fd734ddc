"""The cuda_toolkit role's drift logic: the probe module (plugins/modules/cuda_toolkit_probe.py) on a
toolkit home made here (and a real venv for the wheel method's site-packages), and the filter that
turns its answer into the drift text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from modload import REPO, load_module

probe_mod = load_module("cuda_probe", REPO / "plugins" / "modules" / "cuda_toolkit_probe.py")
filters = load_module("cuda_toolkit_filters", REPO / "plugins" / "filter" / "cuda_toolkit.py")

NVCC = """#!/bin/sh
echo 'Cuda compilation tools, release 13.0, {build}'
"""


def home(tmp_path: Path, build: str = "V13.0.88") -> Path:
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "include").mkdir()
    (cuda / "include" / "cuda_runtime.h").write_text("//\n")
    nvcc = cuda / "bin" / "nvcc"
    nvcc.write_text(NVCC.format(build=build))
    nvcc.chmod(0o755)
    return cuda


def spec(cuda: Path, state: Path) -> dict[str, object]:
    return {
        "home": str(cuda),
        "needed": ["include/cuda_runtime.h"],
        "selftest_state": str(state),
        "selftest_key": "k",
    }


def test_probe_reads_nvcc_and_the_selftest_cache(tmp_path: Path) -> None:
    cuda = home(tmp_path)
    state = tmp_path / "selftest.json"
    out = probe_mod.probe(spec(cuda, state))
    assert out["nvcc"]["executable"] is True
    assert "V13.0.88" in out["nvcc"]["version"]
    assert out["missing_files"] == []
    assert out["selftest_cached"] is False
    assert filters.cuda_toolkit_drift_text(out, "13.0.88", "13.0") == ""
    state.write_text(json.dumps({"key": out["selftest_key"], "gpu_run": "skipped:no"}))
    again = probe_mod.probe(spec(cuda, state))
    assert again["selftest_cached"] is True
    assert again["selftest_gpu_run"] == "skipped:no"
    # another nvcc (same build text, other bytes) changes the key: the self-test runs again
    (cuda / "bin" / "nvcc").write_text(NVCC.format(build="V13.0.88") + "# rebuilt\n")
    assert probe_mod.probe(spec(cuda, state))["selftest_cached"] is False


def test_missing_or_wrong_nvcc_is_drift(tmp_path: Path) -> None:
    cuda = home(tmp_path, build="V13.0.48")
    out = probe_mod.probe(spec(cuda, tmp_path / "s.json"))
    assert filters.cuda_toolkit_drift_text(out, "13.0.88", "13.0") == (
        "nvcc is release 13.0, V13.0.48, not release 13.0, V13.0.88"
    )
    (cuda / "bin" / "nvcc").unlink()
    (cuda / "include" / "cuda_runtime.h").unlink()
    out = probe_mod.probe(spec(cuda, tmp_path / "s.json"))
    assert out["nvcc"]["exists"] is False
    assert filters.cuda_toolkit_drift_text(out, "13.0.88", "13.0") == (
        "bin/nvcc is missing; missing include/cuda_runtime.h"
    )


def test_wheel_purelib_read_or_predicted(tmp_path: Path) -> None:
    """The venv's site-packages before the venv exists is the one `python -m venv` makes: the prefix
    links (managed_state) can point there before the install; an existing venv answers for itself."""
    venv = tmp_path / "venv"
    wheel = {"venv": str(venv), "interpreter": sys.executable}
    ver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    out = probe_mod.probe({**spec(home(tmp_path), tmp_path / "s.json"), "wheel": wheel})["wheel"]
    assert out == {"python": False, "purelib": f"{venv}/lib/python{ver}/site-packages", "version": ""}
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    made = sorted(venv.glob("lib/python*/site-packages"))
    assert [str(p) for p in made] == [out["purelib"]], "the prediction is not what venv made"
    info = made[0] / "cuda_toolkit-13.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cuda-toolkit\nVersion: 13.0.1\n\nbody\n")
    again = probe_mod.probe({**spec(home(tmp_path / "h2"), tmp_path / "s.json"), "wheel": wheel})["wheel"]
    assert again == {"python": True, "purelib": out["purelib"], "version": "13.0.1"}
    # an interpreter that cannot be run: unknown ('' - the role then describes no links yet)
    gone = {"venv": str(tmp_path / "other"), "interpreter": str(tmp_path / "no-python")}
    unknown = probe_mod.probe({**spec(home(tmp_path / "h3"), tmp_path / "s.json"), "wheel": gone})
    assert unknown["wheel"]["purelib"] == ""


EXPECTED = {
    "version": "13.0.1",
    "release": "13.0",
    "build": "13.0.88",
    "builds": {"13.0.0": "13.0.48", "13.0.1": "13.0.88", "13.0.2": "13.0.88"},
    "require_exact": False,
}


def install(**over: object) -> dict[str, object]:
    return {"home": "/opt/cuda", "method": "existing", "check_mode": False, "drift": False, **over}


def test_verdict_of_the_pinned_toolkit(tmp_path: Path) -> None:
    out = probe_mod.probe(spec(home(tmp_path), tmp_path / "s.json"))
    got = filters.cuda_toolkit_verdict(out, EXPECTED, install())
    assert got["errors"] == []
    assert got["verified"] is True
    assert (got["release"], got["build"], got["releases"]) == ("13.0", "13.0.88", ["13.0.1", "13.0.2"])
    assert got["version"] == "13.0.1"
    assert got["version_source"] == "nvcc build V13.0.88 (shared by 13.0.1, 13.0.2)"
    assert "warnings" not in got
    # what the install names wins over the build's releases: the apt package's installed version
    apt = filters.cuda_toolkit_verdict(
        {**out, "package_version": "13.0.1-1"}, EXPECTED, install(method="apt", package="cuda-toolkit-13-0")
    )
    assert (apt["version"], apt["version_source"]) == ("13.0.1", "dpkg cuda-toolkit-13-0 13.0.1-1")
    wheel = {"python": True, "purelib": "/p/site-packages", "version": "13.0.1"}
    pip = filters.cuda_toolkit_verdict(
        {**out, "wheel": wheel}, EXPECTED, install(method="wheel", purelib="/p/site-packages")
    )
    assert (pip["version"], pip["version_source"]) == ("13.0.1", "pip cuda-toolkit 13.0.1")


def test_verdict_reads_version_json_of_an_existing_toolkit(tmp_path: Path) -> None:
    cuda = home(tmp_path)
    (cuda / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}))
    out = probe_mod.probe(spec(cuda, tmp_path / "s.json"))
    assert out["version_json"] == "13.0.2"
    got = filters.cuda_toolkit_verdict(out, EXPECTED, install(home=str(cuda)))
    assert got["errors"] == []
    assert got["verified"] is True
    assert (
        f"{cuda} is CUDA 13.0.2 ({cuda}/version.json cuda.version=13.0.2) - NOT the pinned 13.0.1"
        in got["warnings"][0]
    )
    assert "accepted: same nvcc build V13.0.88" in got["warnings"][0]
    got = filters.cuda_toolkit_verdict(out, {**EXPECTED, "require_exact": True}, install(home=str(cuda)))
    assert got["verified"] is False
    assert got["errors"] == [
        f"cuda_toolkit: the install at {cuda} is CUDA 13.0.2 ({cuda}/version.json cuda.version=13.0.2),"
        " expected 13.0.1 (sglang_cuda_version) (cuda_toolkit_require_exact_release=true)"
    ]


def test_verdict_of_a_wrong_or_missing_nvcc(tmp_path: Path) -> None:
    cuda = home(tmp_path, build="V13.0.48")
    out = probe_mod.probe(spec(cuda, tmp_path / "s.json"))
    (error,) = filters.cuda_toolkit_verdict(out, EXPECTED, install())["errors"]
    assert "found nvcc release 13.0, V13.0.48 (= CUDA 13.0.0); expected release 13.0, V13.0.88" in error
    assert error.endswith("nvcc said: Cuda compilation tools, release 13.0, V13.0.48")
    (cuda / "bin" / "nvcc").unlink()
    out = probe_mod.probe(spec(cuda, tmp_path / "s.json"))
    (error,) = filters.cuda_toolkit_verdict(out, EXPECTED, install(method="apt"))["errors"]
    assert error == "cuda_toolkit: no executable nvcc at /opt/cuda/bin/nvcc after the apt install"
    # an existing toolkit has nothing that would install nvcc: an error in check mode too
    (error,) = filters.cuda_toolkit_verdict(out, EXPECTED, install(check_mode=True))["errors"]
    assert (
        "cuda_toolkit_existing_path=/opt/cuda has no executable bin/nvcc (expected CUDA 13.0.1 there)"
        in error
    )
    # check mode before the install, or a drifted apt/wheel toolkit the real run reinstalls: not judged
    for mode in (
        install(check_mode=True, method="apt"),
        install(check_mode=True, drift=True, method="wheel"),
    ):
        got = filters.cuda_toolkit_verdict(out, EXPECTED, mode)
        assert got["errors"] == []
        assert got["verified"] is False
        assert got["msg"].startswith("check mode")


def test_verdict_of_a_venv_whose_site_packages_the_links_miss(tmp_path: Path) -> None:
    out = probe_mod.probe(spec(home(tmp_path), tmp_path / "s.json"))
    wheel = {"python": True, "purelib": "/venv/lib/python3.13/site-packages", "version": "13.0.1"}
    (error,) = filters.cuda_toolkit_verdict(
        {**out, "wheel": wheel},
        EXPECTED,
        install(method="wheel", purelib="/venv/lib/python3.12/site-packages"),
    )["errors"]
    assert "site-packages is /venv/lib/python3.13/site-packages, but the prefix links point into" in error


def test_a_held_package_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    status = tmp_path / "status"
    status.write_text(
        "Package: cuda-toolkit-13-0\nStatus: hold ok installed\nVersion: 13.0.1-1\n\n"
        "Package: g++\nStatus: install ok installed\nVersion: 4:13.2.0-7\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n"
    )
    real = Path
    monkeypatch.setattr(
        probe_mod, "Path", lambda p, *a: real(str(status) if p == "/var/lib/dpkg/status" else p, *a)
    )
    assert probe_mod.dpkg_status() == {"cuda-toolkit-13-0": "13.0.1-1", "g++": "4:13.2.0-7"}
