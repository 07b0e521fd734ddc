"""The one "restart and await health" rule set (plugins/module_utils/service_health.py): the timeout
rule, the start-up record, the start-up arithmetic, the journal's masking. The module itself runs
against real systemd units in the molecule scenarios of sglang_service, deploy_state, sglang_router
and verify, and in the e2e."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from modload import REPO, load_module, run_module

rule = load_module("service_health_rule", REPO / "plugins/module_utils/service_health.py")


def test_unit_names_are_full_matched() -> None:
    assert rule.unit_name("sglang-kimi") == "sglang-kimi.service"
    assert rule.unit_name("sglang-router.service") == "sglang-router.service"
    for bad in ["", "../x", "a b", "x\n", "x.service\nExecStart=/bin/sh", "/etc/x"]:
        with pytest.raises(ValueError, match="allowed a systemd service name"):
            rule.unit_name(bad)


def test_no_measurement_waits_the_configured_time() -> None:
    seconds, why = rule.timeout(1800, {})
    assert seconds == 1800
    assert "configured" in why
    assert "no start-up" in why


def test_a_measured_startup_sets_the_wait() -> None:
    # a 4-minute start-up is given 12 minutes, not 30
    seconds, why = rule.timeout(1800, {"startup_s": 240.0})
    assert seconds == 720
    assert "3 x the last measured start-up 240.0 s" in why


def test_a_fast_unit_gets_the_floor() -> None:
    # the router or the lab double (40 s; 148 s once on a loaded 2-core machine): at least 300 s
    assert rule.timeout(1800, {"startup_s": 2.0})[0] == rule.STARTUP_FLOOR_S == 300
    assert rule.timeout(1800, {"startup_s": 100.0})[0] == 300


def test_the_configured_ceiling_caps_the_wait() -> None:
    seconds, why = rule.timeout(1800, {"startup_s": 900.0})
    assert seconds == 1800
    assert "ceiling" in why
    assert "2700" in why
    # a ceiling under the floor is still the ceiling (the router's 300 s, an operator's 120 s)
    assert rule.timeout(120, {"startup_s": 2.0})[0] == 120


def test_records_are_read_strictly() -> None:
    good = {"unit": "u.service", "invocation": "abc", "startup_s": 12.5, "measured_at": "t"}
    assert rule.parse_record(json.dumps(good))["startup_s"] == 12.5
    for bad in [None, "", "{", "[]", '{"startup_s": "x"}', '{"startup_s": -1}', '{"startup_s": NaN}', "{}"]:
        assert rule.parse_record(bad) == {}, bad


def test_startup_seconds_from_systemd_and_uptime() -> None:
    assert rule.startup_seconds("1234.56 99.0\n", "1000000000") == 234.6
    assert rule.startup_seconds("12.0 1.0", "0") is None  # systemd has no start time
    assert rule.startup_seconds("", "5") is None
    assert rule.startup_seconds("10.0 1", "20000000") == 0.0  # never negative


def test_parse_show() -> None:
    show = rule.parse_show("ActiveState=active\nInvocationID=ab12\nExecMainStartTimestampMonotonic=5\nX\n")
    assert show == {"ActiveState": "active", "InvocationID": "ab12", "ExecMainStartTimestampMonotonic": "5"}


def test_secret_values_from_key_files_and_config_yaml() -> None:
    key_file = "sk-live-0123456789abcdef\n"
    config = "api-key: 'cfg-secret-value-42'\nhost: 0.0.0.0\nport: 30000\nmax-total-tokens: 8192\n"
    env = "export HF_TOKEN=hf_abcdefgh\nNCCL_P2P_LEVEL=SYS\n"
    values = rule.secret_values([key_file, config, env])
    assert set(values) == {"sk-live-0123456789abcdef", "cfg-secret-value-42", "hf_abcdefgh"}
    assert values == sorted(values, key=len, reverse=True)


def test_mask_known_values_and_secret_named_pairs() -> None:
    values = rule.secret_values(["api-key: cfg-secret-value-42\n"])
    line = (
        "2026-12-05T00:00:00 host python[1]: server_args=ServerArgs(api_key='cfg-secret-value-42', "
        "tp_size=8) token=abc123456 Authorization: Bearer zzzzzzzz max_new_tokens=64 raw cfg-secret-value-42"
    )
    masked = rule.mask(line, values)
    assert "cfg-secret-value-42" not in masked
    assert "abc123456" not in masked
    assert "zzzzzzzz" not in masked
    assert "max_new_tokens=64" in masked
    assert "tp_size=8" in masked
    assert masked.count(rule.MASK) >= 4


FAKE_SYSTEMCTL = """#!/bin/sh
# TEST DOUBLE of systemctl (no systemd where pytest runs): `show` answers an active unit; any other
# verb is recorded, so a test sees that check mode ran none
case "$1" in
  show) printf 'ActiveState=active\\nSubState=running\\nLoadState=loaded\\n'
        printf 'UnitFileState=enabled\\nInvocationID=abc123\\n' ;;
  *) echo "$@" >> "$(dirname "$0")/calls" ;;
