"""sglang_service: golden units, systemd-analyze, the running unit with the test double, the API
key, restarts on change only, the health failure path and bad input."""

from __future__ import annotations

import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

import moltest
import pytest
from conftest import GOLDEN, TEST_KEY, UNIT, run_playbook

UNITS = {UNIT: "production", "sglang-golden-baseline": "baseline", "sglang-golden-tree": "tree"}
LAUNCH_ARGS = {
    UNIT: "/etc/sglang/launch-args.json",
    "sglang-golden-baseline": "/etc/sglang/launch-args-golden-baseline.json",
    "sglang-golden-tree": "/etc/sglang/launch-args-golden-tree.json",
}
# systemd-analyze security of the unit must not get worse than this (README states the value).
EXPOSURE_MAX = 1.6  # 2.0 before the closed device policy, ProtectClock= and the address policy
SHIM = "/usr/local/lib/sglang-deploy/sglang_launch.py"
KEY_FILE = "/etc/sglang/sglang-config.yaml"
CREDENTIALS = f"/run/credentials/{UNIT}.service"
SHA_LINE = re.compile(r"^(#   nccl\.env sha256: )[0-9a-f]{64}$", re.M)


def _normalize(text: str) -> str:
    return SHA_LINE.sub(r"\1<sha256>", text)


def _golden(name: str, actual: str) -> str:
    path = GOLDEN / name
    if os.environ.get("SGLANG_UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    return path.read_text(encoding="utf-8")


def _show(host, prop: str) -> str:
    return host.check_output(f"systemctl show -p {prop} --value {UNIT}")


def _report(host) -> dict:
    return json.loads(host.file("/var/lib/sglang/test-double.json").content_string)


# --- golden files and static checks ------------------------------------------------------


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_matches_golden(host, unit):
    actual = _normalize(host.file(f"/etc/systemd/system/{unit}.service").content_string)
    assert actual == _golden(f"{unit}.service", actual)


@pytest.mark.parametrize("unit", list(UNITS))
def test_launch_args_match_golden(host, unit):
    f = host.file(LAUNCH_ARGS[unit])
    assert f.user == "root"
    assert f.mode == 0o644
    actual = f.content_string
    assert actual == _golden(f"{unit}.launch-args.json", actual)
    doc = json.loads(actual)
    assert doc["argv"] == doc["launcher"] + doc["launch_spec"]["server_args"]
    assert TEST_KEY not in actual


def test_presets_differ_as_the_seed_table_says(host):
    prod = json.loads(host.file(LAUNCH_ARGS[UNIT]).content_string)
    base = json.loads(host.file(LAUNCH_ARGS["sglang-golden-baseline"]).content_string)
    tree = json.loads(host.file(LAUNCH_ARGS["sglang-golden-tree"]).content_string)
    args = " ".join(prod["launch_spec"]["server_args"])
    assert "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3" in args
    assert prod["environment"]["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert not any(a.startswith("--speculative") for a in base["launch_spec"]["server_args"])
    assert "SGLANG_ENABLE_SPEC_V2" not in base["environment"]
    assert "--speculative-eagle-topk 4 --speculative-num-draft-tokens 16" in " ".join(
        tree["launch_spec"]["server_args"]
    )
    assert "SGLANG_ENABLE_SPEC_V2" not in tree["environment"]
    # the interpreter, the role's launcher (key hidden in SGLang's log), then the module or the double
    assert prod["launcher"] == ["/usr/bin/python3", SHIM, "/usr/local/libexec/sglang-test-double"]
    assert base["launcher"] == ["/opt/sglang/current/venv/bin/python", SHIM, "-m", "sglang.launch_server"]


def test_nccl_checksum_line_is_truthful(host):
    nccl = host.file("/etc/sglang/nccl.env").content
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert f"#   nccl.env sha256: {hashlib.sha256(nccl).hexdigest()}\n" in unit


@pytest.mark.parametrize("unit", list(UNITS))
def test_systemd_analyze_verify_is_clean(host, unit):
    cmd = host.run(f"systemd-analyze verify /etc/systemd/system/{unit}.service")
    assert cmd.rc == 0, cmd.stdout + cmd.stderr
    noise = [line for line in (cmd.stdout + cmd.stderr).splitlines() if unit in line]
    assert noise == [], noise


def test_security_exposure_is_low(host):
    out = host.check_output(f"systemd-analyze security {UNIT} --no-pager")
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out)
    assert m, out
    print(f"systemd-analyze security {UNIT}: exposure {m[1]}")
    assert float(m[1]) <= EXPOSURE_MAX, out


def test_device_and_address_policy(host):
    # A closed device policy: the pseudo devices, plus the NVIDIA nodes the host has (none here:
    # no GPU in the container), char-rtc r from ProtectClock=.
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert "\nDevicePolicy=closed\n" in unit
    assert "DeviceAllow=/dev/nvidia" not in unit
    assert _show(host, "DevicePolicy") == "closed"
    assert _show(host, "DeviceAllow") == "char-rtc r"
    assert _show(host, "ProtectClock") == "yes"
    # GPU nodes are not hidden behind a private /dev; JIT keeps W+X pages
    assert _show(host, "PrivateDevices") == "no"
    assert _show(host, "MemoryDenyWriteExecute") == "no"
    # Addresses: everything denied but localhost (the bind address is 127.0.0.1)
    assert "\nIPAddressDeny=any\nIPAddressAllow=localhost\n" in unit
    assert set(_show(host, "IPAddressDeny").split()) == {"0.0.0.0/0", "::/0"}
    assert set(_show(host, "IPAddressAllow").split()) == {"127.0.0.0/8", "::1/128"}


def test_launcher_installed(host):
    f = host.file(SHIM)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o644)
    assert "mask_server_args_repr" in f.content_string


