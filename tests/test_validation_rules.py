"""One host rule and one port rule (issue 33 item 4): plugins/module_utils/convert.py's valid_host and
as_port/valid_port decide for the launch spec, the multi-node plan and the router's checks (the Jinja
tests sglang.deploy.host / sglang.deploy.port); no role keeps a host regex or a port range of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import convert, launch_spec, multinode
from ansible_collections.sglang.deploy.plugins.test import net
from modload import REPO

GOOD_HOSTS = ("127.0.0.1", "0.0.0.0", "::1", "::", "fe80::1", "router-1.example.internal", "localhost")
BAD_HOSTS = ("999.999.999.999", "1.2.3.256", "a..b", "-a.example", "host:80", " 127.0.0.1", "127.0.0.1\n",
             "a\x00b", "", None, 1)  # fmt: skip
GOOD_PORTS = (1024, 30080, 65535, "1024", "65535")
BAD_PORTS = (1023, 65536, 0, -1, True, "+8080", " 8080", "8080\n", "80", "8080.0", 8080.0, None, "")


@pytest.mark.parametrize("value", GOOD_HOSTS)
def test_good_hosts(value: str) -> None:
    assert convert.valid_host(value)
    assert net.TestModule().tests()["host"](value)


@pytest.mark.parametrize("value", BAD_HOSTS)
def test_bad_hosts(value: object) -> None:
    assert not convert.valid_host(value)


@pytest.mark.parametrize("value", GOOD_PORTS)
def test_good_ports(value: object) -> None:
    assert convert.as_port(value) == int(str(value))
    assert net.TestModule().tests()["port"](value)


@pytest.mark.parametrize("value", BAD_PORTS)
def test_bad_ports(value: object) -> None:
    assert convert.as_port(value) is None
    assert not convert.valid_port(value)


def test_the_launch_spec_and_the_plan_keep_no_port_range_of_their_own() -> None:
    assert "PORT_MIN" not in vars(launch_spec)
    assert "PORT_MIN" not in vars(multinode)
    assert convert.PORT_ALLOWED == "an integer 1024-65535 (the units run without CAP_NET_BIND_SERVICE)"


_HOST_OR_PORT_COPY = re.compile(r"65535|\[0-9\]\{1,3\}\)\{3\}|__host_re")


def test_no_role_keeps_a_host_regex_or_a_port_range() -> None:
    offenders = []
    for path in sorted((REPO / "roles").glob("*/tasks/validate*.yml")):
        for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if (
                _HOST_OR_PORT_COPY.search(line)
                and "allowed" not in line
                and "sglang_router_api_url" not in line
            ):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
