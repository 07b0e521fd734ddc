"""A rolling upgrade behind the REAL router (issue 23 item 4), on lab containers of its own: one router
host (sglang-lab-roll-router: the real sglang-router 0.3.2 wheel) and three replicas
(sglang-lab-roll-1..3: the real sglang-kimi unit running the named TEST DOUBLE
tests/e2e/data/sglang_protocol_double.py - SGLang's protocol, no GPU - with the release python), on
one docker network of their own, created in parallel and removed at the end.

In order (one module fixture converges the fleet once; the first `up` with the double registers the
three workers through the readmit step):
  1. min_healthy: a roll whose first batch would leave fewer than sglang_router_min_healthy healthy
     workers is refused before any change (the router and the units untouched);
  2. an upgrade (a changed double flag: every unit restarts) with `up --serial 1` while client
     threads send requests through the router: zero failed requests; each replica is out of the router
     before its unit stops, back only after its verify, and never two at once;
  3. an upgrade that makes the replicas slow: the first batch fails its gate, is rolled back (verify
     layer 8) and stays out of the router; the roll stops; the other replicas are untouched and keep
     serving (the client threads again see no failure).

The router runs with --disable-retries: a request it sent to a stopped replica would fail, so zero
failures comes from the drain, not from the router's retries."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import REPO, cli, lab_exec, playbook, venv_bin

pytestmark = [pytest.mark.e2e, pytest.mark.fleet_lab]

PREFIX = "sglang-lab-roll"
IP_FORMAT = '{{(index .NetworkSettings.Networks "NET").IPAddress}}'
ROUTER_VERSION = "0.3.2"
ROUTER_PORT = 30080
DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
PYTHON = "/opt/sglang/current/venv/bin/python"
SMALL = {  # tests/e2e/test_verify_lab.py's SMALL with one level: each rolled replica runs verify's benchmark
    "verify_levels": [1],
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    "verify_http_wait_s": 400,
}


def double_vars(*flags: str) -> dict[str, Any]:
    """The double behind the real unit (100 tok/s per request unless a flag says otherwise)."""
    return {"sglang_service_exec_override": [PYTHON, DOUBLE, "--double-tokens-per-s", "100", *flags]}


@dataclass
class Fleet:
    router: str
    replicas: list[str]
    network: str
    inventory: Path
    tmp: Path
    router_ip: str = ""
    created_s: float = 0.0

    @property
    def router_base(self) -> str:
        return f"http://{self.router_ip}:{ROUTER_PORT}"

    def worker_url(self, replica: str) -> str:
        return f"http://{replica}:30000"

    def workers(self) -> dict[str, bool]:
        """The router's /workers, read from the controller: url -> is_healthy."""
        with urllib.request.urlopen(f"{self.router_base}/workers", timeout=5) as answer:
            body = json.loads(answer.read())
        return {w["url"]: bool(w["is_healthy"]) for w in body["workers"]}

    def extra(self, name: str, data: dict[str, Any]) -> str:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(data))
        return f"@{path}"


def unit_state(name: str) -> dict[str, str]:
    out = lab_exec(
        "systemctl", "show", "--timestamp=unix", "-p",
        "InvocationID,ExecMainStartTimestamp,InactiveEnterTimestamp,ActiveState",
        "sglang-kimi", name=name,
    )  # fmt: skip
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def stamp(state: dict[str, str], key: str) -> float:
    return float(state.get(key, "").lstrip("@") or 0)


