"""A rolling upgrade behind the REAL router (issue 23 item 4), on a fleet of its own
(tests/e2e/fleet_lab.py): one router host (sglang-lab-roll-router, converged by the sglang_router
role: sglang-router 0.3.2 in its release venv under sglang-router.service) and three replicas
(sglang-lab-roll-1..3, from the converged replica image: the real sglang-kimi unit running the named
TEST DOUBLE playbooks/lab/sglang_protocol_double.py - SGLang's protocol, no GPU), on one docker
network of their own, removed at the end.

In order (one module fixture makes the fleet; its first `up` with the double records each replica's
baseline and Stage 6 registers the three verified workers):
  1. min_healthy: a roll whose first batch would leave fewer than sglang_router_min_healthy healthy
     workers is refused before any change (the router and the units untouched);
  2. an upgrade (a changed double flag: every unit restarts) with `up --serial 1` while client
     threads send requests through the router: zero failed requests; each replica is out of the router
     before its unit stops, back only after its verify, and never two at once;
  3. an upgrade that makes the replicas slow: the first batch fails its gate, is rolled back (verify
     layer 8) and stays out of the router; the roll stops; the other replicas are untouched and keep
     serving (the client threads again see no failure).

The router runs with --disable-retries (sglang_router_disable_retries): a request it sent to a stopped
replica would fail, so zero failures comes from the drain, not from the router's retries."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import cli, lab_exec
from fleet_lab import ADMIN_AUTH, Fleet, double_vars, make_fleet, remove_fleet

from sglang_deploy.lab_fleet import Load

pytestmark = [pytest.mark.e2e, pytest.mark.fleet_lab]

PREFIX = "sglang-lab-roll"
SMALL = {  # tests/e2e/test_verify_lab.py's SMALL with one level: each rolled replica runs verify's benchmark
    "verify_levels": [1],
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    "verify_http_wait_s": 400,
}
DRAIN_TIMEOUT_S = 60
SERVER_VARS = {
    **SMALL,
    "sglang_router_drain_timeout_s": DRAIN_TIMEOUT_S,
    "sglang_service_timeout_stop_sec": DRAIN_TIMEOUT_S,
}
# zero failed requests must come from the drain, not from the router sending a failed request again
ROUTER_VARS = {"sglang_router_disable_retries": True}


def unit_state(name: str) -> dict[str, str]:
    out = lab_exec(
        "systemctl", "show", "--timestamp=unix", "-p",
        "InvocationID,ExecMainStartTimestamp,InactiveEnterTimestamp,ActiveState",
        "sglang-kimi", name=name,
    )  # fmt: skip
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def stamp(state: dict[str, str], key: str) -> float:
    return float(state.get(key, "").lstrip("@") or 0)


# Client threads through the router and a poller of its /workers while a roll runs: the fleet demo's
# live load (one implementation, src/sglang_deploy/lab_fleet.py)
Traffic = Load


def roll(
    fleet: Fleet, name: str, data: dict[str, Any], *args: str
) -> tuple[subprocess.CompletedProcess[str], Traffic, float]:
    """`sglang-deploy up --serial 1` with client traffic through the router; (proc, traffic, wall s)."""
    extra = fleet.extra(name, data)
    with Traffic(fleet) as traffic:
        time.sleep(2)  # the clients run before the roll starts
        started = time.monotonic()
        proc = cli("up", "-i", str(fleet.inventory), "-e", extra, "--serial", "1", "--artifacts",
                   str(fleet.tmp / f"art-{name}"), "--progress", "plain", *args, timeout=3600)  # fmt: skip
        wall = time.monotonic() - started
        time.sleep(2)
    print(
        f"roll {name}: rc={proc.returncode} {wall:.0f}s, {traffic.sent} requests, "
        f"{len(traffic.failed)} failed"
    )
    return proc, traffic, wall


def batch_failures(fleet: Fleet, name: str) -> str:
    """The failed tasks' messages of every batch run of a roll (summary.json of each run)."""
    texts = []
    for summary in (fleet.tmp / f"art-{name}" / "runs").glob("*/summary.json"):
        texts += [json.dumps(task) for task in json.loads(summary.read_text()).get("failed_tasks", [])]
    return "\n".join(texts)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, replica_image: str) -> Iterator[Fleet]:
    tmp = Path(tmp_path_factory.mktemp("roll"))
    made = Fleet(PREFIX, f"{PREFIX}-router", [f"{PREFIX}-{i}" for i in (1, 2, 3)], f"{PREFIX}-net", tmp)
    try:
        made = make_fleet(tmp, PREFIX, 3, replica_image, SERVER_VARS, router_vars=ROUTER_VARS)
        yield made
    finally:
        remove_fleet(made)


def test_min_healthy_refuses_a_batch_before_any_change(fleet: Fleet) -> None:
    before = {name: unit_state(name) for name in fleet.replicas}
    data = {**double_vars("--double-ttft-ms", "21"), "sglang_router_min_healthy": 3}
    proc, traffic, _wall = roll(fleet, "min-healthy", data)
    out = proc.stdout + proc.stderr + batch_failures(fleet, "min-healthy")
    assert proc.returncode != 0, out[-6000:]
    first = fleet.worker_url(fleet.replicas[0])
    assert f"removing 1 healthy worker(s) ({first}) from the router leaves 2 of 3 healthy" in out, out[-6000:]
    assert "sglang_router_min_healthy=3" in out
    assert "ROLL STOPPED" in out
    assert fleet.workers() == {fleet.worker_url(n): True for n in fleet.replicas}
    assert {name: unit_state(name)["InvocationID"] for name in fleet.replicas} == {
        name: state["InvocationID"] for name, state in before.items()
    }
    assert traffic.failed == []


