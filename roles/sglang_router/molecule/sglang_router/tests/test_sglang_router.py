"""sglang_router on the converged container: the release venv (version, hashes), the unit's hardening,
the router process as its own user, /health, the workers registered with their own keys, requests
through the router with and without the key, a worker added by hand reported in check mode and removed
by a real run, and the keys nowhere in /proc/*/cmdline, `systemctl show` or the journal. Issue 32
item 2: the client key cannot change workers (401 on /workers; only the admin key can), the router
and its /metrics are not reachable on the container's network address under the defaults, and the
roll's admin path (delegated to the router host, loopback, admin key) takes a worker out and back."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

import moltest

ROOT = "/opt/sglang-router"
UNIT = "sglang-router"
ROUTER_KEY = "Molecule-Router-Key-abcdef012345"  # test-only values (inventory/host_vars)
ADMIN_KEY = "Molecule-Router-Admin-Key-0123456789"
WORKER_KEYS = {"w1": "Molecule-W1-Key-0123456789", "w2": "Molecule-W2-Key-9876543210"}
WHEEL_SHA256 = {
    "ba5a24951e5e0357fe390782fcd1abd861448a87216832dbf2e501a1dd1548eb",
    "40a10f3817b80377c2ceb326b625f24bd06eb97426e5044de722295ec7fa79c0",
}
EXPOSURE_MAX = 1.5  # systemd-analyze security: 1.3 measured on Debian 12 (README); must not get worse
API = "http://127.0.0.1:30080"
testinfra_hosts = ["sgd-sglang_router"]


def curl(host, *args: str) -> tuple[int, str]:
    out = host.check_output("curl -s -w '\\n%{http_code}' " + " ".join(args))
    body, _sep, code = out.rpartition("\n")
    return int(code), body


def workers(host) -> list[dict]:
    code, body = curl(host, "-H", f"'Authorization: Bearer {ADMIN_KEY}'", f"{API}/workers")
    assert code == 200, body
    return json.loads(body)["workers"]


def test_release_holds_the_pinned_router(host) -> None:
    current = host.file(f"{ROOT}/current")
    assert current.is_symlink
    target = host.check_output(f"readlink {ROOT}/current")
    assert re.fullmatch(r"releases/[0-9a-f]{12}", target), target
    release = f"{ROOT}/{target}"
    assert host.file(f"{release}/.complete").exists
    version = host.check_output(
        f"{release}/venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"sglang-router\"))'"
    )
    assert version == "0.3.2"
    lock = host.file(f"{release}/requirements.lock").content_string
    entry = lock[re.search(r"^sglang-router==0\.3\.2 ", lock, re.M).start() :]
    assert set(re.findall(r"--hash=sha256:([0-9a-f]{64})", entry)) == WHEEL_SHA256
    # every line of the lock is pinned with hashes: uv pip sync --require-hashes installed exactly it
    pins = re.findall(r"^([a-z0-9_.-]+)==(\S+) \\$", lock, re.M)
    installed = json.loads(host.file(f"{release}/receipt.json").content_string)["versions"]
    for name, pinned in pins:
        assert installed.get(name) == pinned or installed.get(name.replace("-", "_")) == pinned, (
            name,
            pinned,
        )
    # the release id follows the lock's sha256 through the one rule (sglang.deploy.release_id, as the
    # stack's): the first 12 hex of the sha256 of the canonical JSON {"router_lock_sha256": <digest>}
    digest = host.check_output(f"sha256sum {release}/requirements.lock").split()[0]
    blob = json.dumps({"router_lock_sha256": digest}, sort_keys=True, separators=(",", ":"))
    assert target.endswith(hashlib.sha256(blob.encode()).hexdigest()[:12])
    assert host.file(release).user == "root"


def test_unit_hardening_and_user(host) -> None:
    out = host.check_output(f"systemd-analyze security {UNIT}.service --no-pager")
    exposure = float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", out).group(1))
    assert exposure <= EXPOSURE_MAX, out[-2000:]
    assert host.service(UNIT).is_running
    assert host.service(UNIT).is_enabled
    pid = host.check_output(f"systemctl show -p MainPID --value {UNIT}")
    assert host.check_output(f"ps -o user= -p {pid}") == "sglang-router"


def test_health_and_auth(host) -> None:
    assert curl(host, f"{API}/health")[0] == 200
    assert curl(host, f"{API}/workers")[0] == 401  # admin routes need the admin key
    code, _body = curl(
        host, "-H", "'Content-Type: application/json'", "-d", '\'{"text": "hi"}\'', f"{API}/generate"
    )
    assert code == 401
    code, body = curl(
        host, "-H", f"'Authorization: Bearer {ROUTER_KEY}'", "-H", "'Content-Type: application/json'",
        "-d", "'{\"text\": \"hi\", \"sampling_params\": {\"max_new_tokens\": 3}}'", f"{API}/generate",
    )  # fmt: skip
    assert code == 200, body
    assert json.loads(body)["meta_info"]["completion_tokens"] == 3
    assert curl(host, "http://127.0.0.1:29000/metrics")[0] == 200
    # the admin key is no client key
    code, _body = curl(
        host, "-H", f"'Authorization: Bearer {ADMIN_KEY}'", "-H", "'Content-Type: application/json'",
        "-d", '\'{"text": "hi"}\'', f"{API}/generate",
    )  # fmt: skip
    assert code == 401


def test_client_key_cannot_change_workers(host) -> None:
    """The client key on the admin routes: 401 for list, add and remove; nothing changes."""
    auth, json_type = f"'Authorization: Bearer {ROUTER_KEY}'", "'Content-Type: application/json'"
    before = workers(host)
    assert curl(host, "-H", auth, f"{API}/workers")[0] == 401
    code, body = curl(
        host, "-X", "POST", "-H", auth, "-H", json_type, "-d", '\'{"url": "http://127.0.0.1:31003"}\'',
        f"{API}/workers",
    )  # fmt: skip
    assert code == 401, body
    code, body = curl(host, "-X", "DELETE", "-H", auth, f"{API}/workers/{before[0]['id']}")
    assert code == 401, body
    host.run("sleep 2")
    assert {w["url"] for w in workers(host)} == {w["url"] for w in before}


def test_not_reachable_on_the_network_address_by_default(host) -> None:
    """Defaults: the router and its /metrics listen on loopback only, the unit's address policy is
    localhost: the container's own network address (what another host would dial) gets no answer."""
    addresses = host.check_output("hostname -I").split()
    assert addresses
    for address in addresses:
        for url in (f"http://{address}:30080/workers", f"http://{address}:29000/metrics"):
            rc = host.run(f"curl -s -o /dev/null --max-time 5 {url}").rc
            assert rc != 0, f"{url} answered (curl rc {rc})"  # 7: connection refused
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert "IPAddressDeny=any\nIPAddressAllow=localhost\n" in unit
    argv = host.check_output(f"systemctl show -p ExecStart --value {UNIT}")
    assert "--host 127.0.0.1 " in argv, argv
    assert "--prometheus-host 127.0.0.1 " in argv, argv