def write_inventory(dest: Path, router: str, replicas: list[str], drain_timeout_s: int = 60) -> Path:
    host = "ansible_connection: community.docker.docker, ansible_python_interpreter: /usr/bin/python3"
    lines = ["all:", "  children:", "    sglang_routers:", "      hosts:"]
    lines += [f"        {router}: {{ansible_host: {router}, {host}}}"]
    lines += ["    sglang_servers:", "      children:", "        lab:", "          hosts:"]
    lines += [f"            {name}: {{ansible_host: {name}, {host}}}" for name in replicas]
    (dest / "group_vars").mkdir(parents=True, exist_ok=True)
    (dest / "fleet.yml").write_text("\n".join(lines) + "\n")
    lab = (REPO / "inventory" / "group_vars" / "lab.yml").read_text()
    # Until the router branch is merged: group_vars/all/router.yml's definitions, here
    router_vars = {
        "sglang_router_port": ROUTER_PORT,
        "sglang_router_prometheus_port": 29000,
        "sglang_router_worker_url": (
            "http://{{ ansible_host | default(inventory_hostname) }}:{{ sglang_service_port }}"
        ),
        "sglang_router_url": (
            "{{ ('http://' ~ (hostvars[groups['sglang_routers'][0]]['ansible_host']"
            " | default(groups['sglang_routers'][0])) ~ ':' ~ sglang_router_port)"
            " if groups['sglang_routers'] | default([]) | length > 0 else '' }}"
        ),
        "sglang_router_min_healthy": 1,
        "sglang_router_drain_timeout_s": drain_timeout_s,
        # the router reaches the replicas over the fleet's network; the unit's stop covers the drain
        "sglang_service_host": "0.0.0.0",
        # the fleet's own docker network, no key (the router engineer's tests cover keys): open on purpose
        "sglang_allow_unauthenticated_bind": True,
        "sglang_service_timeout_stop_sec": drain_timeout_s,
        **SMALL,
    }
    (dest / "group_vars" / "lab.yml").write_text(
        lab + "\n" + "\n".join(f"{k}: {json.dumps(v)}" for k, v in router_vars.items()) + "\n"
    )
    if not (dest / "group_vars" / "all").exists():
        (dest / "group_vars" / "all").symlink_to(REPO / "group_vars" / "all")
    return dest / "fleet.yml"


