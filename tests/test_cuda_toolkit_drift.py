"""The cuda_toolkit role's drift logic: the probe module (plugins/modules/cuda_toolkit_probe.py) on a
toolkit home made here, and the filters that turn its answer into repairs."""

from __future__ import annotations

import json
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


def test_wheel_links_to_fix(tmp_path: Path) -> None:
    links = [{"dest": "bin", "src": "bin"}, {"dest": "lib64", "src": "lib"}, {"dest": "nvvm", "src": "nvvm"}]
    current = {"bin": "/sp/nvidia/cu13/bin", "lib64": "/elsewhere", "nvvm": ""}
    assert filters.cuda_toolkit_links_to_fix(links, current, "/sp/nvidia/cu13") == links[1:]