def test_roll_admin_path(host) -> None:
    """The roll's way in: delegated to the router host, its loopback, the admin key (roll_admin.yml)."""
    rc, out = moltest.run_playbook("roll_admin.yml")
    assert rc == 0, out[-4000:]
    assert ADMIN_KEY not in out
    assert ROUTER_KEY not in out
    listed = {w["url"]: w for w in workers(host)}
    assert set(listed) == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}
    assert all(w["is_healthy"] for w in listed.values())


def test_workers_registered_with_their_own_keys(host) -> None:
    listed = {w["url"]: w for w in workers(host)}
    assert set(listed) == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}
    assert all(w["is_healthy"] for w in listed.values())
    for name in WORKER_KEYS:
        log = host.file(f"/opt/worker-double/{name}.log").content_string
        # the router asked each worker with that worker's key (the double logs ok|none|bad, never the key)
        assert "GET /get_server_info ok" in log or "GET /server_info ok" in log, log
        assert " bad" not in log, log
    assert "api_key" not in json.dumps(workers(host))


def test_key_nowhere(host) -> None:
    keys = [ROUTER_KEY, ADMIN_KEY, *WORKER_KEYS.values()]
    cmdlines = host.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' || true")
    show = host.check_output(f"systemctl show {UNIT}")
    journal = host.check_output(f"journalctl -u {UNIT} --no-pager -o cat")
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    for key in keys:
        assert key not in cmdlines
        assert key not in show
        assert key not in journal
        assert key not in unit
    for path in ("/etc/sglang-router/api-key", "/etc/sglang-router/admin-api-key"):
        key_file = host.file(path)
        assert (key_file.user, key_file.group, key_file.mode) == ("root", "root", 0o600)