def test_a_rolling_upgrade_drops_no_request(fleet: Fleet) -> None:
    before = {name: unit_state(name) for name in fleet.replicas}
    proc, traffic, _wall = roll(fleet, "upgrade", double_vars("--double-ttft-ms", "22"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert traffic.sent > 20, traffic.sent
    assert traffic.failed == [], traffic.failed[:20]
    assert fleet.workers() == {fleet.worker_url(n): True for n in fleet.replicas}
    # never two replicas out at once (--serial 1)
    assert all(sum(not ok for ok in w.values()) + (3 - len(w)) <= 1 for _when, w in traffic.polls), (
        traffic.polls
    )
    for name in fleet.replicas:
        after = unit_state(name)
        assert after["InvocationID"] != before[name]["InvocationID"], name
        stopped, started = stamp(after, "InactiveEnterTimestamp"), stamp(after, "ExecMainStartTimestamp")
        # the one time it was out that holds its restart: removed before the stop, back after verify
        [(left, gone, back)] = [
            w for w in traffic.out_windows(fleet.worker_url(name)) if w[0] < started < w[2]
        ]
        # systemd stamps in whole seconds (--timestamp=unix): a quick restart stops and starts in one
        assert gone <= stopped <= started < back, (name, gone, stopped, started, back)
        verified = float(
            lab_exec("stat", "-c", "%Y", "/var/lib/sglang-deploy/verify-results.json", name=name)
        )
        assert started < verified <= back, (name, started, verified, back)
        print(f"{name}: out of the router {back - left:.1f}s (stop {stopped - gone:.1f}s after removal)")


def test_a_hand_added_worker_is_drift_and_removed_by_up(fleet: Fleet) -> None:
    """A worker the inventory does not name (a second double on the third replica, port 30001, started
    by hand and POSTed to the router by hand): `drift` reports it (exit 2, nothing changed), `up`
    removes it and leaves the three inventory replicas."""
    host = fleet.replicas[-1]
    extra = f"http://{fleet.ips[host]}:30001"
    lab_exec(
        "systemd-run", "--unit=sglang-hand-added", "--", "/opt/sglang/current/venv/bin/python",
        "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py", "--model-path",
        "/opt/models/lab-target", "--host", "0.0.0.0", "--port", "30001", name=host,
    )  # fmt: skip
    try:
        request = urllib.request.Request(
            f"{fleet.router_base}/workers", data=json.dumps({"url": extra}).encode(),
            headers={"Content-Type": "application/json", **ADMIN_AUTH}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 202
        expected = {**{fleet.worker_url(n): True for n in fleet.replicas}, extra: True}
        assert fleet.wait_workers(expected, timeout=120) == expected, fleet.workers()
        now = fleet.extra("double-now", double_vars("--double-ttft-ms", "22"))  # the upgrade's units
        drift = cli("drift", "-i", str(fleet.inventory), "-e", now, "--artifacts",
                    str(fleet.tmp / "art-drift"), "--progress", "plain", timeout=1800)  # fmt: skip
        assert drift.returncode == 2, drift.stdout[-6000:]
        router_lines = [line for line in drift.stdout.splitlines() if line.startswith("ROUTER DRIFT")]
        assert any(extra in line for line in router_lines), drift.stdout[-6000:]
        assert fleet.workers() == expected  # drift only read
        up = cli("up", "-i", str(fleet.inventory), "-e", now, "--artifacts", str(fleet.tmp / "art-prune"),
                 "--progress", "plain", timeout=2400)  # fmt: skip
        assert up.returncode == 0, up.stdout[-6000:]
        assert fleet.workers() == {fleet.worker_url(n): True for n in fleet.replicas}
    finally:
        lab_exec("systemctl", "stop", "sglang-hand-added", name=host, check=False)


def test_a_failed_gate_stays_out_is_rolled_back_and_stops_the_roll(fleet: Fleet) -> None:
    first, *rest = fleet.replicas
    before = {name: unit_state(name) for name in fleet.replicas}
    unit_before = lab_exec("systemctl", "cat", "sglang-kimi", name=first)
    proc, traffic, _wall = roll(fleet, "slow", double_vars("--double-tokens-per-s", "50"))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-8000:]
    assert f"ROLL STOPPED: 1 of 1 host(s) of batch 1 failed ({first})" in out, out[-8000:]
    # verify's failure names the rollback (layer 8 restored the last good state, then gated it again)
    assert "verify failed on release " in out, out[-8000:]
    assert " and rolled back to " in out, out[-8000:]
    workers = fleet.workers()
    assert fleet.worker_url(first) not in workers, workers
    assert workers == {fleet.worker_url(n): True for n in rest}
    for name in rest:  # later batches untouched
        assert unit_state(name)["InvocationID"] == before[name]["InvocationID"], name
    # the rollback restarted the first replica on its last good unit (the 100 tok/s one, as before)
    assert lab_exec("systemctl", "is-active", "sglang-kimi", name=first).strip() == "active"
    unit = lab_exec("systemctl", "cat", "sglang-kimi", name=first)
    assert "--double-tokens-per-s 50" not in unit, unit
    assert unit == unit_before
    assert traffic.failed == [], traffic.failed[:20]
