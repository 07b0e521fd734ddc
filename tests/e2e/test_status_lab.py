"""`sglang-deploy status` and verify's router benchmark on a fleet of its own (tests/e2e/fleet_lab.py):
one router container (sglang-lab-status-router, converged by the REAL sglang_router role) and two
replicas (sglang-lab-status-1,2, from the converged replica image: the named TEST DOUBLE
playbooks/lab/sglang_protocol_double.py - SGLang 0.5.9's protocol and metric names, run by the release
python - behind the REAL sglang-kimi unit, with the launch spec's `--enable-metrics`). The fleet's first
`up` records each replica's baseline and Stage 6 registers both in the router. Auth is off in this
fleet; the servers bind 0.0.0.0 (test only: sglang_allow_unauthenticated_bind).

Cases: status --json lists both replicas healthy in the router with release, verdict and metrics, and
writes the scrape-target file; verify.yml's router benchmark prints fleet throughput and says
`ungated`; after `systemctl stop` of one unit status shows it down and exits 7."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import cli, lab_exec, playbook
from fleet_lab import ROUTER_PROM_PORT, Fleet, double_vars, make_fleet, remove_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.fleet_lab]

PREFIX = "sglang-lab-status"
ROUTER = f"{PREFIX}-router"
SERVERS = [f"{PREFIX}-1", f"{PREFIX}-2"]
SMALL = {
    "verify_levels": [1, 4],
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    "verify_http_wait_s": 400,
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, replica_image: str) -> Iterator[Fleet]:
    tmp = Path(tmp_path_factory.mktemp("status-fleet"))
    made = Fleet(PREFIX, ROUTER, SERVERS, f"{PREFIX}-net", tmp)
    try:
        made = make_fleet(
            tmp,
            PREFIX,
            2,
            replica_image,
            SMALL,
            all_vars={"sglang_prometheus_targets_file": str(tmp / "targets.json")},
        )
        yield made
    finally:
        remove_fleet(made)


def status_json(fleet: Fleet) -> tuple[int, dict[str, Any]]:
    proc = cli("status", "-i", str(fleet.inventory), "--json", "--progress", "plain")
    data: dict[str, Any] = json.loads(proc.stdout)
    assert data["rc"] == proc.returncode
    return proc.returncode, data


def test_verify_benchmarks_the_router_ungated(fleet: Fleet) -> None:
    results = fleet.tmp / "router-results.json"
    run = playbook(
        "-i", str(fleet.inventory), "playbooks/verify.yml", "-e", fleet.extra("double", double_vars()),
        "-e", f"verify_router_results_file={results}",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-8000:]
    out = run.stdout
    assert (
        "verify router benchmark ungated: no gate for the router: fleet throughput depends on the number"
        in out
    )
    assert "level | fleet (router) tok/s | sglang-lab-status-1 tok/s | sglang-lab-status-2 tok/s" in out
    assert "router benchmark passed" not in out
    data = json.loads(results.read_text())
    assert data["router"]["status"] == "ungated"
    # sglang_router_url's default (group_vars/all/router.yml): the first router's ansible_host
    assert data["router"]["url"] == f"http://{ROUTER}:30080"
    levels = {lv["level"]: lv for lv in data["router"]["levels"]}
    assert sorted(levels) == [1, 4]
    assert all(lv["ok"] and lv["output_tps"] > 0 for lv in levels.values()), levels
    assert sorted(data["replicas"]) == SERVERS
    for host in SERVERS:
        assert [lv["level"] for lv in data["replicas"][host]] == [1, 4]
    # the router really spread the fleet benchmark over both replicas
    for host in SERVERS:
        log = lab_exec("cat", "/var/lib/sglang/double-requests.log", name=host)
        assert log.count("POST /generate") > 0


def test_status_lists_a_healthy_fleet(fleet: Fleet) -> None:
    rc, data = status_json(fleet)
    assert rc == 0, data
    assert data["healthy"] is True
    assert [r["replica"] for r in data["replicas"]] == SERVERS
    release = lab_exec("readlink", "/opt/sglang/current", name=SERVERS[0]).strip().rsplit("/", 1)[-1]
    for replica in data["replicas"]:
        assert replica["healthy"], replica
        assert replica["routers"] == [{"router": ROUTER, "state": "healthy", "why": ""}]
        assert replica["hosts"][0]["unit"]["ActiveState"] == "active"
        assert replica["release"] == release
        # the fleet's first up recorded the baseline; verify.yml's run (the case above) then passed its gate
        assert replica["verdict"]["status"] in ("baseline recorded", "passed")
        metrics = replica["metrics"]
        assert metrics["sglang:num_running_reqs"]["value"] == 0
        assert metrics["sglang:num_queue_reqs"]["value"] == 0
        assert metrics["sglang:gen_throughput"]["value"] is not None
        assert metrics["sglang:spec_accept_length"]["value"] > 1  # the production preset speculates
    targets = json.loads(Path(data["targets_file"]).read_text())
    ips = fleet.ips
    assert {
        "targets": [f"{ips[SERVERS[0]]}:30000"],
        "labels": {"replica": SERVERS[0], "role": "server"},
    } in targets
    assert {
        "targets": [f"{ips[SERVERS[1]]}:30000"],
        "labels": {"replica": SERVERS[1], "role": "server"},
    } in targets
    assert {
        "targets": [f"{ROUTER}:{ROUTER_PROM_PORT}"],
        "labels": {"router": ROUTER, "role": "router"},
    } in targets
    assert len(targets) == 3
    # read-only: nothing that generates was sent by status
    before = lab_exec("cat", "/var/lib/sglang/double-requests.log", name=SERVERS[0])
    proc = cli("status", "-i", str(fleet.inventory), "--progress", "plain")
    assert proc.returncode == 0
    assert "OK sglang-lab-status-1" in proc.stdout
    assert "OK sglang-lab-status-2" in proc.stdout
    after = lab_exec("cat", "/var/lib/sglang/double-requests.log", name=SERVERS[0])
    new = after[len(before) :].split("\n")
    assert [line for line in new if line and line not in ("GET /health", "GET /metrics")] == []


def test_status_shows_a_stopped_replica_down(fleet: Fleet) -> None:
    lab_exec("systemctl", "stop", "sglang-kimi", name=SERVERS[1])
    time.sleep(6)  # the router's health check (every 2 s, 1 failure) marks it unhealthy
    rc, data = status_json(fleet)
    assert rc == 7, data
    assert data["healthy"] is False
    up, down = data["replicas"]
    assert up["healthy"], up
    assert not down["healthy"]
    assert down["hosts"][0]["unit"]["ActiveState"] in ("inactive", "failed")
    assert any("unit inactive" in p or "unit failed" in p for p in down["problems"]), down
    assert down["routers"][0]["state"] == "unhealthy"
    assert "n/a" not in json.dumps(up["metrics"])
    assert down["metrics"]["sglang:gen_throughput"]["value"] is None
    assert "/metrics not reachable" in down["metrics"]["sglang:gen_throughput"]["why"]
    text = cli("status", "-i", str(fleet.inventory), "--progress", "plain")
    assert text.returncode == 7
    assert "DOWN sglang-lab-status-2" in text.stdout
    assert "1 of 2 replica(s) down or out of the router (sglang-lab-status-2): exit 7" in text.stdout