def test_hand_added_worker_is_drift_and_removed(host) -> None:
    """w3 (a third double, keyless, in no inventory: prepare.yml) added to the router by hand, by an
    operator on the router host with the admin key."""
    auth, json_type = f"'Authorization: Bearer {ADMIN_KEY}'", "'Content-Type: application/json'"
    body_w3 = '\'{"url": "http://127.0.0.1:31003"}\''
    code, body = curl(host, "-X", "POST", "-H", auth, "-H", json_type, "-d", body_w3, f"{API}/workers")
    assert code == 202, body
    for _attempt in range(30):
        if "http://127.0.0.1:31003" in {w["url"] for w in workers(host)}:
            break
        host.run("sleep 1")
    rc, out = moltest.run_playbook("converge.yml", "--check")
    assert rc == 0, out[-4000:]
    assert (
        "router sgd-sglang_router: worker http://127.0.0.1:31003 registered but not in the inventory" in out
    )
    assert "http://127.0.0.1:31003" in {w["url"] for w in workers(host)}  # check mode only read
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert {w["url"] for w in workers(host)} == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}


STATE_TASK = "sglang_router : Apply the router's run state (current, launcher, key file, unit, enablement)"


def test_tampered_unit_and_key_are_drift_and_restored(host) -> None:
    """An edited unit and a replaced key file: --check --diff names both paths (the key's content
    never), changes nothing; a real run restores both and restarts the router (then re-registers
    the workers, which a restarted router has forgotten)."""
    unit_path, key_path = f"/etc/systemd/system/{UNIT}.service", "/etc/sglang-router/api-key"
    tampered = "Tampered-Router-Key-0123456789"  # test-only value
    unit_sha, key_sha = host.file(unit_path).sha256sum, host.file(key_path).sha256sum
    started = host.check_output(f"systemctl show -p InvocationID --value {UNIT}")
    host.check_output(f"sed -i 's/^RestartSec=5$/RestartSec=1/' {unit_path}")
    host.check_output(f"printf %s {tampered} > {key_path}")
    tampered_unit_sha, tampered_key_sha = host.file(unit_path).sha256sum, host.file(key_path).sha256sum
    assert tampered_unit_sha != unit_sha
    assert tampered_key_sha != key_sha

    rc, out = moltest.run_playbook("converge.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    assert moltest.changed_tasks(out) == [STATE_TASK], out[-4000:]
    for needle in (f"before: {unit_path}", f"before: {key_path}", "-RestartSec=1", "+RestartSec=5"):
        assert needle in out, out[-4000:]
    assert tampered not in out
    assert ROUTER_KEY not in out
    assert ADMIN_KEY not in out
    # check mode only read
    assert host.file(unit_path).sha256sum == tampered_unit_sha
    assert host.file(key_path).sha256sum == tampered_key_sha
    assert host.check_output(f"systemctl show -p InvocationID --value {UNIT}") == started

    rc, out = moltest.run_playbook("converge.yml", "--diff")
    assert rc == 0, out[-4000:]
    assert tampered not in out
    assert ROUTER_KEY not in out
    assert ADMIN_KEY not in out
    assert host.file(unit_path).sha256sum == unit_sha
    key_file = host.file(key_path)
    restored = (key_file.sha256sum, key_file.user, key_file.group, key_file.mode)
    assert restored == (key_sha, "root", "root", 0o600)
    assert host.check_output(f"systemctl show -p InvocationID --value {UNIT}") != started, "not restarted"
    assert host.check_output(f"systemctl show -p RestartUSec --value {UNIT}") == "5s"
    listed = workers(host)  # the restarted router reads the restored key: the API answers with it
    assert {w["url"] for w in listed} == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}
    assert all(w["is_healthy"] for w in listed)


