"""deploy_state scenario (testinfra): the snapshot of the converged host is private and complete; one
restore puts back every kind of change a failed run leaves (unit, drop-in, NCCL env, the release
link) and restarts the unit; the failed combination is refused by the next run unless overridden; a
run that rotates only the key and fails keeps the new key in force and records nothing known-bad; an
unverified state never replaces the last good snapshot."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import moltest

STATE = "/var/lib/sglang-deploy/state"
UNIT = "/etc/systemd/system/sglang-kimi.service"
DROPIN = "/etc/systemd/system/sglang-kimi.service.d/override.conf"
KEY = "/etc/sglang/api-key.env"


def restore_record(out: str) -> dict[str, Any]:
    return dict(json.loads(out.split('"RESTORE ', 1)[1].split('"\n', 1)[0].replace('\\"', '"')))


def main_pid(host: Any) -> str:
    return str(host.check_output("systemctl show -p MainPID --value sglang-kimi.service")).strip()


def test_the_snapshot_is_private_and_names_the_release(host: Any) -> None:
    state = host.file(STATE)
    assert state.is_directory
    assert state.user == "root"
    assert state.mode == 0o700
    manifest = json.loads(host.file(f"{STATE}/snapshot/manifest.json").content_string)
    assert manifest["release"] == "r1"
    paths = {e["path"] for e in manifest["entries"]}
    assert {UNIT, "/etc/sglang/nccl.env", "/etc/sglang/launch-args.json"} <= paths
    assert KEY not in paths  # the key file is kept, never restored
    for entry in manifest["entries"]:
        copy = host.file(f"{STATE}/snapshot/files/{entry['copy']}")
        assert copy.mode == 0o600
        assert copy.user == "root"
    verified = json.loads(host.file(f"{STATE}/verified.json").content_string)
    assert verified["digest"] == manifest["digest"]
    assert verified["combination"]["release_id"] == "r1"


def test_one_restore_puts_back_everything_and_restarts(host: Any) -> None:
    before = {p: host.file(p).sha256sum for p in (UNIT, "/etc/sglang/nccl.env")}
    pid = main_pid(host)
    rc, out = moltest.run_playbook("tamper_restore.yml")
    assert rc == 0, out[-4000:]
    restored = restore_record(out)
    assert restored["status"] == "done"
    assert restored["restarted"] is True
    assert {i["path"].rsplit("/", 1)[-1] for i in restored["items"]} == {
        "sglang-kimi.service", "override.conf", "nccl.env", "current",
    }  # fmt: skip
    assert {p: host.file(p).sha256sum for p in before} == before
    assert not host.file(DROPIN).exists
    assert host.file("/opt/sglang/current").linked_to == "/opt/sglang/releases/r1"
    assert host.service("sglang-kimi").is_running
    assert main_pid(host) != pid
    assert "http.server 30090" in host.check_output("systemctl show -p ExecStart --value sglang-kimi.service")
    # the restore waited for /health through the one restart-and-await-health, which measured the start-up
    health = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:30090/health', timeout=5).status)"
    assert host.check_output(f'python3 -c "{health}"') == "200"
    record = json.loads(host.file("/var/lib/sglang-deploy/startup/sglang-kimi.service.json").content_string)
    assert record["invocation"] == host.check_output(
        "systemctl show -p InvocationID --value sglang-kimi.service"
    )
    assert 0 <= record["startup_s"] < 30
    bad = json.loads(host.file(f"{STATE}/known-bad.json").content_string)
    assert [b["release_id"] for b in bad] == ["r2"]
    assert host.file(f"{STATE}/known-bad.json").mode == 0o600


def test_the_failed_combination_is_refused_unless_overridden(host: Any) -> None:
    bad_env = hashlib.sha256(b"NCCL_P2P_LEVEL=NVL\n").hexdigest()
    failed = {"sglang_stack_release_id": "r2", "nccl_env_file_sha256": bad_env}
    rc, out = moltest.run_playbook("known_bad.yml", extra=[failed])
    assert rc != 0
    assert "refusing to deploy a known-bad combination" in out
    assert "release r2" in out
    assert "sglang_allow_known_bad=true" in out
    rc, out = moltest.run_playbook("known_bad.yml", extra=[{**failed, "sglang_allow_known_bad": True}])
    assert rc == 0, out[-3000:]
    rc, out = moltest.run_playbook("known_bad.yml")  # the state in force (r1, SYS) is not known-bad
    assert rc == 0, out[-3000:]


def test_an_unverified_state_keeps_the_last_good_snapshot(host: Any) -> None:
    host.run_test("sh -c 'echo NCCL_ALGO=Ring >> /etc/sglang/nccl.env'")
    try:
        rc, out = moltest.run_playbook("converge.yml", extra=[{"deploy_state_verdict": "failed"}])
        assert rc == 0, out[-3000:]
        assert "the state in force was never verified good" in out
        manifest = json.loads(host.file(f"{STATE}/snapshot/manifest.json").content_string)
        entry = next(e for e in manifest["entries"] if e["path"] == "/etc/sglang/nccl.env")
        assert entry["sha256"] == hashlib.sha256(b"NCCL_P2P_LEVEL=SYS\n").hexdigest()
    finally:
        host.run_test("sed -i '/NCCL_ALGO=Ring/d' /etc/sglang/nccl.env")


def test_a_key_rotation_stays_in_force_and_is_never_known_bad(host: Any) -> None:
    """A run that rotates only the key, restarts the unit and fails verify: the restore restarts the
    unit on the restored state with the NEW key file, and the failed combination (the last good one:
    the key is not in it) is not recorded known-bad."""
    bad_before = host.file(f"{STATE}/known-bad.json").content_string
    old_key = host.file(KEY).sha256sum
    pid = main_pid(host)
    rc, out = moltest.run_playbook("rotate_key.yml")
    assert rc == 0, out[-4000:]
    restored = restore_record(out)
    assert restored["status"] == "done"
    assert restored["restarted"] is True
    assert restored["items"] == []
    new_key = host.file(KEY)
    assert new_key.sha256sum != old_key
    assert new_key.sha256sum == hashlib.sha256(b"SGLANG_API_KEY=MoleculeRotatedKey-9876543210\n").hexdigest()
    assert new_key.mode == 0o600
    assert main_pid(host) != pid
    assert host.service("sglang-kimi").is_running
    assert "MARK not recorded known-bad: it is the last good combination" in out
    assert "the failure is not the combination's" in out
    assert host.file(f"{STATE}/known-bad.json").content_string == bad_before
    rc, out = moltest.run_playbook("known_bad.yml")  # the next run deploys it
    assert rc == 0, out[-3000:]
