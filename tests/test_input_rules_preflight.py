"""The preflight role's own input rules (plugins/plugin_utils/input_rules/preflight.py), pure: called
with plain dicts as the action sglang.deploy.validate_inputs templates them (issue 33 item 4). The
launch inputs' own rules are tests/test_launch_spec.py's; here only that their errors reach the list."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from test_input_rules import _defaults

preflight = importlib.import_module(
    "ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules.preflight"
)
ROUTED = {"sglang_routers": ["rt"], "sglang_servers": ["s1"]}


def _preflight(**over: Any) -> dict[str, Any]:
    d = _defaults("preflight")
    v = {name: d[name] for name, _pattern, _allowed in preflight.MANIFEST}
    v.update(
        {
            name: d[name]
            for name in (
                "sglang_cuda_nvcc_builds",
                "sglang_os_lab_allowed",
                "sglang_min_free_disk_gib",
                "sglang_allow_known_bad",
            )
        }
    )
    v.update(
        sglang_root="/opt/sglang",
        groups={"sglang_servers": ["s1"]},
        sglang_router_drain_timeout_s=60,
        sglang_router_min_healthy=1,
        sglang_router_url="http://router.lab:30080",
        sglang_router_worker_url="http://10.0.0.5:30000",
        sglang_service_timeout_stop_sec=120,
    )
    v.update(over)
    return v


def test_preflight_defaults_pass() -> None:
    assert preflight.errors(_preflight()) == []
    assert preflight.errors(_preflight(groups=ROUTED)) == []
    # the rolling upgrade's inputs are read for a routed fleet only
    assert preflight.errors(_preflight(sglang_router_url="", sglang_router_drain_timeout_s=0)) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"sglang_python_version": "3"},
            'sglang_python_version="3" is not valid: allowed 3.Y, e.g. 3.12 (regex',
        ),
        (
            {"sglang_git_commit": "bbe9c7e"},
            'sglang_git_commit="bbe9c7e" is not valid: allowed the full commit id',
        ),
        ({"sglang_os_version": "24.04\n"}, 'sglang_os_version="24.04\\n" is not valid'),
        ({"sglang_sgl_kernel_version": "0.3.21+cu130"}, 'sglang_sgl_kernel_version="0.3.21+cu130"'),
        ({"sglang_cuda_release": "12.9"}, "Inconsistent CUDA pins: sglang_cuda_version="),
        ({"sglang_torch_cuda_tag": "cu129"}, 'sglang_torch_cuda_tag="cu129", sglang_cuda_nvcc_builds keys='),
        ({"sglang_cuda_nvcc_builds": {}}, "sglang_cuda_nvcc_builds keys=[]. Allowed:"),
        (
            {"sglang_os_lab_allowed": [{"distribution": "Debian", "version": "twelve"}]},
            'sglang_os_lab_allowed entry {"distribution": "Debian", "version": "twelve"} is not valid',
        ),
        ({"sglang_os_lab_allowed": ["Debian 12"]}, 'sglang_os_lab_allowed entry "Debian 12" is not valid'),
        ({"sglang_root": "/"}, 'sglang_root="/" is not valid: allowed an absolute path other than /'),
        ({"sglang_root": "opt/sglang"}, 'sglang_root="opt/sglang" is not valid'),
        (
            {"sglang_min_free_disk_gib": -1},
            "sglang_min_free_disk_gib=-1 is not valid: allowed an integer >= 0",
        ),
        (
            {"sglang_allow_known_bad": "maybe"},
            'sglang_allow_known_bad="maybe" is not valid: allowed true or false',
        ),
        (
            {"groups": ROUTED, "sglang_router_drain_timeout_s": 0},
            'sglang_router_drain_timeout_s="0", sglang_router_min_healthy="1": allowed: the drain timeout',
        ),
        ({"groups": ROUTED, "sglang_router_min_healthy": "x"}, 'sglang_router_min_healthy="x": allowed'),
        (
            {"groups": ROUTED, "sglang_router_url": "http://router.lab:30080/v1"},
            'sglang_router_url="http://router.lab:30080/v1" is not valid: allowed http(s)://<host>[:<port>]',
        ),
        ({"groups": ROUTED, "sglang_router_worker_url": ""}, 'sglang_router_worker_url="" is not valid'),
        (
            {"groups": ROUTED, "sglang_service_timeout_stop_sec": 30},
            "sglang_service_timeout_stop_sec=30 is shorter than sglang_router_drain_timeout_s=60: allowed "
            "sglang_service_timeout_stop_sec >= 60",
        ),
    ],
)
def test_preflight_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = preflight.errors(_preflight(**over))
    assert any(expected in e for e in errors), errors


def test_an_undefined_roll_input_is_named_on_a_routed_fleet() -> None:
    v = _preflight(groups=ROUTED)
    del v["sglang_router_min_healthy"], v["sglang_router_url"]
    errors = preflight.errors(v)
    assert any('sglang_router_min_healthy="(undefined)"' in e for e in errors), errors
    assert any('sglang_router_url="" is not valid' in e for e in errors), errors


def test_the_launch_errors_are_listed_without_the_key() -> None:
    key = "-" + "k" * 31
    launch = {"api_key": key, "api_key_required": True, "preset": "nonesuch"}
    errors = preflight.errors(_preflight(__preflight_launch_inputs=launch))
    assert errors
    assert all(e.startswith("invalid launch input: ") for e in errors), errors
    assert any("sglang_api_key (value not printed; 32 characters, starting with -)" in e for e in errors), (
        errors
    )
    assert not any("k" * 31 in e for e in errors)
