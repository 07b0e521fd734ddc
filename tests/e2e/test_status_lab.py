"""`sglang-deploy status` and verify's router benchmark on a fleet of its own: one router container and
two replicas (sglang-lab-status-{router,1,2}, created in parallel, removed at the end).

The replicas are converged by site.yml with the named TEST DOUBLE sglang-protocol-double
(tests/e2e/data/sglang_protocol_double.py: SGLang's own protocol models, run by the release python)
behind the REAL sglang-kimi unit (sglang_service_exec_override; the service stage of a lab host with
the override starts it and waits for /health) and `--enable-metrics` (the double then serves /metrics
with SGLang 0.5.9's metric names). The router is the REAL sglang-router 0.3.2 (PyPI wheel, pip from
this machine's configured index), started with systemd-run in the router container by ONE fixture
function (`real_router`) until the sglang_router role is merged; the replicas are added through its
worker API (POST /workers). Auth is off in this fleet (the router forwards without a key), the servers
bind 0.0.0.0 (test only: sglang_allow_unauthenticated_bind).

Cases: status --json lists both replicas healthy in the router with release, verdict and metrics, and
writes the scrape-target file; verify.yml's router benchmark prints fleet throughput and says
`ungated`; after `systemctl stop` of one unit status shows it down and exits 7.

Measured 2026-12-01 on the shared 2-CPU machine at load average 22-30 (its steps run by hand on these
containers after a first whole-file run was stopped by its 25-min wrapper during the stack install):
site.yml on both replicas 30 min, verify.yml 5 min (fleet C=1 96.2 tok/s beside 93.4 / 93.3 per
replica, C=4 378.1 beside 363.8 / 362.2), each status run about 5 min (a task took 40-130 s there).
On a quiet machine the file needs about 10 min, most of it the two converges and the double's start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import REPO, cli, lab_exec, playbook

pytestmark = [pytest.mark.e2e, pytest.mark.fleet_lab]

ROUTER = "sglang-lab-status-router"
SERVERS = ["sglang-lab-status-1", "sglang-lab-status-2"]
DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
ROUTER_VENV = "/opt/sglang-router-e2e"
ROUTER_PORT = 30080
ROUTER_PROM_PORT = 29000
SMALL = {
    "verify_levels": [1, 4],
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    "verify_http_wait_s": 400,
}


def ip_of(name: str) -> str:
    proc = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


def http(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.read().decode()


def real_router(dest: Path) -> str:
    """THE router fixture (until the sglang_router role is merged): the real sglang-router 0.3.2 from
    the configured package index (pip download on the controller, installed into a venv directory in
    the router container: the image has no pip), started with systemd-run. Its base URL."""
    wheels, site = dest / "wheels", dest / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "download", "-d", str(wheels), "sglang-router==0.3.2"], check=True, timeout=600)
    install = ["install", "--no-index", "--find-links", str(wheels), "--target", str(site)]
    subprocess.run([*pip, *install, "sglang-router==0.3.2"], check=True, timeout=600)
    lab_exec("python3", "-m", "venv", "--without-pip", ROUTER_VENV, name=ROUTER)
    packages = lab_exec(
        f"{ROUTER_VENV}/bin/python",
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        name=ROUTER,
    ).strip()
    subprocess.run(["docker", "cp", f"{site}/.", f"{ROUTER}:{packages}/"], check=True, timeout=300)
    lab_exec(
        "systemd-run", "--unit=sglang-router-e2e", "--", f"{ROUTER_VENV}/bin/python", "-m",
        "sglang_router.launch_router", "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
        "--prometheus-host", "0.0.0.0", "--prometheus-port", str(ROUTER_PROM_PORT), "--policy", "round_robin",
        "--health-check-interval-secs", "2", "--health-failure-threshold", "1", name=ROUTER,
    )  # fmt: skip
    url = f"http://{ip_of(ROUTER)}:{ROUTER_PORT}"
    for _ in range(60):
        try:
            if http("GET", url + "/health")[0] == 200:
                return url
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(
        lab_exec("journalctl", "-u", "sglang-router-e2e", "--no-pager", name=ROUTER, check=False)
    )


def write_inventory(dest: Path, ips: dict[str, str]) -> Path:
    lines = ["all:", "  vars:", f"    sglang_prometheus_targets_file: {dest / 'targets.json'}", "  children:"]
    lines += ["    sglang_routers:", "      hosts:", f"        {ROUTER}:"]
    lines += [
        "          ansible_connection: community.docker.docker",
        f"          ansible_host: {ROUTER}",
        "          ansible_python_interpreter: /usr/bin/python3",
        f"          sglang_router_port: {ROUTER_PORT}",
        f"          sglang_router_prometheus_port: {ROUTER_PROM_PORT}",
    ]
    lines += ["    sglang_servers:", "      children:", "        lab:", "          hosts:"]
    for host in SERVERS:
        lines += [
            f"            {host}:",
            "              ansible_connection: community.docker.docker",
            f"              ansible_host: {host}",
            "              ansible_python_interpreter: /usr/bin/python3",
            f"              sglang_router_worker_url: http://{ips[host]}:30000",
        ]
    (dest / "group_vars").mkdir(parents=True)
    (dest / "fleet.yml").write_text("\n".join(lines) + "\n")
    lab = (REPO / "inventory" / "group_vars" / "lab.yml").read_text()
    # test only: the router reaches the servers on their address, without a key
    lab += "sglang_service_host: 0.0.0.0\nsglang_allow_unauthenticated_bind: true\n"
    (dest / "group_vars" / "lab.yml").write_text(lab)
    (dest / "group_vars" / "all").symlink_to(REPO / "group_vars" / "all")
    return dest / "fleet.yml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = Path(tmp_path_factory.mktemp("status-fleet"))
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(3) as pool:
            made = list(pool.map(lambda name: cli("lab", "create", "--name", name), [ROUTER, *SERVERS]))
        assert all(proc.returncode == 0 for proc in made), [proc.stderr for proc in made]
        ips = {name: ip_of(name) for name in [ROUTER, *SERVERS]}
        router = real_router(tmp / "router")
        inventory = write_inventory(tmp / "inventory", ips)
        extra = tmp / "extra.json"
        extra.write_text(
            json.dumps(
                {
                    "sglang_service_exec_override": [
                        "/opt/sglang/current/venv/bin/python",
                        DOUBLE,
                        "--double-tokens-per-s",
                        "100",
                    ],
                    "sglang_extra_args": ["--enable-metrics"],
                    "sglang_router_url": router,
                    **SMALL,
                }
            )
        )
        for host in SERVERS:  # the double where the override names it (the release python runs it)
            lab_exec("mkdir", "-p", str(Path(DOUBLE).parent), name=host)
            subprocess.run(
                ["docker", "cp", str(REPO / "tests/e2e/data/sglang_protocol_double.py"), f"{host}:{DOUBLE}"],
                check=True,
            )
        # the whole stack, the double started behind the unit (lab mode + override) and awaited; no
        # benchmark yet (the lab tokenizer needs the release's python, made next)
        converge = playbook(
            "-i", str(inventory), "site.yml", "-e", f"@{extra}", "-e", "verify_benchmark=never"
        )
        assert converge.returncode == 0, converge.stdout[-6000:]
        for host in SERVERS:
            for src in ("tests/e2e/data/make_lab_tokenizer.py", "roles/verify/files/prompts/coding.jsonl"):
                subprocess.run(["docker", "cp", str(REPO / src), f"{host}:/tmp/"], check=True)
            lab_exec(
                "/opt/sglang/current/venv/bin/python", "/tmp/make_lab_tokenizer.py", "/opt/models/lab-target",
                "/tmp/coding.jsonl", name=host,
            )  # fmt: skip
            status, body = http("POST", router + "/workers", {"url": f"http://{ips[host]}:30000"})
            assert status == 202, body
        print(f"status fleet ready in {time.monotonic() - started:.1f}s")
        yield {"tmp": tmp, "inventory": inventory, "extra": extra, "router": router, "ips": ips}
    finally:
        for name in [ROUTER, *SERVERS]:
            subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)


def status_json(fleet: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    proc = cli("status", "-i", str(fleet["inventory"]), "--json", "--progress", "plain")
    data: dict[str, Any] = json.loads(proc.stdout)
    assert data["rc"] == proc.returncode
    return proc.returncode, data


def test_verify_benchmarks_the_router_ungated(fleet: dict[str, Any]) -> None:
    results = fleet["tmp"] / "router-results.json"
    run = playbook(
        "-i", str(fleet["inventory"]), "playbooks/verify.yml", "-e", f"@{fleet['extra']}",
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
    assert data["router"]["url"] == fleet["router"]
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


def test_status_lists_a_healthy_fleet(fleet: dict[str, Any]) -> None:
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
        assert replica["verdict"]["status"] == "baseline recorded"
        metrics = replica["metrics"]
        assert metrics["sglang:num_running_reqs"]["value"] == 0
        assert metrics["sglang:num_queue_reqs"]["value"] == 0
        assert metrics["sglang:gen_throughput"]["value"] is not None
        assert metrics["sglang:spec_accept_length"]["value"] > 1  # the production preset speculates
    targets = json.loads(Path(data["targets_file"]).read_text())
    ips = fleet["ips"]
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
    proc = cli("status", "-i", str(fleet["inventory"]), "--progress", "plain")
    assert proc.returncode == 0
    assert "OK sglang-lab-status-1" in proc.stdout
    assert "OK sglang-lab-status-2" in proc.stdout
    after = lab_exec("cat", "/var/lib/sglang/double-requests.log", name=SERVERS[0])
    new = after[len(before) :].split("\n")
    assert [line for line in new if line and line not in ("GET /health", "GET /metrics")] == []


def test_status_shows_a_stopped_replica_down(fleet: dict[str, Any]) -> None:
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
    text = cli("status", "-i", str(fleet["inventory"]), "--progress", "plain")
    assert text.returncode == 7
    assert "DOWN sglang-lab-status-2" in text.stdout
    assert "1 of 2 replica(s) down or out of the router (sglang-lab-status-2): exit 7" in text.stdout
