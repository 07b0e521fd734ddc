"""nccl_env scenario: the converged file, one run per profile against golden files, bad input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import moltest
import pytest

SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path(__file__).resolve().parents[1]))
GOLDEN = SCENARIO / "golden"
ENV_FILE = "/etc/sglang/nccl.env"

# name -> extra vars; golden/<name>.env is the exact expected file.
PROFILE_CASES: dict[str, dict[str, Any]] = {
    "pcie": {"nccl_env_profile": "pcie"},
    "nvlink": {"nccl_env_profile": "nvlink"},
    "none": {"nccl_env_profile": "none"},
    "auto_detect": {"nccl_env_profile": "auto"},
    "auto_preflight_pcie": {"nccl_env_profile": "auto", "preflight_interconnect": "pcie"},
    "auto_interconnect_nvlink": {
        "nccl_env_profile": "auto",
        "nccl_env_interconnect": "nvlink",
        "preflight_interconnect": "pcie",
    },
    "pcie_on_nvlink": {"nccl_env_profile": "pcie", "preflight_interconnect": "nvlink"},
    "overrides": {
        "nccl_env_profile": "pcie",
        "nccl_env_interconnect": "nvlink",
        "nccl_env_extra": {
            "NCCL_PROTO": "^LL128",
            "NCCL_NTHREADS": 256,
            "NCCL_NVLS_ENABLE": False,
            "NCCL_DEBUG": "WARN",
        },
        "nccl_env_unset": ["NCCL_BUFFSIZE", "NVSHMEM_DISABLE_NVLS"],
    },
}

# name -> (extra vars, strings the failure message must contain)
BAD_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "bad_proto": ({"nccl_env_extra": {"NCCL_PROTO": "LL256"}}, ["NCCL_PROTO", "LL256", "LL, LL128, Simple"]),
    "bad_algo": ({"nccl_env_extra": {"NCCL_ALGO": "Ring,Star"}}, ["NCCL_ALGO", "Star", "Ring, Tree"]),
    "nthreads_0": ({"nccl_env_extra": {"NCCL_NTHREADS": 0}}, ["NCCL_NTHREADS", "'0'", "64..512"]),
    "nthreads_700": ({"nccl_env_extra": {"NCCL_NTHREADS": 700}}, ["NCCL_NTHREADS", "'700'", "64..512"]),
    "bad_p2p_level": ({"nccl_env_extra": {"NCCL_P2P_LEVEL": "NVX"}}, ["NCCL_P2P_LEVEL", "NVX", "LOC, NVL"]),
    "unknown_profile": (
        {"nccl_env_profile": "turbo"},
        ["nccl_env_profile", "turbo", "auto, pcie, nvlink, none"],
    ),
    "lower_case_name": ({"nccl_env_extra": {"nccl_proto": "LL"}}, ["nccl_proto", "^NCCL_[A-Z0-9_]+$"]),
    "bad_interconnect": ({"nccl_env_interconnect": "infiniband"}, ["nccl_env_interconnect", "infiniband"]),
    "bad_unset_name": ({"nccl_env_unset": ["proto"]}, ["proto", "^NCCL_[A-Z0-9_]+$"]),
}


def run_role(extra: dict[str, Any]) -> tuple[int, str]:
    return moltest.run_playbook("render.yml", extra=[extra], timeout=600)


def test_converged_file(host: Any) -> None:
    f = host.file(ENV_FILE)
    assert f.is_file
    assert (f.mode, f.user, f.group) == (0o644, "root", "root")
    d = host.file("/etc/sglang")
    assert d.is_directory
    assert (d.mode, d.user, d.group) == (0o755, "root", "root")
    assert f.content_string == (GOLDEN / "converge.env").read_text()
    assert "NCCL_NVLS_ENABLE=0" in f.content_string


@pytest.mark.parametrize("name", sorted(PROFILE_CASES))
def test_profile_renders_golden(host: Any, name: str) -> None:
    path = f"/tmp/nccl-golden/{name}.env"
    rc, out = run_role({**PROFILE_CASES[name], "nccl_env_file": path})
    assert rc == 0, out[-4000:]
    f = host.file(path)
    assert (f.mode, f.user, f.group) == (0o644, "root", "root")
    assert f.content_string == (GOLDEN / f"{name}.env").read_text(), f.content_string
    # the file is valid for `set -a; . FILE` too
    cmd = host.run(f"sh -c 'set -a; . {path}; env'")
    assert cmd.rc == 0, cmd.stderr


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_input_fails_before_any_change(host: Any, name: str) -> None:
    extra, must_name = BAD_CASES[name]
    before = host.file(ENV_FILE).sha256sum
    target = f"/tmp/nccl-bad-{name}/nccl.env"
    rc, out = run_role({**extra, "nccl_env_file": target})
    assert rc != 0, out[-4000:]
    for text in must_name:
        assert text in out, f"{text!r} not in failure output:\n{out[-4000:]}"
    assert "changed=0" in out, out[-4000:]
    assert not host.file(f"/tmp/nccl-bad-{name}").exists
    assert host.file(ENV_FILE).sha256sum == before