# --- the running service (test double) ---------------------------------------------------


def test_service_running_enabled_and_healthy(host):
    svc = host.service(UNIT)
    assert svc.is_running
    assert svc.is_enabled
    assert host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/health") == "200"


def test_lab_units_enabled_not_started(host):
    for unit in ("sglang-golden-baseline", "sglang-golden-tree"):
        svc = host.service(unit)
        assert svc.is_enabled
        assert not svc.is_running


def test_user_groups_env_and_argv_reach_the_process(host):
    rep = _report(host)
    user = host.user("sglang")
    assert rep["uid"] == user.uid
    assert rep["uid"] != 0
    for group in ("video", "render"):
        assert host.group(group).gid in rep["groups"], group
    env = rep["env"]
    assert env["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert env["NCCL_PROTO"] == "LL"
    assert env["NCCL_P2P_LEVEL"] == "SYS"
    assert env["HOME"] == "/var/lib/sglang"
    assert rep["cwd"] == "/var/lib/sglang"
    for name in ("TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "TVM_FFI_CACHE_DIR", "XDG_CACHE_HOME"):
        assert env[name].startswith("/var/cache/sglang"), name
    assert env["PATH"].startswith("/opt/sglang/current/venv/bin:/usr/local/cuda/bin:")
    launch = json.loads(host.file(LAUNCH_ARGS[UNIT]).content_string)
    # The key came from the --config YAML in the unit's credentials directory (LoadCredential=).
    assert rep["api_key_sha256"] == hashlib.sha256(TEST_KEY.encode()).hexdigest()
    assert rep["credentials_directory"] == CREDENTIALS
    assert rep["cmdline_has_key"] is False
    assert rep["env_has_api_key"] is False
    # The process got exactly the launch spec's server flags (systemd parsed the unit's ExecStart and
    # expanded %d, the credentials directory, in the one word that has it).
    spec_args = launch["launch_spec"]["server_args"]
    assert spec_args[-2:] == ["--config", "%d/sglang-config.yaml"]
    assert rep["argv"] == [*spec_args[:-1], f"{CREDENTIALS}/sglang-config.yaml"]
    for d in ("/var/lib/sglang", "/var/cache/sglang"):
        f = host.file(d)
        assert f.user == "sglang", d
        assert f.mode == 0o750, d


def test_api_key_file_and_no_leak(host):
    f = host.file(KEY_FILE)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)
    assert json.loads(f.content_string) == {"api-key": TEST_KEY}
    # the key file of the earlier version is gone
    assert not host.file("/etc/sglang/api-key.env").exists
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert TEST_KEY not in unit
    assert "api-key" not in unit
    assert "SGLANG_API_KEY" not in unit
    assert "EnvironmentFile=/etc/sglang/api-key" not in unit
    assert f"\nLoadCredential=sglang-config.yaml:{KEY_FILE}\n" in unit
    assert "    --config %d/sglang-config.yaml\n" in unit
    show = host.check_output(f"systemctl show {UNIT} --no-pager")
    assert TEST_KEY not in show
    # (systemctl show prints LoadCredential= as [unprintable]; the loaded unit has it)
    assert f"LoadCredential=sglang-config.yaml:{KEY_FILE}" in host.check_output(f"systemctl cat {UNIT}")
    # systemd resolved the %d specifier when it loaded the unit
    assert f"--config {CREDENTIALS}/sglang-config.yaml" in _show(host, "ExecStart")
    status = host.run(f"systemctl status {UNIT} --no-pager -l -n 0")
    assert TEST_KEY not in status.stdout + status.stderr
    pid = _show(host, "MainPID")
    assert pid != "0"
    cmdline = host.check_output(f"tr '\\0' ' ' < /proc/{pid}/cmdline")
    assert f"{CREDENTIALS}/sglang-config.yaml" in cmdline
    assert TEST_KEY not in cmdline
    assert TEST_KEY not in host.check_output("ps -eo args")
    # only root and the service (an ACL systemd adds) read the credential copy; other users nothing
    cred = host.file(f"{CREDENTIALS}/sglang-config.yaml")
    assert cred.user == "root"
    assert cred.mode & 0o007 == 0, oct(cred.mode)
    assert host.run(f"su -s /bin/sh nobody -c 'cat {CREDENTIALS}/sglang-config.yaml'").rc != 0
    assert TEST_KEY not in host.check_output(f"cat {LAUNCH_ARGS[UNIT]}")
    base = "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models"
    assert host.check_output(base) == "401"
    assert host.check_output(f"{base} -H 'Authorization: Bearer {TEST_KEY}'") == "200"


# --- lifecycle: restart on change only -----------------------------------------------------


def _start_stamp(host) -> tuple[str, str]:
    return _show(host, "MainPID"), _show(host, "ExecMainStartTimestampMonotonic")


def test_restart_on_nccl_and_release_change_only(host):
    before = _start_stamp(host)
    # A: an NCCL value changes through the nccl_env role's input -> restart.
    rc, out, recap = run_playbook(extra={"nccl_env_extra": {"NCCL_NTHREADS": 256}})
    assert rc == 0, out[-4000:]
    after_a = _start_stamp(host)
    assert after_a != before, "NCCL change did not restart the service"
    assert _report(host)["env"]["NCCL_NTHREADS"] == "256"
    # B: back to the original NCCL file -> restart again.
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    after_b = _start_stamp(host)
    assert after_b != after_a
    assert _report(host)["env"]["NCCL_NTHREADS"] == "512"
    # C: the release (the `current` link) changes -> restart; the unit names the new release.
    host.check_output(
        "ln -sfn /opt/sglang/releases/r2 /opt/sglang/current.new && "
        "mv -T /opt/sglang/current.new /opt/sglang/current"
    )
    try:
        rc, out, recap = run_playbook()
        assert rc == 0, out[-4000:]
        after_c = _start_stamp(host)
        assert after_c != after_b
        unit = host.file(f"/etc/systemd/system/{UNIT}.service").content_string
        assert "#   release: /opt/sglang/releases/r2\n" in unit
    finally:
        host.check_output(
            "ln -sfn /opt/sglang/releases/r1 /opt/sglang/current.new && "
            "mv -T /opt/sglang/current.new /opt/sglang/current"
        )
    rc, out, recap = run_playbook(verbose=True)
    assert rc == 0, out[-4000:]
    after_back = _start_stamp(host)
    # D: a no-op rerun restarts nothing, changes nothing, and -v output holds no key.
    rc, out, recap = run_playbook(verbose=True)
    assert rc == 0, out[-4000:]
    assert recap, out[-4000:]
    assert recap["changed"] == 0, out[-4000:]
    assert _start_stamp(host) == after_back, "a no-op rerun restarted the service"
    assert TEST_KEY not in out


STATE_TASK = (
    "sglang_service : Apply the service's host state (user, directories, launcher, launch-args.json, "
    "key file, unit, drop-ins, enablement)"
)
RESTART_TASK = (
    "sglang_service : Start sglang service and wait for /health (restarted when its unit, key file, "
    "launcher or drop-ins changed, or the process drifted)"
)


def test_edited_nccl_value_predicts_no_unit_change(host):
    """check mode predicts what the real run does: nccl_env rewrites the file, the unit stays."""
    unit = host.file(f"/etc/systemd/system/{UNIT}.service").sha256sum
    host.check_output("sed -i 's/^NCCL_NTHREADS=.*/NCCL_NTHREADS=999/' /etc/sglang/nccl.env")
    rc, out = moltest.run_playbook("service.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    assert moltest.changed_tasks(out) == ["nccl_env : Render the environment file"], out[-4000:]
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    assert recap["changed"] == 1, out[-4000:]
    assert host.file(f"/etc/systemd/system/{UNIT}.service").sha256sum == unit


def test_foreign_dropin_and_directory_owner_are_drift(host):
    """A drop-in replacing ExecStart and a chowned cache dir: --check names both, a run repairs both."""
    dropin_dir = f"/etc/systemd/system/{UNIT}.service.d"
    host.check_output(
        f"mkdir -p {dropin_dir} && printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n' "
        f"> {dropin_dir}/override.conf && systemctl daemon-reload && chown root:root /var/cache/sglang"
    )
    assert "/bin/sleep" in _show(host, "ExecStart")
    rc, out = moltest.run_playbook("service.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    # one task, the role's state module, names both items in its --diff (and the restart task reports it)
    changed = moltest.changed_tasks(out)
    assert changed == [STATE_TASK, RESTART_TASK], out[-4000:]
    assert f'"path": "{dropin_dir}/override.conf"' in out, out[-4000:]
    assert '"path": "/var/cache/sglang"' in out, out[-4000:]
    assert '"owner": "sglang"' in out, out[-4000:]
    assert host.file(f"{dropin_dir}/override.conf").exists, "check mode removed the drop-in"
    before = _start_stamp(host)
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    assert not host.file(f"{dropin_dir}/override.conf").exists
    assert "/bin/sleep" not in _show(host, "ExecStart")
    assert "sglang-test-double" in _show(host, "ExecStart")
    assert _start_stamp(host) != before, "the unit was not restarted without the drop-in"
    cache = host.file("/var/cache/sglang")
    assert (cache.user, cache.group, cache.mode) == ("sglang", "sglang", 0o750)
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    assert recap["changed"] == 0, out[-4000:]


def test_dropins_systemd_loads_from_other_directories_are_drift(host):
    """A runtime drop-in (/run/systemd/system/<unit>.d/x.conf, loaded by a daemon-reload) and a
    vendor-directory one written without a reload: no managed file changes, yet systemd runs the
    unit differently. --check names both (systemd's DropInPaths and the unit search path), a run
    removes them, reloads systemd and restarts the unit through the role's one restart path."""
    run_dir = f"/run/systemd/system/{UNIT}.service.d"
    lib_dir = f"/usr/lib/systemd/system/{UNIT}.service.d"
    host.check_output(
        f"mkdir -p {run_dir} {lib_dir} && printf '[Service]\\nEnvironment=DRIFT_RUN=1\\n' > {run_dir}/x.conf"
        f" && printf '[Service]\\nEnvironment=DRIFT_LIB=1\\n' > {lib_dir}/y.conf && systemctl daemon-reload"
    )
    assert f"{run_dir}/x.conf" in _show(host, "DropInPaths")
    rc, out = moltest.run_playbook("service.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    changed = moltest.changed_tasks(out)
    assert changed == [STATE_TASK, RESTART_TASK], out[-4000:]
    assert f'"path": "{run_dir}/x.conf"' in out, out[-4000:]
    assert f'"path": "{lib_dir}/y.conf"' in out, out[-4000:]
    assert host.file(f"{run_dir}/x.conf").exists, "check mode removed the drop-in"
    before = _start_stamp(host)
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    assert not host.file(f"{run_dir}/x.conf").exists
    assert not host.file(f"{lib_dir}/y.conf").exists
    assert "x.conf" not in _show(host, "DropInPaths")
    assert "DRIFT_" not in _show(host, "Environment")
    assert _start_stamp(host) != before, "the unit was not restarted without the drop-ins"
    host.check_output(f"rmdir {run_dir} {lib_dir}")
    rc, out, recap = run_playbook()
    assert rc == 0, out[-4000:]
    assert recap["changed"] == 0, out[-4000:]


def test_unhealthy_double_fails_with_journal_lines(host):
    name = "sglang-unhealthy"
    extra = {
        "sglang_service_name": name,
        "sglang_service_port": 30001,
        "sglang_service_launch_args_file": "/etc/sglang/launch-args-unhealthy.json",
        "sglang_service_exec_override": [
            "/usr/bin/python3",
            "/usr/local/libexec/sglang-test-double",
            "--unhealthy",
        ],
        "sglang_service_health_timeout": 6,
    }
    try:
        rc, out, _recap = run_playbook(extra=extra, verbose=True)
    finally:
        host.run(
            f"systemctl disable --now {name}; rm -f /etc/systemd/system/{name}.service "
            "/etc/sglang/launch-args-unhealthy.json; systemctl daemon-reload"
        )
    assert rc != 0, out[-4000:]
    assert f"{name}.service did not answer 200 on http://127.0.0.1:30001/health" in out, out[-4000:]
    assert "UNHEALTHY mode: /health answers 503 forever" in out, out[-4000:]
    # The double prints the key like SGLang does; the failure message shows it masked.
    assert "api_key=********" in out or "api_key='********" in out, out[-4000:]
    assert TEST_KEY not in out


# --- bad input: fails before any change, naming the variable ------------------------------

# The launch inputs are checked by the launch spec (preflight's one implementation, included by
# the role when it runs without preflight, as here); the NCCL value by nccl_env's own rules.
BAD_INPUT = {
    "nccl_value": ({"nccl_env_extra": {"NCCL_PROTO": "Fast"}}, "NCCL_PROTO='Fast'"),
    "unknown_preset": ({"sglang_preset": "turbo"}, "sglang_preset='turbo' is not valid"),
    "port_80": (
        {"sglang_service_port": 80},
        "sglang_service_port=80 is not valid: allowed an integer 1024-65535",
    ),
    "spec_v2_topk4": ({"sglang_speculative_eagle_topk": 4}, "sglang_speculative_eagle_topk=4 is not valid"),
    "relative_model_path": (
        {"sglang_model_path": "models/kimi"},
        "sglang_model_path='models/kimi' is not valid",
    ),
    "missing_api_key": ({"sglang_api_key": ""}, "sglang_api_key is empty or unset"),
    "spec_v2_baseline": (
        {"sglang_preset": "baseline", "sglang_spec_v2": True},
        "sglang_spec_v2=true is not valid",
    ),
    "short_api_key": (
        {"sglang_api_key": "short-secret"},
        "sglang_api_key (value not printed; 12 characters)",
    ),
    "service_user_root": ({"sglang_service_user": "root"}, "sglang_service_user='root'"),
    "ip_allow": (
        {"sglang_service_ip_address_allow": ["10.0.0.0/33"]},
        "sglang_service_ip_address_allow=['10.0.0.0/33']",
    ),
}


def test_bad_input_fails_before_any_change(host):
    unit_before = host.file(f"/etc/systemd/system/{UNIT}.service").md5sum
    stamp_before = _start_stamp(host)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(
            zip(
                BAD_INPUT, pool.map(lambda case: run_playbook(extra=case[0]), BAD_INPUT.values()), strict=True
            )
        )
    for case, (rc, out, recap) in results.items():
        expected = BAD_INPUT[case][1]
        assert rc != 0, f"{case}: {out[-3000:]}"
        assert expected in out, f"{case}: {expected!r} not in output:\n{out[-3000:]}"
        assert recap, f"{case}: {out[-3000:]}"
        assert recap["changed"] == 0, f"{case}: {out[-3000:]}"
        assert "short-secret" not in out, case
        assert TEST_KEY not in out, case
    assert host.file(f"/etc/systemd/system/{UNIT}.service").md5sum == unit_before
    assert _start_stamp(host) == stamp_before


# --- drift of the running process (issue 20 item 11) ---------------------------------------

# the one restart task (sglang.deploy.service_health) reports it, in check mode with the drift as its diff
PROCESS_DRIFT_CHANGES = [RESTART_TASK]


def test_process_started_before_an_env_change_is_drift_and_restarted(host):
    """The files change while the process keeps running with the old NCCL value (here: a run with
    sglang_service_start=false, which renders but never restarts): the process is drift, --check
    names it and restarts nothing, a run restarts it, the next run finds no process drift."""
    nthreads = {"nccl_env_extra": {"NCCL_NTHREADS": 256}}
    try:
        before = _start_stamp(host)
        rc, out, recap = run_playbook(extra={**nthreads, "sglang_service_start": False})
        assert rc == 0, out[-4000:]
        assert _start_stamp(host) == before, "sglang_service_start=false restarted the service"
        assert "NCCL_NTHREADS=256\n" in host.file("/etc/sglang/nccl.env").content_string
        assert _report(host)["env"]["NCCL_NTHREADS"] == "512"  # the process still runs the old file
        rc, out = moltest.run_playbook("service.yml", "--check", "--diff", extra=[nthreads])
        assert rc == 0, out[-4000:]
        assert moltest.changed_tasks(out) == PROCESS_DRIFT_CHANGES, out[-4000:]
        assert "environment: NCCL_NTHREADS=512 (want 256)" in out, out[-4000:]
        assert TEST_KEY not in out
        assert _start_stamp(host) == before, "check mode restarted the service"
        rc, out, recap = run_playbook(extra=nthreads)
        assert rc == 0, out[-4000:]
        assert _start_stamp(host) != before, "the drifted process was not restarted"
        assert _report(host)["env"]["NCCL_NTHREADS"] == "256"
        assert host.service(UNIT).is_running
        after = _start_stamp(host)
        # converged: no process drift, nothing changed, no restart
        rc, out, recap = run_playbook(extra=nthreads)
        assert rc == 0, out[-4000:]
        assert recap["changed"] == 0, out[-4000:]
        assert _start_stamp(host) == after
    finally:
        rc, out, _recap = run_playbook()
        assert rc == 0, out[-4000:]
    assert _report(host)["env"]["NCCL_NTHREADS"] == "512"


def test_process_with_an_older_key_is_drift_without_showing_it(host):
    """The key file changes while the process keeps the old key (systemd copied the credential when it
    started it): drift, named by --check, the keys shown nowhere (also not with -v)."""
    before = _start_stamp(host)
    other = {"sglang_api_key": "OtherKey-0123456789-abcdefXYZ"}  # test-only value
    try:
        rc, out, _recap = run_playbook(extra={**other, "sglang_service_start": False})
        assert rc == 0, out[-4000:]
        assert _start_stamp(host) == before
        rc, out = moltest.run_playbook("service.yml", "--check", "--diff", "-v", extra=[other])
        assert rc == 0, out[-4000:]
        assert moltest.changed_tasks(out) == PROCESS_DRIFT_CHANGES, out[-4000:]
        assert "credential: sglang-config.yaml changed since the process started" in out, out[-4000:]
        assert TEST_KEY not in out
        assert other["sglang_api_key"] not in out
        assert _start_stamp(host) == before
    finally:
        rc, out, _recap = run_playbook()
        assert rc == 0, out[-4000:]
    assert _report(host)["api_key_sha256"] == hashlib.sha256(TEST_KEY.encode()).hexdigest()