def test_router_service_tag_alone(host) -> None:
    """`--tags router_service` (the release tasks skipped): the run state is applied and the router is
    started, without the facts only the release tasks set; a converged host changes nothing."""
    started = host.check_output(f"systemctl show -p InvocationID --value {UNIT}")
    rc, out = moltest.run_playbook("converge.yml", "--tags", "router_service")
    assert rc == 0, out[-4000:]
    assert moltest.totals(out)["changed"] == 0, moltest.changed_tasks(out)
    assert host.check_output(f"systemctl show -p InvocationID --value {UNIT}") == started


def test_a_failed_build_leaves_the_unit_and_current_as_they_were(host) -> None:
    """A new lock whose router wheel hash matches no artefact (uv's --require-hashes fails the build)
    together with a changed flag (--policy round_robin in the unit): the play fails naming the build,
    the failed release is removed, and the unit, the launcher, `current` and the running router are
    untouched - the new unit is never written before a complete release."""
    unit_path = f"/etc/systemd/system/{UNIT}.service"
    unit_sha = host.file(unit_path).sha256sum
    current = host.file(f"{ROOT}/current").linked_to
    releases = set(host.check_output(f"ls {ROOT}/releases").split())
    started = host.check_output(f"systemctl show -p InvocationID --value {UNIT}")
    broken = {"sglang_router_wheel_sha256": ["0" * 64], "sglang_router_policy": "round_robin"}
    rc, out = moltest.run_playbook("converge.yml", extra=[broken])
    assert rc != 0, out[-4000:]
    assert "Building router release" in out, out[-4000:]
    assert "failed in task" in out
    assert "were left as they were" in out
    assert host.file(unit_path).sha256sum == unit_sha
    assert "round_robin" not in host.file(unit_path).content_string
    assert host.file(f"{ROOT}/current").linked_to == current
    assert set(host.check_output(f"ls {ROOT}/releases").split()) == releases
    assert host.check_output(f"systemctl show -p InvocationID --value {UNIT}") == started
    code, _body = curl(host, f"{API}/health")
    assert code == 200


def test_a_failed_start_puts_the_whole_last_good_state_back(host) -> None:
    """The router's transaction is the server's (role deploy_state): a drop-in that makes every start
    fail (ExecStartPre=/bin/false, left by someone on the host) and a changed flag (--policy round_robin,
    so the run restarts the router): the start's /health wait fails (the one restart-and-await-health),
    and the last good state comes back whole - the unit without the new flag AND without the drop-in,
    `current` - the router is restarted on it and answers /health, and the play fails reporting both.
    The next run changes nothing but the workers the restarted router forgot."""
    unit_path = f"/etc/systemd/system/{UNIT}.service"
    dropin = f"/etc/systemd/system/{UNIT}.service.d/zz-broken.conf"
    unit_sha = host.file(unit_path).sha256sum
    current = host.file(f"{ROOT}/current").linked_to
    host.check_output(f"mkdir -p {unit_path}.d && printf '[Service]\\nExecStartPre=/bin/false\\n' > {dropin}")
    broken = {"sglang_router_policy": "round_robin", "sglang_router_health_timeout": 20}
    rc, out = moltest.run_playbook("converge.yml", extra=[broken])
    assert rc != 0, out[-4000:]
    assert "router stage failed on" in out, out[-4000:]
    # the failed task (systemctl's own error, or the wait, with the journal's last lines)
    assert "in 'Restart or start the router and wait for its /health'" in out, out[-4000:]
    assert "restore: restored the state of" in out, out[-4000:]
    assert "zz-broken.conf" in out, out[-4000:]  # the restore names what it put back
    assert not host.file(dropin).exists
    assert host.file(unit_path).sha256sum == unit_sha
    assert "round_robin" not in host.file(unit_path).content_string
    assert host.file(f"{ROOT}/current").linked_to == current
    assert host.check_output(f"systemctl show -p ActiveState --value {UNIT}") == "active"
    code, _body = curl(host, f"{API}/health")
    assert code == 200
    assert ROUTER_KEY not in out
    assert ADMIN_KEY not in out
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    listed = workers(host)
    assert {w["url"] for w in listed} == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}


