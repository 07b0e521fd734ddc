"""Layers 5-9 of the verify role for real on the converged lab host: the REAL sglang-kimi unit runs
the named test double sglang-protocol-double (playbooks/lab/sglang_protocol_double.py, SGLang's own
protocol models and auth middleware, run with the release python) behind an API key, and
playbooks/verify.yml drives sglang.bench_serving of the release against it.

Cases, in order (one module fixture sets the double up once), all at the role's default gate (floor
5 %, k 3 x the measured spread, 3 repetitions): the first run on a host without a baseline records one
("baseline recorded", with its spread and the start-up time of a restart verify saw), then a run gated
against it that passes; a run of another workload with recording off is "ungated" and
`sglang-deploy verify` exits 6; a rollback (a second release that is slow via its
protocol-double.json, current switched to it by hand): the last good state comes back, layers 5-6 run
again, the play fails reporting both; the running release made 20 % slower (its protocol-double.json,
read by the double at every request): the gate fails with its table. Then the transaction through the
whole site.yml (the service stage starts the lab unit because its launcher is the double): a
unit-only change and an NCCL-env-only change that fail the gate are reverted and recorded known-bad,
the known-bad combination is refused before the unit is written, and a unit that never answers /health
makes the service stage restore the previous unit on the previous release.
After every case the API key is looked for in the host's generated files, the controller's fetched
copies and the output. Last, autotune's preset sweep against the double (its own docstring).

The host is left as the other e2e tests expect it: current on the original release, the second
release removed, the unit stopped and the host converged again by site.yml (`up` -> changed=0)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.sglang.deploy.plugins.module_utils.verify_gate import allowed_shortfall, pooled_band
from e2e_lab import LAB_HOST, REPO, lab_exec, lab_inventory, playbook

from sglang_deploy.commands_demo import slow_release_argv

pytestmark = [pytest.mark.e2e, pytest.mark.verify_lab]

KEY = "E2eVerifyKey-0123456789abcdef"  # test-only value
ROOT = "/opt/sglang"
DOC = "/var/lib/sglang-deploy/production_v2.md"
RESULTS = "/var/lib/sglang-deploy/verify-results.json"
DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
STATE = "/var/lib/sglang-deploy/state"  # role deploy_state: snapshot, verified.json, known-bad.json
UNIT = "/etc/systemd/system/sglang-kimi.service"
NCCL_ENV = "/etc/sglang/nccl.env"
REQUEST_LOG = "/var/lib/sglang/double-requests.log"  # the double's, in the unit's state directory
SMALL = {
    "verify_levels": [1, 4],
    # 12 prompts of 48 tokens: a level runs a few seconds, long enough that the shared machine's
    # scheduling noise does not dominate the spread the gate's band is measured from
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    # the double (SGLang's modules imported by the release python) took 148 s to answer /health after
    # a restart on the loaded 2-core lab machine; layer 5 waits for it (also after the rollback)
    "verify_http_wait_s": 400,
}
SECTIONS = [
    "## 1. Hardware", "## 2. Software Stack", "## 3. Configuration Rationale", "## 4. Key Flags Explained",
    "## 5. NCCL Tuning", "## 6. Exact Launch Command", "## 7. Systemd Service", "## 8. Patches Applied",
    "## 9. Model Paths and Benchmark Logs",
]  # fmt: skip


def extra(tmp: Path, name: str, tokens_per_s: float, **more: Any) -> str:
    """An extra-vars file (the key never on a command line): the key, the double as the launcher."""
    data = {
        "sglang_api_key_required": True,
        "sglang_api_key": KEY,
        "sglang_service_exec_override": [
            f"{ROOT}/current/venv/bin/python",
            DOUBLE,
            "--double-tokens-per-s",
            str(tokens_per_s),
        ],
        **SMALL,
        **more,
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(data))
    return f"@{path}"


def current() -> str:
    return lab_exec("readlink", f"{ROOT}/current").strip().rsplit("/", 1)[-1]


def switch(release: str) -> None:
    """current -> releases/<release> the way the stack role switches (temp link + rename(2))."""
    lab_exec(
        "sh",
        "-c",
        f"ln -sfn releases/{release} {ROOT}/.current.e2e && mv -T {ROOT}/.current.e2e {ROOT}/current",
    )


def no_key_anywhere(output: str, controller_dirs: list[Path]) -> None:
    """The key in none of the output, the host's generated files, the controller's copies. A copy of
    the key file under the deploy_state role's directory (none since the key is kept out of the
    state; an older snapshot may hold one) is root 0600 in a root 0700 directory, and nowhere else
    under /var/lib/sglang-deploy."""
    assert KEY not in output
    leaked = lab_exec(
        "sh", "-c", f"grep -rl --exclude-dir=state {shlex.quote(KEY)} /var/lib/sglang-deploy || true"
    ).strip()
    assert leaked == ""
    # the benchmark runs async (roles/verify/tasks/bench_exec.yml): the job records on the host keep the
    # task's module arguments and result, the key went in a file the runner removed
    jobs = lab_exec("sh", "-c", f"grep -rl {shlex.quote(KEY)} /root/.ansible_async 2>/dev/null || true")
    assert jobs.strip() == ""
    kept = lab_exec("sh", "-c", f"grep -rl {shlex.quote(KEY)} {STATE} || true").split()
    for copy in kept:
        assert lab_exec("stat", "-c", "%U %a", copy).strip() == "root 600", copy
    if kept:
        assert lab_exec("stat", "-c", "%U %a", STATE).strip() == "root 700"
    for folder in controller_dirs:
        for path in folder.rglob("*"):
            if path.is_file():
                assert KEY not in path.read_text(errors="replace"), path


@pytest.fixture(scope="module")
def double(
    converged_lab: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The double behind the unit (key on, 100 tok/s per request); afterwards the host as it was."""
    tmp = Path(tmp_path_factory.mktemp("verify-lab"))
    inventory = str(lab_inventory(tmp / "inventory"))
    release = current()
    # The gate compares a run with a baseline recorded minutes earlier on this host. Under `make test` this
    # container shares 2 CPUs with the molecule queue's containers, whose load changes between those two
    # windows (a healthy release fell short at C=4 by 8.1 % against 5 % allowed): a change of host speed
    # no GPU host sees between a baseline and a gate run minutes apart. Its CPU weight (cgroup cpu.shares)
    # is raised 8x over every other container's default 1024, so under contention the benchmark and the
    # double keep their speed and the gate judges the release, at the role's own default tolerance and
    # statistics (nothing about the gate is loosened). The verdict that holds when a host's speed does
    # drift between windows is the same-window comparison, not this.
    shares = subprocess.run(
        ["docker", "update", "--cpu-shares", str(8 * 1024), LAB_HOST],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert shares.returncode == 0, shares.stderr
    setup = playbook("-i", inventory, "playbooks/lab/protocol_double.yml", "-e", extra(tmp, "setup", 100))
    # as site.yml would before it renders that unit: the release's SGLang parses the argv the double's
    # inputs make (the key on: --config), so a restore of this state passes the rollback rules
    launch = playbook("-i", inventory, "site.yml", "--tags", "stack_launch", "-e", extra(tmp, "launch", 100))
    try:
        assert setup.returncode == 0, setup.stdout[-6000:]
        assert launch.returncode == 0, launch.stdout[-6000:]
        assert lab_exec("systemctl", "is-active", "sglang-kimi").strip() == "active"
        yield {"tmp": tmp, "inventory": inventory, "release": release, "setup": setup.stdout}
    finally:
        if current() != release:
            switch(release)
        lab_exec("sh", "-c", f"rm -rf {ROOT}/releases/{release}-e2e-slow")
        # the combinations the transaction tests made fail, and the snapshot of the double's state
        lab_exec("rm", "-rf", STATE)
        lab_exec("rm", "-f", "/var/lib/sglang-deploy/capacity-probe.json")  # the same-window pair's probe
        lab_exec("systemctl", "stop", "sglang-kimi")
        # the whole site.yml, not only --tags service: the stack stage also records the argv in force
        # (launch-check.json), which the double's argv changed; measured: --tags service alone left
        # the next site.yml at changed=1
        restored = playbook("-i", inventory, "site.yml")
        assert restored.returncode == 0, restored.stdout[-4000:]
        unit = lab_exec("systemctl", "cat", "sglang-kimi")
        assert "sglang_protocol_double" not in unit
        assert current() == release


def verify(
    double: dict[str, Any], name: str, tokens_per_s: float, *args: str, **more: Any
) -> tuple[int, str]:
    more_vars = extra(double["tmp"], name, tokens_per_s, **more)
    run = playbook("-i", double["inventory"], "playbooks/verify.yml", "-e", more_vars, *args)
    return run.returncode, run.stdout + run.stderr


def host_results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(lab_exec("cat", RESULTS))
    return data


def test_record_baseline_then_pass(double: dict[str, Any]) -> None:
    fetch = double["tmp"] / "fetched"
    # a restart verify sees from its start: the start-up time (unit start -> first /health 200) is measured
    lab_exec("systemctl", "restart", "sglang-kimi")
    rc, out = verify(double, "record", 100, verify_fetch_dir=str(fetch))
    assert rc == 0, out[-6000:]
    assert "verify layer 5 (HTTP) passed" in out
    assert "verify layer 6 (benchmark) passed" in out
    recorded = "verify layer 7 (gate) baseline recorded: no comparable baseline for no GPU (lab mode), tp 1/"
    recorded += "production"
    assert recorded in out, out[-6000:]
    assert "3 repetition(s) per level" in out
    # the benchmark ran in the background, its progress polled (each poll a retry of that task)
    assert re.search(r"RETRYING: \[[^]]+\]: Follow the benchmark's progress", out), out[-6000:]
    baseline = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "verify_baseline.yml"
    assert baseline.is_file()
    assert oct(baseline.stat().st_mode & 0o777) == "0o600"
    record = yaml.safe_load(baseline.read_text().replace("!unsafe ", ""))["verify_baseline_records"]
    assert len(record) == 1
    (entry,) = record.values()
    assert sorted(entry["levels"]) == ["1", "4"]
    assert entry["levels"]["1"]["n"] == 3
    assert entry["levels"]["1"]["cv_pct"] is not None
    assert entry["startup_s"] is not None, entry
    assert entry["startup_s"] > 0, entry
    assert entry["fields"]["release_id"] == double["release"]
    results = host_results()
    assert results["status"] == "baseline recorded"
    assert results["results"]["gate"]["status"] == "baseline_recorded"
    fetched = sorted(p.name for p in fetch.rglob("*") if p.is_file())
    assert "production_v2.md" in fetched
    assert "verify-results.json" in fetched
    assert any(name.endswith(".jsonl") for name in fetched), fetched
    no_key_anywhere(out, [fetch, baseline.parent])

    rc, out = verify(double, "pass", 100)
    assert rc == 0, out[-6000:]
    assert "verify layer 7 (gate) passed" in out, out[-6000:]
    assert re.search(r"level\s+expected\s+measured\s+delta\s+allowed\s+margin\s+verdict", out), out[-6000:]
    doc = lab_exec("cat", DOC)
    assert [ln for ln in doc.splitlines() if re.match(r"^## [0-9]\. ", ln)] == SECTIONS
    assert "Workload: scaled mode" in doc
    section6 = doc.split("## 6.", 1)[1].split("## 7.", 1)[0]
    assert "--config /etc/sglang/sglang-config.yaml" in section6
    assert "--api-key" not in section6
    results = host_results()
    assert results["status"] == "passed"
    assert results["verdict"]["status"] == "passed"
    assert results["results"]["gate"]["status"] == "passed"
    assert results["results"]["startup"]["status"] == "passed", results["results"]["startup"]
    assert [lv["level"] for lv in results["results"]["bench"]["levels"]] == [1, 4]
    no_key_anywhere(out, [])


def test_ungated_without_a_comparable_baseline_exits_6(double: dict[str, Any]) -> None:
    """Another workload (output length 24: no record of its fingerprint) with recording off: the run is
    ungated, never passed, and the CLI says so with its own exit code."""
    more = extra(double["tmp"], "ungated", 100, verify_record_baseline=False, verify_bench_output_len=24)
    cli = REPO / ".venv" / "bin" / "sglang-deploy"
    run = subprocess.run(
        [str(cli), "verify", "-i", double["inventory"], "-e", more, "--artifacts", str(double["tmp"] / "art"),
         "--report-dir", str(double["tmp"] / "ungated-report"), "--progress", "plain"],
        capture_output=True, text=True, check=False, cwd=REPO, timeout=3600,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 6, out[-6000:]
    assert f"verify: ungated on {LAB_HOST}" in out, out[-3000:]
    results = host_results()
    assert results["status"] == "ungated"
    gate = results["results"]["gate"]
    assert gate["status"] == "ungated"
    assert gate["reason"].startswith("no comparable baseline for no GPU (lab mode), tp 1/production"), gate
    assert "differs in output_len" in gate["reason"]
    assert "nothing recorded (verify_record_baseline is false)" in gate["reason"]
    baseline = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "verify_baseline.yml"
    assert len(yaml.safe_load(baseline.read_text().replace("!unsafe ", ""))["verify_baseline_records"]) == 1
    no_key_anywhere(out, [double["tmp"] / "ungated-report"])


MARKER_TOKENIZER = "/opt/models/lab-marker-tokenizer"
ROOT_WRITE = "/var/lib/sglang-deploy/rce-marker"
MARKER_CODE = f"""import os, sys
from transformers import PreTrainedTokenizerFast
try:
    with open({ROOT_WRITE!r}, "w") as fh:
        fh.write("written")
    WROTE = "allowed"
except OSError:
    WROTE = "denied"
print(f"MARKER uid={{os.getuid()}} root-write={{WROTE}}", file=sys.stderr)


class MarkerTokenizer(PreTrainedTokenizerFast):
    pass
"""


def _bench_logs() -> str:
    """The console logs of the newest benchmark run on the host."""
    newest = lab_exec("sh", "-c", "ls -1d /var/lib/sglang-deploy/bench/*-bench | tail -n 1").strip()
    return lab_exec("sh", "-c", f"cat {shlex.quote(newest)}/*.log")


def test_the_benchmark_runs_model_code_only_as_the_service_user(double: dict[str, Any]) -> None:
    """Issue 32 item 1: a tokenizer whose auto_map names code that writes a marker (bench_serving
    0.5.9 loads it with trust_remote_code=True whatever the operator chose). With remote code on it
    runs as the service user in the service's sandbox (not uid 0, the host read-only to it); with
    sglang_trust_remote_code=false it does not run at all (the level fails on the refused tokenizer).
    Recording is off and nothing is restored: the runs change nothing else."""
    lab_exec("rm", "-rf", MARKER_TOKENIZER, ROOT_WRITE)
    lab_exec("cp", "-r", "/opt/models/lab-target", MARKER_TOKENIZER)
    lab_exec("python3", "-c", (
        "import json, sys; p = sys.argv[1] + '/tokenizer_config.json'; c = json.load(open(p)); "
        "c['auto_map'] = {'AutoTokenizer': ['tokenization_marker.MarkerTokenizer', None]}; "
        "c['tokenizer_class'] = 'MarkerTokenizer'; json.dump(c, open(p, 'w')); "
        "open(sys.argv[1] + '/tokenization_marker.py', 'w').write(sys.argv[2])"
    ), MARKER_TOKENIZER, MARKER_CODE)  # fmt: skip
    lab_exec("sh", "-c", f"chmod -R a+rX {MARKER_TOKENIZER}")
    uid = lab_exec("id", "-u", "sglang").strip()
    try:
        for trust in (True, False):
            _rc, out = verify(
                double, f"marker-{trust}", 100, verify_tokenizer=MARKER_TOKENIZER,
                verify_record_baseline=False, verify_bench_output_len=24, sglang_trust_remote_code=trust,
                # the refused tokenizer fails layer 6: record that verdict, restore nothing (the state
                # in force is this host's last good one, which is never marked known-bad)
                verify_rollback_on_failure=False,
            )  # fmt: skip
            logs = _bench_logs()
            written = lab_exec("sh", "-c", f"test -e {ROOT_WRITE} && echo present || echo absent").strip()
            assert written == "absent"
            if trust:
                assert "verify layer 6 (benchmark) passed" in out, out[-6000:]
                assert f"MARKER uid={uid} root-write=denied" in logs, logs[-3000:]
                assert "MARKER uid=0" not in logs
            else:
                assert "MARKER" not in logs, logs[-3000:]
                assert "contains custom code" in logs, logs[-3000:]
                assert "verify layer 6 (benchmark) passed" not in out, out[-6000:]
            no_key_anywhere(out, [])
    finally:
        lab_exec("rm", "-rf", MARKER_TOKENIZER, ROOT_WRITE)


def gate_passed_or_short(rc: int, out: str) -> str:
    """The gate of the last verify run at the default tolerance passed, or failed on throughput alone
    (no level with errors or without a result), and the play said so; returns its status."""
    gate = host_results()["results"]["gate"]
    assert gate["tolerance_pct"] == 5, gate  # the default
    if gate["status"] == "passed":
        assert rc == 0, out[-6000:]
        assert "verify layer 7 (gate) passed" in out, out[-6000:]
    else:
        assert gate["status"] == "failed", gate
        assert gate["failed_levels"], gate
        assert {row["verdict"] for row in gate["rows"]} <= {"ok", "FAIL"}, gate  # no "FAIL (errors)"
        assert rc != 0, out[-6000:]
        assert "verify layer 7 (gate) failed" in out, out[-6000:]
    return str(gate["status"])


def test_key_in_no_process_list_cmdline_or_journal(double: dict[str, Any]) -> None:
    """While verify runs layer 5 and the benchmark at the default gate, `ps` (sampled by a thread) never
    shows the key; neither do the server's /proc/<MainPID>/cmdline and its journal, where SGLang's
    start-up line server_args=ServerArgs(...) shows api_key='********' (the double prints it with SGLang
    0.5.9's own dataclass repr, behind the unit's launcher).

    ps runs on the machine that runs the lab host, not through `docker exec`: every process of the
    machine is in its view, the lab host's and the controller's (ansible-playbook, its workers, the
    docker CLI commands of the connection), and each must be free of the key. The samples must catch
    verify_http.py (layer 5) and verify_bench.py (layer 6) running in the lab host's own processes (its
    PID namespace: another lane's lab host may run them too). `-ww`: without it ps cuts each line at 80
    columns when its output is no terminal and it cannot tell a width (under pytest: the scripts' names
    and any key past column 80 were never seen; 962 samples found neither).

    The pace: every 0.05 s while no benchmark runs on the lab host (layer 5 takes a few tenths of a
    second: 4 of 954 samples caught it, 2026-12-03), every 1 s while verify_bench.py runs there (it
    lives for the whole measurement; a key in its argv or a child's that lives past a second is seen).
    The sampler's own load must stay off the measurement it shares the machine with: sampled through
    `docker exec` five times a second (about 110 ms of CPU each, bench/results/2026-12-02-task-costs.txt)
    and then with ps on the machine twenty times a second, the double fell short of the default gate at
    C=4 in fresh-clone CI runs (-7.1 %, -5.3 %, then -7.7 % and -6.4 % pooled with the confirmation,
    against -5.0 % allowed), while the lab's other gated runs, which sample nothing, passed.

    The gate's verdict is not this test's subject: the run must reach layers 5-7 with the key in
    use, and the gate may pass, or fail on throughput alone (no level with errors or
    without a result), which the tests around this one assert at the default tolerance. This test's run
    falls at the same point of `make test` as the molecule queue's heaviest scenario (sglang_stack's
    real install on the other CPU): paced at 1 s during the benchmark, it passed in one fresh-clone run
    and fell short in the next (C=4 -10.5 % pooled, while the disk filled and that scenario failed)."""
    init = lab_exec("sh", "-c", "readlink /proc/1/ns/pid").strip()  # pid:[<inode>] of the lab host
    pidns = init.removeprefix("pid:[").removesuffix("]")
    seen = {"samples": 0, "during_bench": 0, "ps_failed": 0, "verify_bench.py": 0, "verify_http.py": 0}
    leaked: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            done = subprocess.run(
                ["ps", "-e", "-ww", "-o", "pidns=,args="],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            seen["samples"] += 1
            seen["ps_failed"] += done.returncode != 0
            lines = done.stdout.splitlines()
            leaked.extend(line for line in lines if KEY in line)
            lab = [line for line in lines if line.split(None, 1)[:1] == [pidns]]
            for script in ("verify_bench.py", "verify_http.py"):
                seen[script] += any(script in line for line in lab)
            benchmark = any("verify_bench.py" in line for line in lab)
            seen["during_bench"] += benchmark
            stop.wait(1.0 if benchmark else 0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        rc, out = verify(double, "ps-sample", 100)
    finally:
        stop.set()
        sampler.join(timeout=70)
    assert "verify layer 6 (benchmark) passed" in out, out[-6000:]
    gate = gate_passed_or_short(rc, out)
    assert seen["ps_failed"] == 0, seen
    assert seen["verify_bench.py"], f"no sample caught the benchmark on the lab host ({seen}, {init})"
    assert seen["verify_http.py"], f"no sample caught layer 5 on the lab host ({seen}, {init})"
    assert leaked == [], f"the key was in ps: {len(leaked)} lines, first {leaked[0][:300]!r}"
    print(f"ps -e -ww -o pidns,args: {seen} (lab host {init}), none with the key; gate {gate}")
    pid = lab_exec("systemctl", "show", "-p", "MainPID", "--value", "sglang-kimi").strip()
    assert pid not in ("", "0")
    cmdline = lab_exec("cat", f"/proc/{pid}/cmdline").replace("\0", " ")
    assert "--config /run/credentials/sglang-kimi.service/sglang-config.yaml" in cmdline
    assert KEY not in cmdline
    assert KEY not in lab_exec("systemctl", "status", "sglang-kimi", "--no-pager", "-l")
    # this start of the unit (a journal kept from runs of earlier versions may hold other lines)
    invocation = lab_exec("systemctl", "show", "-p", "InvocationID", "--value", "sglang-kimi").strip()
    journal = lab_exec(
        "journalctl", "-u", "sglang-kimi", f"_SYSTEMD_INVOCATION_ID={invocation}", "--no-pager", "-o", "cat"
    )
    assert "server_args=ServerArgs(" in journal
    assert "api_key='********'" in journal
    assert KEY not in journal
    unit = lab_exec("systemctl", "cat", "sglang-kimi")
    assert KEY not in unit
    assert "LoadCredential=sglang-config.yaml:/etc/sglang/sglang-config.yaml" in unit


def test_rollback_after_a_slow_release(double: dict[str, Any]) -> None:
    first = double["release"]
    second = f"{first}-e2e-slow"
    # the demo's slower release (`sglang-deploy lab demo`): a hard-linked copy with a new receipt FILE
    # (not written through the hard link into the first release's) naming the copy, the double at 50
    # tok/s in its protocol-double.json, current switched to it, the unit restarted
    lab_exec(*slow_release_argv(first, second, slow_pace(double)))
    assert "release_id" in lab_exec("cat", f"{ROOT}/releases/{first}/receipt.json")
    assert second not in lab_exec("cat", f"{ROOT}/releases/{first}/receipt.json")  # R1's file untouched
    assert second in lab_exec("cat", f"{ROOT}/releases/{second}/receipt.json")
    assert current() == second
    # no forced target: the last good state (recorded before this run, a passed verdict's) comes back
    rc, out = verify(double, "rollback", 100)
    assert rc != 0, out[-6000:]
    assert f"verify failed on release {second} and rolled back to {first}" in out, out[-8000:]
    assert "verify layer 8 (rollback): restored the state of " in out
    assert f"(release {first})" in out
    assert current() == first
    assert lab_exec("systemctl", "is-active", "sglang-kimi").strip() == "active"
    results = host_results()
    assert results["status"] == "rolled back"
    assert results["results"]["gate"]["status"] == "failed"
    assert results["results"]["http_after_rollback"]["status"] == "passed"
    # the restored release is the baseline's own: its gate passes, or - the baseline was recorded minutes
    # earlier and a loaded machine drifts (seen in a whole run while the fleet's replica image was being
    # built beside it: C=4 -9.5 %, allowed -6.2 %) - falls short by a load's margin, never by the slow
    # release's (about -48 %), and never on errors or a level without a result
    after = results["results"]["gate_after_rollback"]
    if after["status"] != "passed":
        assert after["status"] == "failed", after
        assert {row["verdict"] for row in after["rows"]} <= {"ok", "FAIL"}, after
        assert all(row["delta_pct"] > -25.0 for row in after["rows"]), after
    doc = lab_exec("cat", DOC)
    assert "**Rolled back**" in doc
    assert f"Release `{first}`" in doc
    no_key_anywhere(out, [])


def gate_said(out: str) -> str:
    """What the last run's gate decided (its status, reason, baseline and table from verify-results.json)
    and the output's tail: an assertion's message, since the tail alone ends after the gate's report."""
    try:
        gate = host_results()["results"].get("gate", {})
    except (json.JSONDecodeError, subprocess.SubprocessError) as exc:
        gate = {"error": str(exc)}
    summary = {key: gate.get(key) for key in ("status", "reason", "decided_by", "baseline")}
    return f"{json.dumps(summary, indent=1)}\n{gate.get('table', '')}\n...\n{out[-4000:]}"


def slow_pace(double: dict[str, Any], most: float = 50.0) -> float:
    """The double's pace (tok/s per request) for a release the default gate must fail: `most` (50, the
    too-slow case 80), or slower when the recorded baseline allows more. The gate allows max(5 %, 3 x the
    pooled CV x sqrt(1/3 + 1/3)) below the baseline's median; a baseline recorded while `make test` loaded
    the 2 shared CPUs allowed 48.7 % (C=1) and 67.9 % (C=4), and a release at 50 rightly passed it. So the
    pace is chosen from the record itself: at pace p the double gives at most p x C tok/s at concurrency C
    (overhead only lowers it), so with p <= median(C) / C x (1 - (widest allowed + 10) / 100) every level
    falls at least 10 points beyond the widest allowed shortfall, however fast the gated window runs.
    Computed once per module (the known-bad case repeats the unit case's inputs exactly)."""
    key = f"slow_pace_{most:g}"
    if key in double:
        return float(double[key])
    path = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "verify_baseline.yml"
    records = yaml.safe_load(path.read_text().replace("!unsafe ", ""))["verify_baseline_records"]
    rows = {int(level): row for entry in records.values() for level, row in entry["levels"].items()}
    band = pooled_band({level: row.get("cv_pct") for level, row in rows.items()})
    widest = max(allowed_shortfall(5.0, 3.0, band.get(level), 3, 3) for level in rows)
    fastest = min(float(row["output_tps"]) / level for level, row in rows.items())
    pace = float(round(min(most, fastest * (1.0 - (widest + 10.0) / 100.0)), 1))
    # a pace this low still runs a level in a few minutes; below it the record is too noisy to test a gate
    assert pace >= 5.0, f"the recorded baseline's spread is too wide to test a gate: {band}, {rows}"
    print(f"slow pace {pace} tok/s per request: widest allowed {widest:.1f} %, baseline {rows}")
    double[key] = pace
    return pace


def test_too_slow_fails_the_gate_with_its_table(double: dict[str, Any]) -> None:
    """The running release made slower (80 against 100 tok/s per request, further when the baseline's
    spread allows more: slow_pace) at the default gate: the double reads its release's
    protocol-double.json at every request, so no restart is needed."""
    pace = slow_pace(double, most=80.0)
    slow = f"{ROOT}/releases/{double['release']}/protocol-double.json"
    lab_exec("sh", "-c", f"echo '{{\"tokens_per_s\": {pace}}}' > {slow}")
    try:
        rc, out = verify(double, "slow-verify", 100)
    finally:
        lab_exec("rm", "-f", slow)
    print(f"the double at {pace} tok/s per request against the baseline's 100")
    assert rc != 0, gate_said(out)
    assert "verify layer 7 (gate) failed" in out, out[-6000:]
    assert re.search(r"level\s+expected\s+measured\s+delta\s+allowed\s+margin\s+verdict", out), out[-6000:]
    assert "FAIL" in out
    assert current() == double["release"]  # no switch in this run: nothing to roll back
    results = host_results()
    assert results["status"] == "failed"
    assert results["verdict"]["failed"] == ["gate"]
    # a throughput-only shortfall is measured again (verify_gate_confirm, the default) and the pooled
    # repetitions of both measurements still fail: a 20 % regression is not a burst of load
    assert "fell short of the baseline on throughput only; measuring again" in out, out[-6000:]
    gate = results["results"]["gate"]
    assert gate["confirmation"]["first_status"] == "failed", gate
    assert gate["confirmation"]["repetitions"] == 6
    assert results["results"]["bench_confirm"]["repetitions"] == 3
    assert gate["reason"].startswith("the first measurement fell short at C=")
    no_key_anywhere(out, [])


HOST_PACE = "/etc/sglang-protocol-double/host.json"  # the double's host-wide pace (both arms alike)
PROFILE = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks"}  # the time of each task, at the end


def site_timed(double: dict[str, Any], name: str, tokens_per_s: float) -> tuple[int, str]:
    """site.yml at the default settings with the double at ``tokens_per_s`` in its unit (a unit change:
    the service stage restarts the server; verify_same_window: auto, and the host is calibrated by the
    first same-window case, so the pair runs), profile_tasks' times at the end of the output."""
    more = extra(double["tmp"], name, tokens_per_s)
    run = playbook("-i", double["inventory"], "site.yml", "-e", more, env=PROFILE)
    return run.returncode, run.stdout + run.stderr


def same_window_gate(out: str) -> dict[str, Any]:
    """The gate of the last run, after checking it was the same-window pair's, with both arms and probes."""
    results = host_results()["results"]
    gate: dict[str, Any] = results["gate"]
    assert gate["mode"] == "same_window", gate
    assert gate["decided_by"].startswith("same window: arm A, release "), gate["decided_by"]
    assert isinstance(gate["seed"], int)
    assert sorted(map(tuple, gate["order_a"][1:])) == [(lv, r) for lv in (1, 4) for r in range(6)]
    assert gate["order_a"][0] == [1, -1, 4]  # the capacity probe first
    assert results["bench_arm_a"]["status"] == "passed"
    assert results["capacity"]["probe_a"], results["capacity"]
    assert results["capacity"]["probe_b"], results["capacity"]
    assert "verify layer 7 (gate) same window: arm A the serving release" in out, out[-6000:]
    assert "Single host: arm A runs while this release still serves its clients" in out
    # on at the defaults because the host is calibrated: the record's false-alarm rate travels with it
    assert gate["calibration"].get("false_alarm_rate") is not None, gate
    print(
        f"same window: {gate['status']} - {gate['reason']}\n{gate['table']}\ncapacity: {results['capacity']}"
    )
    return gate


@pytest.mark.same_window_lab
def test_calibrate_records_the_host_s_paired_spread(double: dict[str, Any]) -> None:
    """First of the same-window cases. `sglang-deploy verify --calibrate`: the serving release against
    itself as both arms (the cap, 6 repetitions each), judged as an upgrade is; the host's paired spread,
    the pairs needed and the measured false-alarm rate go to host_vars/<host>/verify_calibration.yml, and
    the report shows them."""
    cli = REPO / ".venv" / "bin" / "sglang-deploy"
    report = double["tmp"] / "calibrate-report"
    run = subprocess.run(
        [str(cli), "verify", "--calibrate", "-i", double["inventory"],
         "-e", extra(double["tmp"], "calibrate", 100), "--artifacts", str(double["tmp"] / "calibrate-art"),
         "--report-dir", str(report), "--progress", "plain"],
        capture_output=True, text=True, check=False, cwd=REPO, timeout=3600,
    )  # fmt: skip
    out = run.stdout + run.stderr
    path = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "verify_calibration.yml"
    assert path.is_file(), out[-6000:]
    record = yaml.safe_load(path.read_text().replace("!unsafe ", ""))["verify_calibration_record"]
    assert sorted(record["levels"]) == ["1", "4"], record
    assert 3 <= record["repetitions"] <= 6, record
    assert all(row["pairs"] == 6 for row in record["levels"].values()), record
    gate = host_results()["results"]["gate"]
    assert gate["decided_by"].startswith("calibration (A/A): the serving release"), gate["decided_by"]
    print(f"calibration (rc {run.returncode}, gate {gate['status']}): {record}")
    # an identical release: the pair passes, or the A/A run is a measured false alarm the record counts
    assert run.returncode in (0, 2, 7), out[-6000:]
    assert "Compared with: calibration (A/A): the serving release" in (report / "report.md").read_text()
    no_key_anywhere(out, [path.parent, report])
    # the record stays: the same-window cases after this one run at the defaults (verify_same_window:
    # auto), which turn the pair on for a calibrated host; test_a_unit_change_... removes it


@pytest.mark.same_window_lab
def test_same_window_a_healthy_upgrade_passes(double: dict[str, Any]) -> None:
    """A unit change that keeps the pace (100 -> 100.0 tok/s in its ExecStart): the serving release is
    benchmarked before the service stage restarts it (arm A), the new unit after (arm B), and the pair
    passes at the default settings (5 % allowed, 3 repetitions, cap 6)."""
    rc, out = site_timed(double, "sw-healthy", 100.0)
    assert rc == 0, out[-8000:]
    gate = same_window_gate(out)
    assert gate["status"] == "passed", gate
    assert host_results()["status"] == "passed"
    assert "--double-tokens-per-s 100.0" in lab_exec("systemctl", "cat", "sglang-kimi")
    no_key_anywhere(out, [])


@pytest.mark.same_window_lab
def test_same_window_a_15_percent_slower_release_fails_and_is_rolled_back(double: dict[str, Any]) -> None:
    """The unit made 15 % slower (85 tok/s): arm B falls short of arm A beyond the allowed 5 % (the
    one-sided bound, Holm across levels), the verdict fails, the last good state (100.0) comes back and
    the combination is recorded known-bad."""
    bad, unit = len(known_bad()), sha(UNIT)
    rc, out = site_timed(double, "sw-slow", 85)
    assert rc != 0, out[-8000:]
    assert "verify failed on release" in out, out[-8000:]
    assert "verify layer 8 (rollback): restored the state of " in out
    gate = same_window_gate(out)
    assert gate["status"] == "failed", gate
    assert gate["failed_levels"], gate
    assert all(row["upper_pct"] < -5 for row in gate["rows"] if row["level"] in gate["failed_levels"]), gate
    assert host_results()["status"] == "rolled back"
    assert sha(UNIT) == unit  # the unit in force before this run (the last good state), whatever it was
    assert health() == "200"
    assert len(known_bad()) == bad + 1
    no_key_anywhere(out, [])


@pytest.mark.same_window_lab
def test_same_window_a_host_slower_for_both_arms_passes(double: dict[str, Any]) -> None:
    """The HOST's pace drops 10 % (the double's host.json: every release alike) and a healthy unit change
    (100.0 <-> 100) runs: both arms see the drop, the pair passes and the capacity control reports the
    drop as the host's. Today's design on the same host right after: playbooks/verify.yml gates the same
    state against the baseline stored at full pace and fails it (10 % short, 5 % allowed, confirmed)."""
    lab_exec("sh", "-c", f"mkdir -p {HOST_PACE.rsplit('/', 1)[0]} && echo '{{\"pace\": 0.9}}' > {HOST_PACE}")
    try:
        # a unit change whatever the earlier cases left in force (100 or 100.0: the same pace)
        pace = 100 if "--double-tokens-per-s 100.0" in lab_exec("systemctl", "cat", "sglang-kimi") else 100.0
        rc, out = site_timed(double, "sw-host-drift", pace)
        assert rc == 0, out[-8000:]
        gate = same_window_gate(out)
        assert gate["status"] == "passed", gate
        capacity = host_results()["results"]["capacity"]
        assert capacity["status"] == "changed", capacity
        assert capacity["a_vs_reference_pct"] < -5, capacity
        assert capacity["b_vs_reference_pct"] < -5, capacity
        assert "capacity: changed - the host's capacity changed" in out  # the gate's report (layer 7)
        # today's design, the same host and state: the stored baseline (full pace) against this window
        rc, out = verify(double, "stored-under-drift", 100)
        stored = host_results()["results"]["gate"]
        print(
            f"stored-baseline gate under the same drift: {stored['status']} - {stored['reason']}\n"
            f"{stored['table']}"
        )
        assert stored.get("mode") != "same_window"
        assert stored["baseline"]["source"] == "recorded", stored["baseline"]
        assert stored["status"] == "failed", stored
        assert rc != 0
    finally:
        lab_exec("rm", "-f", HOST_PACE)


def site(double: dict[str, Any], name: str, tokens_per_s: float, **more: Any) -> tuple[int, str]:
    """The whole site.yml with the double (verify_benchmark auto: layers 6-8 run on a change)."""
    run = playbook(
        "-i", double["inventory"], "site.yml", "-e", extra(double["tmp"], name, tokens_per_s, **more)
    )
    return run.returncode, run.stdout + run.stderr


def sha(path: str) -> str:
    return lab_exec("sha256sum", path).split()[0]


def main_pid() -> str:
    return lab_exec("systemctl", "show", "-p", "MainPID", "--value", "sglang-kimi").strip()


def health() -> str:
    url = "http://127.0.0.1:30000/health"
    probe = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).status)"
    return lab_exec("python3", "-c", probe).strip()


def known_bad() -> list[dict[str, Any]]:
    text = lab_exec("sh", "-c", f"cat {STATE}/known-bad.json 2>/dev/null || echo []")
    records: list[dict[str, Any]] = json.loads(text)
    return records


def test_a_unit_change_that_fails_the_gate_is_reverted(double: dict[str, Any]) -> None:
    """site.yml with only the unit changed (the double's pace 100 -> 50 tok/s in its ExecStart, slower when
    the baseline allows more: slow_pace): the service restarts on it, the gate fails against the host's
    baseline, and the whole state comes back (the unit as it was, the service restarted on it and verified
    again); the combination is known-bad.
    In the lab the service stage starts a unit whose launcher is the double (sglang_service_exec_override),
    so the slower unit really runs: without that restart the gate would pass and this test fail."""
    # uncalibrated, as in CI, whatever ran before (the same-window cases calibrate this host)
    calibration = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "verify_calibration.yml"
    calibration.unlink(missing_ok=True)
    unit, env, pid, bad = sha(UNIT), sha(NCCL_ENV), main_pid(), len(known_bad())
    rc, out = site(double, "unit-slow", slow_pace(double))
    assert rc != 0, out[-6000:]
    assert "verify failed on release" in out, out[-8000:]
    assert "verify layer 8 (rollback): restored the state of " in out
    assert sha(UNIT) == unit
    assert sha(NCCL_ENV) == env
    assert "--double-tokens-per-s 100" in lab_exec("systemctl", "cat", "sglang-kimi")
    assert main_pid() not in (pid, "0")
    assert health() == "200"
    results = host_results()
    assert results["status"] == "rolled back"
    assert results["results"]["gate"]["status"] == "failed"
    # verify_same_window: auto (the default) and no calibration record on this host: the stored baseline
    # decided, and the gate says why no pair ran
    decided_by = results["results"]["gate"]["decided_by"]
    assert decided_by.startswith("recorded baseline (no same window: "), decided_by
    assert "verify_same_window is auto and this host has no calibration record" in decided_by, decided_by
    assert results["results"]["gate_after_rollback"]["status"] == "passed", results["results"][
        "gate_after_rollback"
    ]
    assert [r["release_id"] for r in known_bad()[bad:]] == [double["release"]]
    no_key_anywhere(out, [])


def test_the_known_bad_combination_is_refused(double: dict[str, Any]) -> None:
    """The same inputs again: the service stage refuses before it writes the unit, naming the record and
    the override; the server keeps running as it was (same MainPID, same unit)."""
    unit, pid = sha(UNIT), main_pid()
    rc, out = site(double, "unit-slow-again", slow_pace(double))
    assert rc != 0, out[-6000:]
    assert "refusing to deploy a known-bad combination" in out, out[-6000:]
    assert "-e sglang_allow_known_bad=true" in out
    assert sha(UNIT) == unit
    assert main_pid() == pid
    no_key_anywhere(out, [])


def test_an_nccl_env_change_that_fails_the_gate_is_reverted(double: dict[str, Any]) -> None:
    """Only the NCCL env file changes (a variable the double reads as a pace factor, 0.5 or less: slow_pace):
    the gate fails and the env file comes back as it was, the service restarted on it."""
    env, pid, bad = sha(NCCL_ENV), main_pid(), len(known_bad())
    allowed = ["TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "SGLANG_DOUBLE_PACE"]
    rc, out = site(
        double,
        "env-slow",
        100,
        nccl_env_extra={"SGLANG_DOUBLE_PACE": f"{slow_pace(double) / 100:g}"},
        nccl_env_names_allowed=allowed,
    )
    assert rc != 0, out[-6000:]
    assert "verify layer 8 (rollback): restored the state of " in out, out[-8000:]
    assert (
        "nccl.env" in out.split("verify layer 8 (rollback): restored the state of ", 1)[1].split("\n", 1)[0]
    )
    assert sha(NCCL_ENV) == env
    assert "SGLANG_DOUBLE_PACE" not in lab_exec("cat", NCCL_ENV)
    assert main_pid() not in (pid, "0")
    assert host_results()["status"] == "rolled back"
    assert len(known_bad()) == bad + 1


def test_a_health_failure_in_the_service_stage_restores_the_previous_unit(double: dict[str, Any]) -> None:
    """A unit whose server never answers /health 200 (the double's --double-unhealthy): the service
    stage's wait fails after 30 s, and the previous unit comes back on the previous release, restarted
    and healthy."""
    unit, pid = sha(UNIT), main_pid()
    override = [
        f"{ROOT}/current/venv/bin/python",
        DOUBLE,
        "--double-tokens-per-s",
        "100",
        "--double-unhealthy",
    ]
    rc, out = site(
        double, "unhealthy", 100, sglang_service_exec_override=override, sglang_service_health_timeout=30
    )
    assert rc != 0, out[-6000:]
    assert "service stage failed on" in out, out[-6000:]
    assert "did not answer 200" in out
    assert "restore: restored the state of " in out
    assert sha(UNIT) == unit
    assert current() == double["release"]
    assert main_pid() not in (pid, "0")
    assert "--double-unhealthy" not in lab_exec("systemctl", "cat", "sglang-kimi")
    assert lab_exec("systemctl", "is-active", "sglang-kimi").strip() == "active"
    assert health() == "200"
    no_key_anywhere(out, [])


def test_drift_sends_no_generate(double: dict[str, Any]) -> None:
    """`sglang-deploy drift` (site.yml --check) on a host whose unit drifted reports the drift and sends
    the server no request that generates (the double's request log). It is light on the live server's
    GPUs: verify's layers 2-4 (a kernel, a torch allocation, an all-reduce) say `skipped: check mode`
    (before lab mode, so this lab host shows the decision a GPU host gets), layer 5 writes no key file
    (it asks only what needs no key), and `ps` on this machine, sampled while drift runs, never sees a
    layer script of layers 2-4, the benchmark or a key file's directory in the lab host's processes."""
    init = lab_exec("sh", "-c", "readlink /proc/1/ns/pid").strip()
    pidns = init.removeprefix("pid:[").removesuffix("]")
    heavy = ("verify_cuda.py", "verify_torch.py", "nccl_allreduce.py", "verify_bench.py", "bench_serving")
    seen: dict[str, int] = {"samples": 0, "verify_http.py": 0, **dict.fromkeys(heavy, 0)}
    key_dirs: set[str] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            done = subprocess.run(["ps", "-e", "-ww", "-o", "pidns=,args="], capture_output=True, text=True,
                                  check=False, timeout=60)  # fmt: skip
            seen["samples"] += 1
            lab = [line for line in done.stdout.splitlines() if line.split(None, 1)[:1] == [pidns]]
            for script in seen:
                seen[script] += script != "samples" and any(script in line for line in lab)
            listing = lab_exec("sh", "-c", "ls -d /tmp/sglang-verify-http-* 2>/dev/null || true", check=False)
            key_dirs.update(listing.split())
            stop.wait(0.2)

    lab_exec("cp", UNIT, "/tmp/sglang-kimi.service.e2e")
    lab_exec("sh", "-c", f"echo '# drifted by the e2e test' >> {UNIT} && : > {REQUEST_LOG}")
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        cli = REPO / ".venv" / "bin" / "sglang-deploy"
        run = subprocess.run(
            [str(cli), "drift", "-i", double["inventory"], "-e", extra(double["tmp"], "drift", 100),
             "--artifacts", str(double["tmp"] / "drift-art"), "--progress", "plain"],
            capture_output=True, text=True, check=False, cwd=REPO, timeout=1800,
        )  # fmt: skip
    finally:
        stop.set()
        sampler.join(timeout=70)
        lab_exec("sh", "-c", f"cp /tmp/sglang-kimi.service.e2e {UNIT} && systemctl daemon-reload")
    out = run.stdout + run.stderr
    assert run.returncode == 2, out[-6000:]
    assert "drift on 1 of 1 host(s)" in out, out[-3000:]
    # the layers' own lines are task messages of ok results, which the CLI's progress does not print:
    # read them from ansible-playbook's output in the run's artifacts (runner/artifacts/<id>/stdout)
    runner_dir = double["tmp"] / "drift-art" / "runner"
    played = "\n".join(path.read_text() for path in runner_dir.glob("artifacts/*/stdout"))
    for title in ("2 (CUDA)", "3 (torch)", "4 (NCCL)"):
        line = f"verify layer {title} skipped: check mode (read-only: no kernel, no allocation on the GPUs)"
        assert line in played, played[-6000:]
    assert "/v1/models not asked (check mode: no key on the host)" in played, played[-6000:]
    assert seen["samples"] > 0, seen
    assert {script: seen[script] for script in heavy} == dict.fromkeys(heavy, 0), seen
    assert key_dirs == set(), key_dirs
    print(f"drift: {seen} (lab host {init}): no GPU layer, no benchmark, no key file")
    assert "# drifted by the e2e test" in out
    requests = lab_exec("cat", REQUEST_LOG).splitlines()
    assert "GET /health" in requests, requests  # layer 5 ran, read-only
    assert [r for r in requests if "/generate" in r or "/v1/completions" in r] == [], requests
    no_key_anywhere(out, [double["tmp"] / "drift-art"])


def test_autotune_preset_sweep_switches_when_the_drafter_stops_paying_off(double: dict[str, Any]) -> None:
    """Issue 12's preset part against the double (TEST NUMBERS, no GPU): the release's drafter stops
    paying off (accept length 1, each speculative step 1.6x slower: protocol-double.json), the sweep
    (production, the current configuration, and baseline; one --cuda-graph-max-bs) restarts the server
    per candidate, measures with verify's benchmark layer, switches to baseline at the target
    concurrency, leaves the unit on it and records it in host_vars; a rerun of the service stage reads
    the record and agrees (changed=0)."""
    release_cfg = f"{ROOT}/releases/{double['release']}/protocol-double.json"
    lab_exec("sh", "-c", f'echo \'{{"accept_length": 1, "spec_step_factor": 1.6}}\' > {release_cfg}')
    record = Path(double["inventory"]).parent / "host_vars" / LAB_HOST / "preset.yml"
    sweep = {
        "autotune_preset_presets": ["production", "baseline"],
        "autotune_preset_cuda_graph_max_bs": [128],
        "autotune_preset_levels": [1, 4],
        "autotune_preset_target_concurrency": 4,
        "autotune_preset_num_prompts": 6,
        "autotune_preset_warmup_requests": 1,
        "autotune_preset_output_len": 32,
        "autotune_preset_health_timeout_s": SMALL["verify_http_wait_s"],
    }
    try:
        run = playbook(
            "-i", double["inventory"], "playbooks/autotune.yml", "--tags", "autotune_preset",
            "-e", extra(double["tmp"], "autotune", 100, **sweep),
        )  # fmt: skip
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-6000:]
        assert "TEST NUMBERS" in out
        assert "autotune preset part: 2 candidates (baseline/bs128, production/bs128)" in out, out[-6000:]
        text = record.read_text()
        assert "sglang_preset: baseline" in text, text
        assert "TEST NUMBERS" in text
        unit = lab_exec("systemctl", "cat", "sglang-kimi")
        assert "--speculative-algorithm" not in unit
        assert lab_exec("systemctl", "is-active", "sglang-kimi").strip() == "active"
        report = lab_exec("cat", "/var/lib/sglang-deploy/autotune-preset.md")
        assert "TEST NUMBERS" in report
        no_key_anywhere(out, [record.parent])

        rerun_vars = extra(double["tmp"], "rerun", 100)
        rerun = playbook("-i", double["inventory"], "site.yml", "--tags", "service", "-e", rerun_vars)
        assert rerun.returncode == 0, rerun.stdout[-4000:]
        assert re.search(rf"{LAB_HOST}\s*:\s*ok=\d+\s+changed=0\s", rerun.stdout), rerun.stdout[-3000:]
        assert "--speculative-algorithm" not in lab_exec("systemctl", "cat", "sglang-kimi")
    finally:
        lab_exec("rm", "-f", release_cfg)
        record.unlink(missing_ok=True)


def test_repo_inventory_untouched() -> None:
    assert not (REPO / "inventory" / "host_vars").exists()
