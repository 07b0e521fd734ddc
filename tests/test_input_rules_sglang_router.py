"""The sglang_router role's input rules (plugins/plugin_utils/input_rules/sglang_router.py), pure:
called with plain dicts as the action sglang.deploy.validate_inputs templates them (issue 33 item 4)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from test_input_rules import _defaults, _spec_values

router = importlib.import_module(
    "ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules.sglang_router"
)
CLIENT = "ClientKey-0123456789-abc"
ADMIN = "AdminKey-0123456789-xyz"


def _router(**over: Any) -> dict[str, Any]:
    d = _defaults("sglang_router")
    v = _spec_values("sglang_router", d)
    v.update(
        sglang_router_api_key=CLIENT,
        sglang_router_admin_api_key=ADMIN,
        sglang_router_version=d["sglang_router_version"],
        sglang_router_wheel_sha256=["e" * 64],
        group_facts={"sglang_servers": {}},
    )
    v.update(over)
    return v


def _servers(*startups: Any) -> dict[str, Any]:
    hosts = {
        f"s{i}": {"verify_baseline_records": {"abc": {"startup_s": s}, "def": {"no_startup": 1}}}
        for i, s in enumerate(startups)
    }
    return {"sglang_servers": hosts}


def test_sglang_router_defaults_pass() -> None:
    errors = router.errors(_router())
    assert errors == [], errors
    assert (
        router.errors(
            _router(sglang_router_ip_address_allow=["any"], sglang_router_ip_address_allow_any=True)
        )
        == []
    )
    assert router.errors(_router(sglang_router_api_url="http://[::1]:30080")) == []
    # no client key when it is not required
    assert router.errors(_router(sglang_router_api_key="", sglang_router_api_key_required=False)) == []


def test_the_worker_timeout_covers_the_servers_measured_startup() -> None:
    timeout = _router()["sglang_router_worker_startup_timeout_secs"]
    assert router.errors(_router(group_facts=_servers(timeout - 1, "x", None))) == []
    errors = router.errors(_router(group_facts=_servers(10, timeout + 0.5)))
    assert errors == [
        f"sglang_router: invalid input: sglang_router_worker_startup_timeout_secs={timeout} is not valid: "
        f"allowed an integer >= {timeout + 1} (the longest start-up verify measured on the servers, "
        "startup_s of their verify_baseline_records)"
    ]


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"sglang_router_policy": "fastest"},
            'sglang_router_policy="fastest" is not valid: allowed one of random',
        ),
        (
            {"sglang_router_host": "bad host"},
            'sglang_router_host="bad host" is not valid: allowed an IPv4/IPv6',
        ),
        ({"sglang_router_prometheus_host": "-x"}, 'sglang_router_prometheus_host="-x"'),
        ({"sglang_router_port": 80}, "sglang_router_port=80 is not valid: allowed an integer 1024-65535"),
        ({"sglang_router_prometheus_port": 30000, "sglang_router_port": 30000}, "not sglang_router_port"),
        ({"sglang_router_api_key": "short"}, 'sglang_router_api_key="<set>" is not valid'),
        ({"sglang_router_api_key": ""}, 'sglang_router_api_key="" is not valid'),
        ({"sglang_router_admin_api_key": ""}, 'sglang_router_admin_api_key="" is not valid'),
        ({"sglang_router_admin_api_key": CLIENT}, "required and different from sglang_router_api_key"),
        (
            {"sglang_router_admin_api_key_file": "/etc/sglang-router/api-key"},
            'sglang_router_admin_api_key_file="/etc/sglang-router/api-key" is not valid',
        ),
        ({"sglang_router_api_key_required": "yes"}, 'sglang_router_api_key_required="yes" is not valid'),
        (
            {"sglang_router_workers_prune": 1},
            "sglang_router_workers_prune=1 is not valid: allowed true or false",
        ),
        ({"sglang_router_start": None}, "sglang_router_start=null is not valid"),
        ({"sglang_router_root": "/opt/sglang router"}, 'sglang_router_root="/opt/sglang router"'),
        ({"sglang_router_api_key_file": "rel/key"}, 'sglang_router_api_key_file="rel/key"'),
        ({"sglang_router_verify_results_file": "/a//b"}, 'sglang_router_verify_results_file="/a//b"'),
        (
            {"sglang_router_python": "python3"},
            'sglang_router_python="python3" is not valid: allowed the absolute',
        ),
        ({"sglang_router_service_name": "sglang-kimi"}, 'sglang_router_service_name="sglang-kimi"'),
        ({"sglang_router_user": "Root"}, 'sglang_router_user="Root" is not valid: allowed a user name'),
        ({"sglang_router_group": "g" * 33}, "allowed a group name"),
        ({"sglang_router_ip_address_allow": []}, "sglang_router_ip_address_allow=[] is not valid"),
        (
            {"sglang_router_ip_address_allow": ["10.0.0.0/8 x"]},
            'sglang_router_ip_address_allow=["10.0.0.0/8 x"]',
        ),
        ({"sglang_router_ip_address_allow": ["any"]}, "sglang_router_ip_address_allow_any: true to opt in"),
        ({"sglang_router_index_url": "ftp://x"}, 'sglang_router_index_url="ftp://x"'),
        (
            {"sglang_router_api_url": "http://router.example:30080"},
            'sglang_router_api_url="http://router.example:30080"',
        ),
        ({"sglang_router_version": "v0.3"}, 'sglang_router_version="v0.3" is not valid'),
        ({"sglang_router_wheel_sha256": []}, "sglang_router_wheel_sha256=[] is not valid"),
        ({"sglang_router_wheel_sha256": ["E" * 64]}, "sglang_router_wheel_sha256=["),
        (
            {"sglang_router_keep_releases": 1},
            "sglang_router_keep_releases=1 is not valid: allowed an integer 2-20",
        ),
        ({"sglang_router_max_concurrent_requests": -2}, "allowed an integer -1-1000000"),
        ({"sglang_router_api_timeout": "10s"}, 'sglang_router_api_timeout="10s" is not valid'),
    ],
)
def test_sglang_router_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = router.errors(_router(**over))
    assert any(expected in e for e in errors), errors


def test_the_keys_are_never_printed() -> None:
    errors = router.errors(_router(sglang_router_admin_api_key="y" * 8, sglang_router_api_key="x" * 8))
    assert len(errors) == 2, errors
    assert not any("y" * 8 in e or "x" * 8 in e for e in errors)