def test_status_asks_the_router_through_the_role(host) -> None:
    """The collection's playbooks/status.yml on the router (its play includes the role's status entry
    point): /workers, /readiness and /health asked at the role's own API URL with its key, handed to
    the controller as data; the key is in no output."""
    playbook = moltest.scenario_dir().parents[3] / "playbooks" / "status.yml"
    inventory = str(moltest.inventory_dir())
    cmd = ["ansible-playbook", "-i", inventory, str(playbook), "--limit", "sgd-sglang_router"]
    # stdout one JSON document: without profile_tasks, whose timings go to stdout too
    env = dict(
        moltest.ansible_env("ansible.posix.json"),
        ANSIBLE_SHOW_CUSTOM_STATS="1",
        ANSIBLE_CALLBACKS_ENABLED="sglang.deploy.prefork",
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert ROUTER_KEY not in proc.stdout + proc.stderr
    assert ADMIN_KEY not in proc.stdout + proc.stderr
    stats = json.loads(proc.stdout)["global_custom_stats"]["sglang_status_routers"]["sgd-sglang_router"]
    assert stats["health"]["status"] == 200
    assert stats["workers"]["status"] == 200, stats["workers"]
    listed = {w["url"] for w in json.loads(stats["workers"]["body"])["workers"]}
    assert listed == {"http://127.0.0.1:31001", "http://127.0.0.1:31002"}
    assert stats["prometheus_target"].endswith(":29000")


def test_the_lifecycle_removes_a_partial_build_prunes_old_releases_and_keeps_the_previous(host) -> None:
    """The release lifecycle (module sglang.deploy.release, the stack's too) on the converged router: an
    interrupted build's directory is removed, a complete release beyond sglang_router_keep_releases (2)
    is pruned, the release `current` pointed at before the run (made current by hand, as a rollback
    does) is kept whatever its age, and `current` is switched back to the release of this lock. Check
    mode names each and changes nothing; the next run prunes the old previous one too."""
    releases = f"{ROOT}/releases"
    release = host.check_output(f"readlink {ROOT}/current")
    old, previous, newer, partial = "0ld0000000a1", "0ld0000000b2", "0ld0000000c3", "part0000000d"
    for rid, day in ((old, "2020-01-01"), (previous, "2020-01-02"), (newer, "2020-01-03")):
        host.check_output(
            f"mkdir -p {releases}/{rid} && cp -a {ROOT}/{release}/venv {releases}/{rid}/venv"
            f" && echo {rid} > {releases}/{rid}/.complete && touch -d {day} {releases}/{rid}/.complete"
        )
    host.check_output(f"mkdir -p {releases}/{partial}/venv && touch {releases}/{partial}/requirements.lock")
    host.check_output(f"ln -sfn releases/{previous} {ROOT}/current.tmp")
    host.check_output(f"mv -T {ROOT}/current.tmp {ROOT}/current")

    rc, out = moltest.run_playbook("converge.yml", "--check", "-v")
    assert rc == 0, out[-4000:]
    assert "would remove incomplete release(s) (an interrupted or failed build)" in out, out[-4000:]
    assert f"{releases}/{partial}" in out
    assert f"would remove releases beyond the newest 2: {releases}/{old}" in out, out[-4000:]
    for rid in (old, previous, newer, partial):
        assert host.file(f"{releases}/{rid}").is_directory, rid
    assert host.check_output(f"readlink {ROOT}/current") == f"releases/{previous}"

    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert host.check_output(f"readlink {ROOT}/current") == release
    assert not host.file(f"{releases}/{partial}").exists
    assert not host.file(f"{releases}/{old}").exists
    assert host.file(f"{releases}/{previous}/.complete").exists  # the release before this run
    assert host.file(f"{releases}/{newer}/.complete").exists  # the newest but the one in force
    code, _body = curl(host, f"{API}/health")
    assert code == 200
    # the next run: `previous` is no longer the release before the run's, so it goes too
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert not host.file(f"{releases}/{previous}").exists
    assert host.file(f"{ROOT}/{release}/.complete").exists
    host.check_output(f"rm -rf {releases}/{newer}")
