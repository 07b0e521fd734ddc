"""Preflight's host checks (plugins/module_utils/host_checks.py, the filter
sglang.deploy.preflight_host_check): every rule, the message naming the variable, the value and what is
allowed, and every error of a host at once. The role runs the same function (roles/preflight/tasks/main.yml);
the molecule scenario and tests/test_validation_preflight.py run it through ansible-playbook."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from modload import REPO  # (and the collection on sys.path)

hc: Any = importlib.import_module("ansible_collections.sglang.deploy.plugins.module_utils.host_checks")
GIB = 1024**3
UBUNTU = {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24"}
DEBIAN = {"distribution": "Debian", "distribution_version": "12.8", "distribution_major_version": "12"}
INPUTS: dict[str, Any] = {
    "sglang_gpu_required": False,
    "sglang_tp_size": 8,
    "sglang_tp_size_must_equal_gpu_count": True,
    "sglang_driver_min_branch": 580,
    "preflight_allow_old_driver": False,
    "sglang_cuda_version": "13.0.1",
    "sglang_os_distribution": "Ubuntu",
    "sglang_os_version": "24.04",
    "sglang_os_lab_allowed": [{"distribution": "Debian", "version": "12"}],
    "sglang_root": "/opt/sglang",
    "sglang_min_free_disk_gib": 100,
}
PROBE = {
    "root": {"size_available": 500 * GIB, "mount": "/", "realpath": "/opt"},
    "python": {"path": "/usr/bin/python3.12", "requested": "python3.12"},
}
EIGHT = {"count": 8, "driver_version": "580.95.05", "driver_branch": 580}
NO_GPU = "nvidia-smi lists no GPU"
NONE = {"count": 0, "driver_version": "", "driver_branch": 0}


def decide(
    gpu: dict[str, Any] | None = None,
    facts: dict[str, Any] | None = None,
    probe: dict[str, Any] | None = None,
    nnodes: int = 1,
    **inputs: Any,
) -> Any:
    """The decider on the seed's host (8 GPUs, Ubuntu 24.04, room, python3.12) with what a case changes."""
    merged = {**INPUTS, **inputs}
    return hc.decide_host(
        PROBE if probe is None else probe,
        gpu=EIGHT if gpu is None else gpu,
        facts=UBUNTU if facts is None else facts,
        inputs=merged,
        no_gpu_reason=NO_GPU,
        nnodes=nnodes,
    )


def test_the_role_runs_this_decider_once() -> None:
    tasks = (REPO / "roles" / "preflight" / "tasks" / "main.yml").read_text()
    assert tasks.count("sglang.deploy.preflight_host_check(") == 1


def test_the_seed_host_passes() -> None:
    assert decide() == {"errors": [], "warnings": []}


def test_a_required_gpu_that_is_missing_fails_naming_why() -> None:
    [error] = decide(NONE, DEBIAN, sglang_gpu_required=True)["errors"]
    assert error.startswith(
        "sglang_gpu_required=true but this host has no usable NVIDIA GPU (nvidia-smi lists no GPU)"
    )
    assert decide(NONE, DEBIAN)["errors"] == []  # lab mode


@pytest.mark.parametrize(
    ("tp", "must_equal", "allowed"),
    [
        (4, True, "allowed 8"),
        ("4", True, "allowed 8"),
        (3, False, "allowed a divisor of 8: 1, 2, 4, 8"),
        (0, False, "allowed a divisor of 8: 1, 2, 4, 8"),
    ],
)
def test_a_tp_size_that_does_not_fit_names_what_is_allowed(tp: Any, must_equal: bool, allowed: str) -> None:
    [error] = decide(sglang_tp_size=tp, sglang_tp_size_must_equal_gpu_count=must_equal)["errors"]
    assert error.startswith(f"sglang_tp_size={json.dumps(tp)} does not fit the 8 GPU(s) of this host")
    assert error.endswith(allowed)


