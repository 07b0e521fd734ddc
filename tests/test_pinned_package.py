"""Module sglang.deploy.pinned_package: the decider (dpkg's answer -> actions, message) and the module run
through ansible against a dpkg/apt test double (dpkg-query, apt-get, apt-mark: shell scripts over one
state file, logging each call). The real apt run is the cuda_toolkit_apt molecule scenario (a local
signed repository)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from modload import REPO, load_module, run_module

mod = load_module("pinned_package", REPO / "plugins" / "modules" / "pinned_package.py")

P = {"name": "cuda-toolkit-13-0", "version": "13.0.1-1", "hold": True, "reinstall": [], "reason": ""}


@pytest.mark.parametrize(
    ("out", "want"),
    [
        ("13.0.1-1 ii ", ("13.0.1-1", "install")),
        ("13.0.1-1 hi ", ("13.0.1-1", "hold")),
        ("13.0.0-1 rc ", ("", "install")),  # removed, config files left
        (" un ", ("", "install")),
        ("", ("", "install")),  # dpkg does not know it
    ],
)
def test_dpkg_state(out: str, want: tuple[str, str]) -> None:
    assert mod.dpkg_state(out) == want


def test_plan_and_message() -> None:
    assert mod.plan(P, "13.0.1-1", "hold") == []
    assert mod.message(P, "13.0.1-1", [], False) == "cuda-toolkit-13-0=13.0.1-1 installed, held"
    fresh = mod.plan(P, "", "install")
    assert fresh == ["install cuda-toolkit-13-0=13.0.1-1", "hold"]
    assert mod.message(P, "", fresh, True) == (
        "check mode: would install cuda-toolkit-13-0=13.0.1-1 (installed: none) and hold it"
    )
    # another version held: installed again, held again (apt-get install resets the selection)
    assert mod.plan(P, "13.0.0-1", "hold") == ["install cuda-toolkit-13-0=13.0.1-1", "hold"]
    drift = {**P, "reinstall": ["cuda-nvcc-13-0"], "reason": "/usr/local/cuda-13.0: bin/nvcc is missing"}
    assert mod.plan(drift, "13.0.1-1", "hold") == ["reinstall cuda-nvcc-13-0", "hold"]
    assert mod.message(drift, "13.0.1-1", ["reinstall cuda-nvcc-13-0", "hold"], True) == (
        "drift: /usr/local/cuda-13.0: bin/nvcc is missing; a real run reinstalls cuda-nvcc-13-0"
    )
    # the reinstall is for a package at the wanted version only: an install lays every file anyway
    assert mod.plan(drift, "13.0.0-1", "hold")[0] == "install cuda-toolkit-13-0=13.0.1-1"
    assert mod.plan(P, "13.0.1-1", "install") == ["hold"]
    unheld = {**P, "hold": False}
    assert mod.plan(unheld, "13.0.1-1", "hold") == ["unhold"]
    assert mod.plan(unheld, "13.0.1-1", "install") == []
    assert mod.plan(unheld, "", "install") == ["install cuda-toolkit-13-0=13.0.1-1"]


DPKG = """#!/bin/sh
# test double of dpkg-query -W -f '${Version} ${db:Status-Abbrev}' NAME over the state file
echo "dpkg-query $*" >> "$PP_LOG"
[ -s "$PP_STATE" ] || exit 1
cat "$PP_STATE"
"""
APT_GET = """#!/bin/sh
# test double of apt-get: install NAME=VERSION writes the state (selection reset to install)
echo "apt-get $*" >> "$PP_LOG"
for a in "$@"; do case "$a" in *=*) printf '%s ii ' "${a#*=}" > "$PP_STATE";; esac; done
[ -z "$PP_FAIL" ] || { echo "E: $PP_FAIL" >&2; exit 100; }
"""
APT_MARK = """#!/bin/sh
# test double of apt-mark hold|unhold NAME
echo "apt-mark $*" >> "$PP_LOG"
v=$(cut -d' ' -f1 "$PP_STATE")
if [ "$1" = hold ]; then printf '%s hi ' "$v" > "$PP_STATE"; else printf '%s ii ' "$v" > "$PP_STATE"; fi
"""


def world(tmp_path: Path, state: str) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True)
    for name, text in (("dpkg-query", DPKG), ("apt-get", APT_GET), ("apt-mark", APT_MARK)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    (tmp_path / "state").write_text(state)
    (tmp_path / "log").write_text("")
    return {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "PP_STATE": str(tmp_path / "state"),
        "PP_LOG": str(tmp_path / "log"),
    }


def test_check_mode_reads_only_and_a_run_installs_and_holds(tmp_path: Path) -> None:
    env = world(tmp_path, "")
    args = {"name": "cuda-toolkit-13-0", "version": "13.0.1-1"}
    checked = run_module("pinned_package", args, "--check", "--diff", env=env)
    assert checked["changed"] is True
    assert checked["msg"] == (
        "check mode: would install cuda-toolkit-13-0=13.0.1-1 (installed: none) and hold it"
    )
    assert checked["diff"]["before"] == "cuda-toolkit-13-0 (not installed) install\n"
    assert checked["diff"]["after"] == "cuda-toolkit-13-0 13.0.1-1 hold\n"
    log = (tmp_path / "log").read_text().splitlines()
    assert [line.split()[0] for line in log] == ["dpkg-query"], log  # nothing but the read
    done = run_module("pinned_package", args, env=env)
    assert done["changed"] is True
    assert done["actions"] == ["install cuda-toolkit-13-0=13.0.1-1", "hold"]
    log = (tmp_path / "log").read_text().splitlines()
    assert "apt-get update -q" in log
    assert any(
        line.startswith("apt-get install -y -q --allow-change-held-packages --allow-downgrades ")
        and line.endswith(" cuda-toolkit-13-0=13.0.1-1")
        for line in log
    ), log
    assert log[-1] == "apt-mark hold cuda-toolkit-13-0"
    again = run_module("pinned_package", args, env=env)
    assert again["changed"] is False
    assert again["msg"] == "cuda-toolkit-13-0=13.0.1-1 installed, held"


def test_drift_reinstall_and_a_failing_apt(tmp_path: Path) -> None:
    env = world(tmp_path, "13.0.1-1 hi ")
    args = {
        "name": "cuda-toolkit-13-0",
        "version": "13.0.1-1",
        "reinstall": ["cuda-nvcc-13-0"],
        "reason": "/usr/local/cuda-13.0: bin/nvcc is missing",
    }
    done = run_module("pinned_package", args, env=env)
    assert done["changed"] is True
    assert done["msg"] == "drift: /usr/local/cuda-13.0: bin/nvcc is missing; reinstalled cuda-nvcc-13-0"
    log = (tmp_path / "log").read_text()
    assert "apt-get update" not in log  # at the version already: no index refresh needed
    assert "--reinstall --allow-change-held-packages --allow-downgrades cuda-nvcc-13-0" in log
    failing = world(tmp_path / "f", "13.0.0-1 hi ")
    failing["PP_FAIL"] = "Version '13.0.1-1' for 'cuda-toolkit-13-0' was not found"
    failed = run_module("pinned_package", {"name": "cuda-toolkit-13-0", "version": "13.0.1-1"}, env=failing)
    assert failed.get("failed") is True
    assert "apt-get update failed (rc 100)" in failed["msg"]


def test_a_name_that_is_an_option_is_refused(tmp_path: Path) -> None:
    env = world(tmp_path, "")
    out = run_module("pinned_package", {"name": "--purge", "version": "1"}, env=env)
    assert out.get("failed") is True
    assert "is not a package name" in out["msg"]
