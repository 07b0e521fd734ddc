"""Pure tests of plugins/filter/sglang_service.py (service-only input checks, systemd quoting).
The launch command itself is the launch spec's: tests/test_launch_spec.py."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from modload import load_module

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "filter" / "sglang_service.py"


F = load_module("sglang_service_filters", PLUGIN)


def cfg(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "sglang-kimi",
        "user": "sglang",
        "group": "sglang",
        "exec_override": [],
        "launch_args_file": "/etc/sglang/launch-args.json",
        "unit_dir": "/etc/systemd/system",
        "cuda_home": "/usr/local/cuda",
        "path_dirs": ["/usr/local/cuda/bin"],
        "timeout_start_sec": 1800,
        "timeout_stop_sec": 120,
        "health_timeout": 1800,
        "health_delay": 5,
        "restart_sec": 10,
        "start_limit_interval_sec": 3600,
        "start_limit_burst": 5,
    }
    base.update(over)
    return base


def test_good_service_inputs_pass() -> None:
    assert F.sglang_service_check(cfg()) == []


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"exec_override": ["relative"]}, "sglang_service_exec_override"),
        ({"name": "sglang-kimi.service"}, "sglang_service_name='sglang-kimi.service'"),
        ({"user": "root"}, "sglang_service_user='root'"),
        ({"group": "Bad Group"}, "sglang_service_group='Bad Group'"),
        ({"launch_args_file": "etc/x.json"}, "sglang_service_launch_args_file='etc/x.json'"),
        ({"cuda_home": "/usr/local/cuda 13"}, "sglang_service_cuda_home='/usr/local/cuda 13'"),
        ({"path_dirs": ["/a:/b"]}, "sglang_service_path_dirs"),
        ({"health_timeout": 0}, "sglang_service_health_timeout=0"),
        ({"restart_sec": "x"}, "sglang_service_restart_sec='x'"),
    ],
)
def test_bad_service_input_names_the_variable(over: dict[str, Any], needle: str) -> None:
    errors = F.sglang_service_check(cfg(**over))
    assert any(needle in e for e in errors), errors


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("/data/models/kimi", "/data/models/kimi"),
        ("a b", '"a b"'),
        ("50%", '"50%%"'),
        ("$HOME", '"$$HOME"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        (";", '";"'),
        # the one word systemd expands: %d = the unit's credentials directory (LoadCredential=)
        ("%d/sglang-config.yaml", "%d/sglang-config.yaml"),
        ("%d/other.yaml", '"%%d/other.yaml"'),
        ("${SGLANG_API_KEY}", '"$${SGLANG_API_KEY}"'),
        ("${OTHER}", '"$${OTHER}"'),
    ],
)
def test_systemd_quote(word: str, quoted: str) -> None:
    assert F.sglang_service_systemd_quote(word) == quoted


def test_systemd_quote_rejects_newlines() -> None:
    with pytest.raises(ValueError, match="newlines"):
        F.sglang_service_systemd_quote("a\nb")


def _systemd_split(exec_start: str) -> list[str]:
    """Approximates systemd's parsing for the quoting used here (continuations, quotes, $$, %%)."""
    joined = exec_start.replace("\\\n", " ")
    return [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(joined)]


def test_exec_start_one_flag_per_line_round_trips() -> None:
    argv = [
        "/opt/py",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m/a b",
        "--x",
        "--y",
        "1",
        "2",
        "--z",
        "50%",
    ]
    text = F.sglang_service_exec_start(argv)
    lines = text.split(" \\\n")
    assert lines[0] == "/opt/py -m sglang.launch_server"
    assert [ln.strip() for ln in lines[1:]] == ['--model-path "/m/a b"', "--x", "--y 1 2", '--z "50%%"']
    assert _systemd_split(text) == argv


def test_env_line() -> None:
    assert F.sglang_service_env_line("SGLANG_ENABLE_SPEC_V2", "1") == '"SGLANG_ENABLE_SPEC_V2=1"'
    assert F.sglang_service_env_line("A", 'x "y" 5%') == '"A=x \\"y\\" 5%%"'
    with pytest.raises(ValueError, match="not an environment variable name"):
        F.sglang_service_env_line("1BAD", "x")


def test_filter_module_exports() -> None:
    names = set(F.FilterModule().filters())
    assert {
        "sglang_service_exec_start",
        "sglang_service_env_line",
        "sglang_service_device_allow",
        "sglang_service_ip_allow",
    } <= names
    # the input checks are rules of the one validator (plugins/plugin_utils/input_rules/), no filters
    assert not {"sglang_service_check", "sglang_service_credential_check"} & names