def test_a_divisor_passes_when_it_need_not_equal_and_several_nodes_are_checked_elsewhere() -> None:
    assert decide(sglang_tp_size=4, sglang_tp_size_must_equal_gpu_count="false")["errors"] == []
    assert decide(sglang_tp_size=16, nnodes=2)["errors"] == []


def test_an_old_driver_fails_or_warns_when_allowed() -> None:
    old = {**EIGHT, "driver_version": "570.172.08", "driver_branch": 570}
    [error] = decide(old)["errors"]
    assert "NVIDIA driver 570.172.08 (branch 570) is older than sglang_driver_min_branch=580" in error
    allowed = decide(old, preflight_allow_old_driver="yes")
    assert allowed["errors"] == []
    assert allowed["warnings"] == [
        "WARNING: NVIDIA driver branch 570 < sglang_driver_min_branch=580 accepted because "
        "preflight_allow_old_driver=true; CUDA 13.0.1 may fail at run time"
    ]


def test_the_os_is_the_pinned_one_or_on_a_lab_host_a_lab_one() -> None:
    assert (
        decide(facts={**UBUNTU, "distribution_version": "24.04.1"}, sglang_os_version="24.04.1")["errors"]
        == []
    )
    [error] = decide(facts=DEBIAN)["errors"]
    assert error == (
        "This host runs Debian 12.8, which is not supported: allowed "
        'sglang_os_distribution="Ubuntu" with sglang_os_version="24.04"'
    )
    assert decide(NONE, DEBIAN)["errors"] == []
    [lab] = decide(NONE, {**DEBIAN, "distribution_major_version": "11", "distribution_version": "11.9"})[
        "errors"
    ]
    assert lab.endswith(
        ', or in lab mode one of sglang_os_lab_allowed=[{"distribution": "Debian", "version": "12"}]'
    )
    assert "Debian 11.9 (lab mode), which is not supported" in lab


def test_too_little_disk_names_the_mount_and_the_variable() -> None:
    probe = {**PROBE, "root": {"size_available": int(12.34 * GIB), "mount": "/", "realpath": "/opt"}}
    [error] = decide(probe=probe)["errors"]
    assert error.startswith(
        'Only 12.3 GiB free on / (holding /opt, the nearest existing parent of sglang_root="/opt/sglang")'
    )
    assert "sglang_min_free_disk_gib=100 demands more; allowed free space >= 100 GiB" in error
    assert decide(probe=probe, sglang_min_free_disk_gib="12")["errors"] == []


def test_a_missing_stack_python_fails_on_a_gpu_host_and_warns_on_a_lab_host() -> None:
    missing = {**PROBE, "python": {"path": "", "requested": "python-none-such-3.99"}}
    [error] = decide(probe=missing)["errors"]
    assert error.startswith(
        'sglang_stack_python="python-none-such-3.99" is not an executable on this host (not found on PATH)'
    )
    path = {**PROBE, "python": {"path": "", "requested": "/opt/py/bin/python3"}}
    assert "(no such executable file)" in decide(probe=path)["errors"][0]
    lab = decide(NONE, DEBIAN, probe=missing)
    assert lab["errors"] == []
    assert lab["warnings"][0].startswith(
        'WARNING: sglang_stack_python="python-none-such-3.99" is not an executable on this lab host'
    )


def test_every_error_of_a_host_at_once_in_order() -> None:
    old = {**EIGHT, "driver_branch": 570}
    probe = {
        "root": {"size_available": 0, "mount": "/", "realpath": "/"},
        "python": {"path": "", "requested": "x"},
    }
    errors = decide(old, DEBIAN, probe, sglang_tp_size=3)["errors"]
    assert [e.split(" ")[0] for e in errors] == [
        "sglang_tp_size=3",
        "NVIDIA",
        "This",
        "Only",
        'sglang_stack_python="x"',
    ]