# --- TEST-ONLY router setup: the lead swaps this ONE function for role sglang_router at merge --------
def start_router(fleet: Fleet) -> None:
    """The real sglang-router 0.3.2 in the router container: its wheel and dependencies installed for
    the container's python 3.11 by pip on the controller (--target; the container has no pip), copied
    in, run as a transient systemd unit (systemd-run --unit sglang-router), /health awaited."""
    site = fleet.tmp / "router-site"
    pip = [str(venv_bin() / "python"), "-m", "pip", "install", "--quiet", "--target", str(site),
           "--python-version", "3.11", "--only-binary=:all:", f"sglang-router=={ROUTER_VERSION}"]  # fmt: skip
    done = subprocess.run(pip, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lab_exec("mkdir", "-p", "/opt/sglang-router", name=fleet.router)
    lab_exec("systemctl", "stop", "sglang-router", name=fleet.router, check=False)  # a rerun's
    copied = subprocess.run(["docker", "cp", str(site), f"{fleet.router}:/opt/sglang-router/site"],
                            capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    lab_exec(
        "systemd-run", "--unit=sglang-router", "--property=Environment=PYTHONPATH=/opt/sglang-router/site",
        "/usr/bin/python3", "-m", "sglang_router.launch_router",
        "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
        "--prometheus-port", "29000", "--policy", "round_robin", "--disable-retries",
        "--health-check-interval-secs", "2", "--log-level", "warn",
        name=fleet.router,
    )  # fmt: skip
    for _ in range(60):
        try:
            with urllib.request.urlopen(f"{fleet.router_base}/health", timeout=3) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    raise AssertionError(
        "sglang-router did not answer /health: "
        + lab_exec(
            "journalctl", "-u", "sglang-router", "-n", "30", "--no-pager", name=fleet.router, check=False
        )
    )


def make_fleet(tmp: Path, replicas: int = 3, prefix: str = PREFIX) -> Fleet:
    """The containers (in parallel) on a network of their own, the router, the converged replicas with
    the double started and registered in the router (the first `up` with the double readmits them)."""
    names = [f"{prefix}-{i}" for i in range(1, replicas + 1)]
    fleet = Fleet(f"{prefix}-router", names, f"{prefix}-net", Path(), tmp)
    started = time.monotonic()
    subprocess.run(["docker", "network", "create", fleet.network], capture_output=True, check=False)
    with ThreadPoolExecutor(replicas + 1) as pool:
        made = list(pool.map(lambda n: cli("lab", "create", "--name", n), [fleet.router, *names]))
    assert all(proc.returncode == 0 for proc in made), [proc.stderr for proc in made]
    for name in [fleet.router, *names]:
        subprocess.run(
            ["docker", "network", "connect", fleet.network, name], capture_output=True, check=False
        )
    fleet.router_ip = subprocess.run(
        ["docker", "inspect", "-f", IP_FORMAT.replace("NET", fleet.network), fleet.router],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    fleet.inventory = write_inventory(tmp / "inventory", fleet.router, names)
    start_router(fleet)
    # lab mode without the override installs the stack and the unit, starts nothing: no drain
    converge = playbook("-i", str(fleet.inventory), "site.yml", timeout=5400)  # 3 stacks on a loaded machine
    assert converge.returncode == 0, converge.stdout[-6000:]
    setup = playbook("-i", str(fleet.inventory), "tests/e2e/data/roll_double.yml")
    assert setup.returncode == 0, setup.stdout[-6000:]
    first = cli("up", "-i", str(fleet.inventory), "-e", fleet.extra("double", double_vars()),
                "--artifacts", str(tmp / "art-first"), "--progress", "plain", timeout=2400)  # fmt: skip
    assert first.returncode == 0, first.stdout[-6000:]
    assert fleet.workers() == {fleet.worker_url(n): True for n in names}, fleet.workers()
    fleet.created_s = time.monotonic() - started
    return fleet


def remove_fleet(fleet: Fleet) -> None:
    for name in [fleet.router, *fleet.replicas]:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
    subprocess.run(["docker", "network", "rm", fleet.network], capture_output=True, check=False)


@dataclass
class Traffic:
    """Client threads sending /generate through the router, and a poller of the router's /workers,
    while a roll runs."""

    fleet: Fleet
    clients: int = 2
    sent: int = 0
    failed: list[str] = field(default_factory=list)
    polls: list[tuple[float, dict[str, bool]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _client(self) -> None:
        body = json.dumps({"text": "def roll(", "sampling_params": {"max_new_tokens": 16}}).encode()
        while not self._stop.is_set():
            request = urllib.request.Request(
                f"{self.fleet.router_base}/generate", data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    ok = answer.status == 200 and "meta_info" in json.loads(answer.read())
                    error = "" if ok else f"status {answer.status}"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.sent += 1
                if error:
                    self.failed.append(f"{time.time():.1f} {error}")

    def _poll(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                self.polls.append((time.time(), self.fleet.workers()))
            self._stop.wait(0.5)

    def __enter__(self) -> Traffic:
        self._threads = [threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)]
        self._threads.append(threading.Thread(target=self._poll, daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)

    def out_windows(self, url: str) -> list[tuple[float, float, float]]:
        """Each time ``url`` was out of the router (not listed, or listed unhealthy): (last poll that
        listed it healthy, first poll that did not, first poll that listed it healthy again; inf when
        it never came back)."""
        windows: list[tuple[float, float, float]] = []
        last_in = self.polls[0][0] if self.polls else 0.0
        gone: float | None = None
        for when, workers in self.polls:
            present = workers.get(url, False)
            if present and gone is not None:
                windows.append((last_in, gone, when))
                gone = None
            if present:
                last_in = when
            elif gone is None:
                gone = when
        if gone is not None:
            windows.append((last_in, gone, float("inf")))
        return windows


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
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = Path(tmp_path_factory.mktemp("roll"))
    made: Fleet | None = None
    try:
        made = make_fleet(tmp)
        print(f"fleet ready in {made.created_s:.0f}s")
        yield made
    finally:
        if made is None:
            remove_fleet(
                Fleet(f"{PREFIX}-router", [f"{PREFIX}-{i}" for i in (1, 2, 3)], f"{PREFIX}-net", tmp, tmp)
            )
        else:
            remove_fleet(made)


def test_min_healthy_refuses_a_batch_before_any_change(fleet: Fleet) -> None:
    before = {name: unit_state(name) for name in fleet.replicas}
    data = {**double_vars("--double-ttft-ms", "21"), "sglang_router_min_healthy": 3}
    proc, traffic, _ = roll(fleet, "min-healthy", data)
    out = proc.stdout + proc.stderr + batch_failures(fleet, "min-healthy")
    assert proc.returncode != 0, out[-6000:]
    assert (
        "removing 1 healthy worker(s) (http://sglang-lab-roll-1:30000) from the router leaves 2 of 3 healthy"
        in out
    )
    assert "sglang_router_min_healthy=3" in out
    assert "ROLL STOPPED" in out
    assert fleet.workers() == {fleet.worker_url(n): True for n in fleet.replicas}
    assert {name: unit_state(name)["InvocationID"] for name in fleet.replicas} == {
        name: state["InvocationID"] for name, state in before.items()
    }
    assert traffic.failed == []


def test_a_rolling_upgrade_drops_no_request(fleet: Fleet) -> None:
    before = {name: unit_state(name) for name in fleet.replicas}
    proc, traffic, _ = roll(fleet, "upgrade", double_vars("--double-ttft-ms", "22"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    assert traffic.sent > 20, traffic.sent
    assert traffic.failed == [], traffic.failed[:20]
    assert fleet.workers() == {fleet.worker_url(n): True for n in fleet.replicas}
    # never two replicas out at once (--serial 1)
    assert all(sum(not ok for ok in w.values()) + (3 - len(w)) <= 1 for _, w in traffic.polls), traffic.polls
    for name in fleet.replicas:
        after = unit_state(name)
        assert after["InvocationID"] != before[name]["InvocationID"], name
        stopped, started = stamp(after, "InactiveEnterTimestamp"), stamp(after, "ExecMainStartTimestamp")
        # the one time it was out that holds its restart: removed before the stop, back after verify
        [(left, gone, back)] = [
            w for w in traffic.out_windows(fleet.worker_url(name)) if w[0] < started < w[2]
        ]
        assert gone <= stopped < started < back, (name, gone, stopped, started, back)
        verified = float(
            lab_exec("stat", "-c", "%Y", "/var/lib/sglang-deploy/verify-results.json", name=name)
        )
        assert started < verified <= back, (name, started, verified, back)
        print(f"{name}: out of the router {back - left:.1f}s (stop {stopped - gone:.1f}s after removal)")


def test_a_failed_gate_stays_out_is_rolled_back_and_stops_the_roll(fleet: Fleet) -> None:
    first, *rest = fleet.replicas
    before = {name: unit_state(name) for name in fleet.replicas}
    proc, traffic, _ = roll(fleet, "slow", double_vars("--double-tokens-per-s", "50"))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-8000:]
    assert f"ROLL STOPPED: 1 of 1 host(s) of batch 1 failed ({first})" in out, out[-8000:]
    assert "verify layer 8 (rollback): restored the state of " in out, out[-8000:]
    workers = fleet.workers()
    assert fleet.worker_url(first) not in workers, workers
    assert workers == {fleet.worker_url(n): True for n in rest}
    for name in rest:  # later batches untouched
        assert unit_state(name)["InvocationID"] == before[name]["InvocationID"], name
    # the rollback restarted the first replica on its last good unit (the 100 tok/s one)
    assert lab_exec("systemctl", "is-active", "sglang-kimi", name=first).strip() == "active"
    unit = lab_exec("systemctl", "cat", "sglang-kimi", name=first)
    assert "--double-tokens-per-s 50" not in unit, unit
    assert "--double-ttft-ms 22" in unit, unit
    assert traffic.failed == [], traffic.failed[:20]