def ccfg(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "launcher_shim": "/usr/local/lib/sglang-deploy/sglang_launch.py",
        "legacy_key_files": ["/etc/sglang/api-key.env"],
        "ip_address_allow": None,
        "device_policy": "closed",
        "device_allow_extra": [],
    }
    base.update(over)
    return base


def test_good_credential_inputs_pass() -> None:
    assert F.sglang_service_credential_check(ccfg()) == []
    ok = ccfg(ip_address_allow=["localhost", "10.0.0.0/24", "fd00::/8", "192.168.1.7"], device_policy="auto")
    assert (
        F.sglang_service_credential_check(ok | {"device_allow_extra": ["/dev/infiniband/uverbs0 rw"]}) == []
    )


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"launcher_shim": "relative.py"}, "sglang_service_launcher_shim='relative.py'"),
        ({"launcher_shim": "/usr/lib/x.sh"}, "ending in .py"),
        ({"launcher_shim": "/usr/lib/x.py\n"}, "sglang_service_launcher_shim="),
        ({"legacy_key_files": ["/etc/a b"]}, "sglang_service_legacy_key_files=['/etc/a b']"),
        ({"legacy_key_files": ["/etc/sglang/"]}, "sglang_service_legacy_key_files="),
        ({"legacy_key_files": ["/etc/x\x01"]}, "sglang_service_legacy_key_files="),
        ({"ip_address_allow": ["10.0.0.0/33"]}, "sglang_service_ip_address_allow=['10.0.0.0/33']"),
        ({"ip_address_allow": ["everyone"]}, "localhost, link-local"),
        ({"ip_address_allow": ["10.0.0.1\n"]}, "sglang_service_ip_address_allow="),
        ({"ip_address_allow": "any"}, "sglang_service_ip_address_allow='any'"),
        (
            {"device_policy": "strict"},
            "sglang_service_device_policy='strict' is not valid; allowed: closed, auto",
        ),
        ({"device_allow_extra": ["/dev/sda"]}, "sglang_service_device_allow_extra=['/dev/sda']"),
        ({"device_allow_extra": ["/dev/x rw\n"]}, "sglang_service_device_allow_extra="),
    ],
)
def test_bad_credential_input_names_the_variable(over: dict[str, Any], needle: str) -> None:
    errors = F.sglang_service_credential_check(ccfg(**over))
    assert any(needle in e for e in errors), errors


def test_device_allow_lists_what_the_host_has() -> None:
    # lab mode: no driver, no node: nothing (DevicePolicy=closed stays)
    assert F.sglang_service_device_allow([], 8) == []
    # driver loaded: the probe's nodes + those nvidia-modprobe creates at the first start
    have = [
        "/dev/nvidiactl",
        "/dev/nvidia0",
        "/dev/nvidia-modeset",
        "/dev/nvidia-caps/nvidia-cap1",
        "/dev/null",
    ]
    assert F.sglang_service_device_allow(have, 2) == [
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidia-caps/nvidia-cap1",
        "/dev/nvidia-modeset",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidiactl",
    ]
    # a GPU node without the control node (no driver loaded): only what is there
    assert F.sglang_service_device_allow(["/dev/nvidia3", "/dev/nvidia10"], 0) == [
        "/dev/nvidia3",
        "/dev/nvidia10",
    ]


def test_ip_allow_is_localhost_plus_the_bind_network() -> None:
    addrs = ["127.0.0.1/8", "10.1.2.3/24", "192.168.5.9/16", "::1/128", "fe80::1/64"]
    assert F.sglang_service_ip_allow("127.0.0.1", addrs) == ["localhost"]
    assert F.sglang_service_ip_allow("::1", addrs) == ["localhost"]
    assert F.sglang_service_ip_allow("10.1.2.3", addrs) == ["localhost", "10.1.2.0/24"]
    assert F.sglang_service_ip_allow("0.0.0.0", addrs) == [
        "localhost",
        "10.1.2.0/24",
        "192.168.0.0/16",
        "fe80::/64",
    ]
    assert F.sglang_service_ip_allow("gpu1.example", addrs)[1:] == [
        "10.1.2.0/24",
        "192.168.0.0/16",
        "fe80::/64",
    ]
    # an address no interface has (yet): itself
    assert F.sglang_service_ip_allow("10.9.9.9", addrs) == ["localhost", "10.9.9.9/32"]