esac
"""


def fake_systemctl(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "systemctl").write_text(FAKE_SYSTEMCTL)
    (tmp_path / "systemctl").chmod(0o755)
    return {"PATH": f"{tmp_path}:{os.environ['PATH']}"}


def test_check_mode_reports_the_restart_with_its_reason_and_runs_nothing(tmp_path: Path) -> None:
    """The module that restarts reports it in check mode, with the caller's reason as its msg (the drift
    report's detail): nothing run, no health request, no record written."""
    args = {
        "name": "sglang-kimi", "action": "restart", "health_url": "http://127.0.0.1:9/health",
        "record_dir": str(tmp_path / "startup"), "reason": "environment: NCCL_NTHREADS=512 (want 256)",
    }  # fmt: skip
    result = run_module("service_health", args, "--check", env=fake_systemctl(tmp_path))
    assert result["changed"] is True, result
    assert result["msg"] == "restart sglang-kimi.service: environment: NCCL_NTHREADS=512 (want 256)"
    assert result["diff"]["after"] == "restart: environment: NCCL_NTHREADS=512 (want 256)\n", result
    assert not (tmp_path / "calls").exists()
    assert not (tmp_path / "startup").exists()
    # an active unit is not started: no change, no message
    started = run_module(
        "service_health", {**args, "action": "start"}, "--check", env=fake_systemctl(tmp_path)
    )
    assert started["changed"] is False, started
    assert "msg" not in started or not started["msg"], started


def test_a_failed_wait_with_a_reason_fails_with_the_journal(tmp_path: Path) -> None:
    """A restart with a reason whose /health never answers: the failure's message is the wait's (the unit,
    the URL, the journal), not a clash with the reason (the reason is the msg of a result that ends well)."""
    env = fake_systemctl(tmp_path)
    (tmp_path / "journalctl").write_text("#!/bin/sh\necho 'unit said: model not found'\n")
    (tmp_path / "journalctl").chmod(0o755)
    args = {
        "name": "sglang-kimi", "action": "restart", "health_url": "http://127.0.0.1:9/health",
        "timeout_s": 1, "delay_s": 0.2, "record_dir": str(tmp_path / "startup"), "reason": "drift: env",
    }  # fmt: skip
    result = run_module("service_health", args, env=env)
    assert result.get("failed") is True, result
    assert "sglang-kimi.service did not answer 200 on http://127.0.0.1:9/health" in result["msg"], result
    assert result["journal"] == ["unit said: model not found"]
    assert (tmp_path / "calls").read_text().splitlines() == ["restart sglang-kimi.service"]


def test_a_restart_answers_the_state_it_leaves(tmp_path: Path) -> None:
    """A restart that gets its 200 returns the unit's ActiveState and UnitFileState as it leaves them (the
    role exports them without a second systemctl show); check mode answers the state as it is."""
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        args = {
            "name": "sglang-kimi", "action": "restart", "health_url": f"http://127.0.0.1:{server.server_port}/health",
            "record_dir": str(tmp_path / "startup"), "delay_s": 0.2,
        }  # fmt: skip
        checked = run_module("service_health", args, "--check", env=fake_systemctl(tmp_path))
        assert (checked["active"], checked["enabled"]) == ("active", "enabled"), checked
        done = run_module("service_health", args, env=fake_systemctl(tmp_path))
    finally:
        server.shutdown()
    assert done["restarted"] is True, done
    assert (done["active"], done["enabled"]) == ("active", "enabled"), done
    assert (tmp_path / "calls").read_text().splitlines() == ["restart sglang-kimi.service"]
