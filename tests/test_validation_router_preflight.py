"""Issue 32 item 2: the router's preflight (roles/preflight/tasks/validate_router.yml, the play of
playbooks/site.yml and playbooks/router.yml) refuses, before any host is changed, naming the variable,
the value and what is allowed:

* a router without an admin key, or with the client key as its admin key (sglang-router 0.3.2 then
  guards /workers with the client key: any client could add or remove workers);
* `any` in sglang_router_ip_address_allow unless sglang_router_ip_address_allow_any is true.

`ansible-playbook` runs on the controller itself (`connection: local`, no container); a refused run
ends with changed=0 and never reaches the lock or the install.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import local_ansible_env

REPO = Path(__file__).resolve().parents[1]
CLIENT_KEY = "Test-Client-Key-0123456789"  # test-only values
ADMIN_KEY = "Test-Admin-Key-0123456789"
GOOD: dict[str, Any] = {"sglang_router_api_key": CLIENT_KEY, "sglang_router_admin_api_key": ADMIN_KEY}
PREFLIGHT_ONLY = """---
- name: The router preflight play of playbooks/site.yml and playbooks/router.yml
  hosts: sglang_routers
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: Validate the router inputs
      ansible.builtin.include_role:
        name: preflight
        tasks_from: validate_router
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("router-preflight")
    inventory = tmp / "inventory"
    inventory.mkdir()
    (inventory / "group_vars").symlink_to(REPO / "group_vars")  # the pins and the fleet interface
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"sglang_routers": {"hosts": {"rt": host}}}))

    def _run(
        over: dict[str, Any], *args: str, playbook: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        case = tmp / f"case{len(list(tmp.glob('case*')))}.json"
        case.write_text(json.dumps({**GOOD, **over}))
        path = playbook or tmp / "preflight.yml"
        if playbook is None:
            path.write_text(PREFLIGHT_ONLY)
        cmd = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(path)]
        cmd += ["-e", f"@{case}", *args]
        return subprocess.run(
            cmd, cwd=REPO, env=local_ansible_env(), capture_output=True, text=True, timeout=600, check=False
        )

    return _run


def _recap(out: str) -> dict[str, int]:
    match = re.search(r"rt\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert match, out[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))


BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "admin_key_missing": (
        {"sglang_router_admin_api_key": ""},
        'sglang_router_admin_api_key="" is not valid',
        "required and different from sglang_router_api_key",
    ),
    "admin_key_is_the_client_key": (
        {"sglang_router_admin_api_key": CLIENT_KEY},
        'sglang_router_admin_api_key="<set>" is not valid',
        "required and different from sglang_router_api_key",
    ),
    "admin_key_short": (
        {"sglang_router_admin_api_key": "short"},
        'sglang_router_admin_api_key="<set>" is not valid',
        "16-256 characters",
    ),
    "admin_key_file_is_the_client_key_file": (
        {"sglang_router_admin_api_key_file": "/etc/sglang-router/api-key"},
        'sglang_router_admin_api_key_file="/etc/sglang-router/api-key" is not valid',
        "not sglang_router_api_key_file",
    ),
    "allow_any": (
        {"sglang_router_ip_address_allow": ["any"]},
        'sglang_router_ip_address_allow=["any"] is not valid',
        "sglang_router_ip_address_allow_any: true to opt in",
    ),
    "allow_any_among_others": (
        {"sglang_router_ip_address_allow": ["localhost", "any"]},
        'sglang_router_ip_address_allow=["localhost", "any"] is not valid',
        "sglang_router_ip_address_allow_any: true to opt in",
    ),
    "api_url_off_host": (
        {"sglang_router_api_url": "http://router.example:30080"},
        'sglang_router_api_url="http://router.example:30080" is not valid',
        "http(s)://LOOPBACK:PORT",
    ),
    "allow_any_opt_in_not_boolean": (
        {"sglang_router_ip_address_allow": ["any"], "sglang_router_ip_address_allow_any": "yes please"},
        # the argument spec of the role's validate entry point refuses it first
        "argument 'sglang_router_ip_address_allow_any' is of type str and we were unable to convert to bool",
        "Valid booleans include",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_router_input_fails_in_preflight(run: Any, case: str) -> None:
    over, needle, allowed = BAD[case]
    proc = run(over)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert needle in out, out[-3000:]
    assert allowed in out, out[-3000:]
    assert CLIENT_KEY not in out
    assert ADMIN_KEY not in out
    recap = _recap(out)
    assert recap["changed"] == 0
    assert recap["failed"] == 1


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"sglang_router_ip_address_allow": ["any"], "sglang_router_ip_address_allow_any": True},
        {"sglang_router_host": "10.0.0.5", "sglang_router_ip_address_allow": ["localhost", "10.0.0.0/24"]},
        {"sglang_router_api_url": "http://127.0.0.1:30080"},
    ],
    ids=["defaults", "any_opted_in", "client_network", "api_url_loopback"],
)
def test_router_inputs_pass(run: Any, over: dict[str, Any]) -> None:
    proc = run(over)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert _recap(out)["changed"] == 0


def test_router_playbook_stops_at_preflight(run: Any) -> None:
    """playbooks/router.yml (check mode: a real run would install on this machine if the check did not
    hold) with the client key as the admin key stops in its preflight play: no lock, no install."""
    proc = run(
        {"sglang_router_admin_api_key": CLIENT_KEY}, "--check", playbook=REPO / "playbooks" / "router.yml"
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "sglang_router_admin_api_key" in out
    assert "Take the host lock" not in out
    assert "PLAY [Router - install" not in out
    assert CLIENT_KEY not in out
    assert _recap(out)["changed"] == 0


@pytest.mark.parametrize("longer", [False, True])
def test_router_waits_at_least_the_servers_measured_startup(tmp_path: Path, longer: bool) -> None:
    """The worker start-up timeout against the start-up verify recorded on the servers (startup_s of
    their verify_baseline_records, read from the server hosts' variables by the one validator)."""
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "group_vars").symlink_to(REPO / "group_vars")
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    timeout = 1800
    startup = timeout + 0.5 if longer else timeout - 1
    records = {"fp1": {"startup_s": 12.5}, "fp2": {"startup_s": startup}, "fp3": {"gate": "pass"}}
    server = {**host, "verify_baseline_records": records}
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {"sglang_routers": {"hosts": {"rt": host}}, "sglang_servers": {"hosts": {"srv1": server}}}
        )
    )
    play = tmp_path / "preflight.yml"
    play.write_text(PREFLIGHT_ONLY)
    case = tmp_path / "case.json"
    case.write_text(json.dumps({**GOOD, "sglang_router_worker_startup_timeout_secs": timeout}))
    cmd = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(play)]
    proc = subprocess.run(
        [*cmd, "-e", f"@{case}"],
        cwd=REPO, env=local_ansible_env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    if not longer:
        assert proc.returncode == 0, out[-3000:]
        return
    assert proc.returncode == 2, out[-3000:]
    assert (
        f"sglang_router_worker_startup_timeout_secs={timeout} is not valid: "
        f"allowed an integer >= {timeout + 1} (the longest start-up verify measured on the servers" in out
    ), out[-3000:]
    assert _recap(out)["changed"] == 0
