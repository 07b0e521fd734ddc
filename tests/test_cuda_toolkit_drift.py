"""The cuda_toolkit role's drift logic: the probe module (plugins/modules/cuda_toolkit_probe.py) on a
toolkit home made here (and a real venv for the wheel method's site-packages), and the filter that
turns its answer into the drift text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    assert (got["version"], got["version_source"]) == (
        "13.0.1",
        "nvcc build V13.0.88 (shared by 13.0.1, 13.0.2)",
    )
    assert "warnings" not in got
    # what the install names wins over the build's releases
    got = filters.cuda_toolkit_verdict(
        out, EXPECTED, install(precise_version="13.0.1", precise_source="dpkg x 13.0.1-1")
    )
    assert (got["version"], got["version_source"]) == ("13.0.1", "dpkg x 13.0.1-1")


def test_verdict_of_another_release_with_the_same_build(tmp_path: Path) -> None:
    out = probe_mod.probe(spec(home(tmp_path), tmp_path / "s.json"))
    named = install(precise_version="13.0.2", precise_source="version.json cuda.version=13.0.2")
    got = filters.cuda_toolkit_verdict(out, EXPECTED, named)
    assert got["errors"] == []
    assert got["verified"] is True
    assert "NOT the pinned 13.0.1, accepted: same nvcc build V13.0.88" in got["warnings"][0]
    got = filters.cuda_toolkit_verdict(out, {**EXPECTED, "require_exact": True}, named)
    assert got["verified"] is False
    assert got["errors"] == [
        "cuda_toolkit: the install at /opt/cuda is CUDA 13.0.2 (version.json cuda.version=13.0.2),"
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
    # check mode before the install, or a drifted apt/wheel toolkit the real run reinstalls: not judged
    for mode in (install(check_mode=True), install(check_mode=True, drift=True, method="wheel")):
        got = filters.cuda_toolkit_verdict(out, EXPECTED, mode)
        assert got["errors"] == []
        assert got["verified"] is False
        assert got["msg"].startswith("check mode")
