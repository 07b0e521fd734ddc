"""A fleet on the lab: one router container and replica containers on a docker network of their own,
the inventory that names them, and a live load through the router. One implementation for
`sglang-deploy lab demo --fleet` (commands_demo_fleet.py) and the fleet e2e (tests/e2e/fleet_lab.py,
test_roll_lab.py, test_status_lab.py).

The router host runs SGLang's own router, sglang-router, installed and started by the REAL
sglang_router role; each replica runs the real sglang-kimi unit whose launcher is the named TEST
DOUBLE sglang-protocol-double (playbooks/lab/sglang_protocol_double.py: SGLang's protocol, simulated
tokens, no GPU - never SGLang). The replicas are registered by their IPs on the fleet's network (each
server's sglang_router_worker_url), which the controller reaches too. The router demands its client
key; its /workers takes only the admin key (reached from the router container's loopback by the roll
and the role, from the controller only as an observer). It is exposed to the fleet's network the way
an inventory does it (0.0.0.0 and IPAddressAllow of the fleet's subnet); the replicas run without a
key, bound to 0.0.0.0 (lab only: sglang_allow_unauthenticated_bind)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import yaml
from docker.errors import NotFound

from .lab import DEFAULT_IMAGE, Lab, LabError

DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
PYTHON = "/opt/sglang/current/venv/bin/python"
ROUTER_PORT = 30080
ROUTER_PROM_PORT = 29000
SERVER_PORT = 30000
HEALTH_CHECK_S = 2  # the router's health check interval: a stopped replica is seen within seconds


def double_vars(*flags: str, description: str = "") -> dict[str, Any]:
    """The double behind the real unit (100 tok/s per request unless a flag says otherwise); with
    ``description``, the unit's Description= (sglang_service_description)."""
    data: dict[str, Any] = {
        "sglang_service_exec_override": [PYTHON, DOUBLE, "--double-tokens-per-s", "100", *flags]
    }
    if description:
        data["sglang_service_description"] = description
    return data


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Fleet:
    """The containers of a fleet: ``router``, ``replicas`` (``<prefix>-1..N``) on ``network``."""

    prefix: str
    router: str
    replicas: list[str]
    network: str
    tmp: Path
    router_key: str = ""
    admin_key: str = ""
    inventory: Path = Path()
    ips: dict[str, str] = field(default_factory=dict)
    subnet: str = ""
    created_s: float = 0.0

    @classmethod
    def named(cls, prefix: str, replicas: int, tmp: Path, router_key: str = "", admin_key: str = "") -> Fleet:
        names = [f"{prefix}-{i}" for i in range(1, replicas + 1)]
        return cls(prefix, f"{prefix}-router", names, f"{prefix}-net", tmp, router_key, admin_key)

    @property
    def router_base(self) -> str:
        return f"http://{self.ips[self.router]}:{ROUTER_PORT}"

    def worker_url(self, replica: str) -> str:
        return f"http://{self.ips[replica]}:{SERVER_PORT}"

    def expected_workers(self) -> dict[str, bool]:
        """/workers of a fleet whose every replica is in the router and healthy."""
        return {self.worker_url(n): True for n in self.replicas}

    def workers(self) -> dict[str, bool]:
        """The router's /workers, read from the controller with the admin key: url -> is_healthy."""
        request = urllib.request.Request(f"{self.router_base}/workers", headers=bearer(self.admin_key))
        with urllib.request.urlopen(request, timeout=5) as answer:
            body = json.loads(answer.read())
        return {w["url"]: bool(w["is_healthy"]) for w in body["workers"]}

    def wait_workers(self, expected: dict[str, bool], timeout: float = 60) -> dict[str, bool]:
        """The router's /workers once it equals ``expected`` (health checks run every 2 s), else the last
        seen ({} when the router did not answer)."""
        deadline, seen = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                seen = self.workers()
            if seen == expected:
                break
            time.sleep(1)
        return seen

    def extra(self, name: str, data: dict[str, Any]) -> str:
        """``data`` as an extra-vars file of the fleet's folder: ``@<path>`` for -e."""
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(data))
        return f"@{path}"


def docker_host(name: str, **host_vars: Any) -> dict[str, Any]:
    """An inventory entry for a lab container that Ansible reaches over docker (``host_vars`` added)."""
    return {
        "ansible_host": name,
        "ansible_connection": "community.docker.docker",
        "ansible_python_interpreter": "/usr/bin/python3",
        **host_vars,
    }


def router_vars(fleet: Fleet, **more: Any) -> dict[str, Any]:
    """The router host's variables: the REAL role with its client and admin keys, exposed to the
    fleet's network, a fast health check (a stopped replica is seen within seconds); ``more`` on top."""
    return {
        # as the lab group's hosts: root already, and sudo would drop the container's CA bundle variables
        "ansible_become": False,
        "sglang_router_policy": "round_robin",
        "sglang_router_api_key": fleet.router_key,
        "sglang_router_admin_api_key": fleet.admin_key,
        "sglang_router_host": "0.0.0.0",
        "sglang_router_prometheus_host": "0.0.0.0",
        "sglang_router_ip_address_allow": ["localhost", fleet.subnet],
        "sglang_router_health_check_interval_secs": HEALTH_CHECK_S,
        "sglang_router_health_failure_threshold": 1,
        "sglang_router_health_success_threshold": 1,
        **more,
    }


def inventory_data(
    fleet: Fleet, lab_settings: dict[str, Any], server_vars: dict[str, Any],
    all_vars: dict[str, Any] | None = None, router_more: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """The fleet's inventory (routers and the lab group of servers, each replica with its worker URL)
    and its group_vars/lab.yml (``lab_settings``: inventory/group_vars/lab.yml's; the servers bound to
    0.0.0.0 without a key, ``server_vars`` on top)."""
    replicas = {n: docker_host(n, sglang_router_worker_url=fleet.worker_url(n)) for n in fleet.replicas}
    router = docker_host(fleet.router, **router_vars(fleet, **(router_more or {})))
    children = {
        "sglang_routers": {"hosts": {fleet.router: router}},
        "sglang_servers": {"children": {"lab": {"hosts": replicas}}},
    }
    top = ({"vars": all_vars} if all_vars else {}) | {"children": children}
    group = {
        **lab_settings,
        # the router reaches the replicas over the fleet's network, without a key: open on purpose (lab)
        "sglang_service_host": "0.0.0.0",
        "sglang_allow_unauthenticated_bind": True,
        **server_vars,
    }
    return {"all": top}, group


def write_inventory(
    fleet: Fleet, repo: Path, server_vars: dict[str, Any],
    all_vars: dict[str, Any] | None = None, router_more: dict[str, Any] | None = None,
) -> Path:  # fmt: skip
    """The fleet's inventory under ``fleet.tmp/inventory`` (fleet.yml, group_vars/lab.yml written by the
    YAML library, group_vars/all linked to the checkout's); sets and returns fleet.inventory."""
    dest = fleet.tmp / "inventory"
    (dest / "group_vars").mkdir(parents=True, exist_ok=True)
    settings = yaml.safe_load((repo / "inventory" / "group_vars" / "lab.yml").read_text())
    top, group = inventory_data(fleet, settings, server_vars, all_vars, router_more)
    (dest / "fleet.yml").write_text(yaml.safe_dump(top, sort_keys=False))
    (dest / "group_vars" / "lab.yml").write_text(yaml.safe_dump(group, sort_keys=False))
    link = dest / "group_vars" / "all"
    if not link.is_symlink():
        link.symlink_to(repo / "group_vars" / "all")
    fleet.inventory = dest / "fleet.yml"
    return fleet.inventory


def create_containers(
    fleet: Fleet, repo: Path, replica_image: str = DEFAULT_IMAGE, mounts: dict[str, str] | None = None,
    log: Callable[[str], Any] = print,
) -> None:  # fmt: skip
    """The fleet's network and containers (made when missing, a running one left as it is; the router
    from the lab image, the replicas from ``replica_image`` with ``mounts``: named volumes -> paths), each
    connected to the network; fleet.ips and fleet.subnet read back."""
    client = docker.from_env()
    try:
        network = client.networks.get(fleet.network)
    except NotFound:
        network = client.networks.create(fleet.network)
    network.reload()
    fleet.subnet = str(network.attrs["IPAM"]["Config"][0]["Subnet"])
    labs = [Lab(repo, name=fleet.router, client=client)] + [
        Lab(repo, name=n, image=replica_image, client=client, mounts=mounts) for n in fleet.replicas
    ]
    with ThreadPoolExecutor(len(labs)) as pool:
        list(pool.map(lambda lab: lab.create(log=log), labs))
    for lab in labs:
        container = client.containers.get(lab.name)
        if fleet.network not in container.attrs["NetworkSettings"]["Networks"]:
            network.connect(container)
            container.reload()
        address = container.attrs["NetworkSettings"]["Networks"][fleet.network]["IPAddress"]
        if not address:
            raise LabError(f"{lab.name} has no address on {fleet.network}")
        fleet.ips[lab.name] = str(address)


def remove_fleet(fleet: Fleet, volumes: tuple[str, ...] = (), log: Callable[[str], Any] = print) -> list[str]:
    """The fleet's containers (with their anonymous volumes), its network and the named ``volumes``
    removed; what was removed."""
    client = docker.from_env()
    removed = []
    for name in [fleet.router, *fleet.replicas]:
        with contextlib.suppress(NotFound):
            client.containers.get(name).remove(force=True, v=True)
            removed.append(name)
    with contextlib.suppress(NotFound):
        client.networks.get(fleet.network).remove()
        removed.append(fleet.network)
    for volume in volumes:
        with contextlib.suppress(NotFound):
            client.volumes.get(volume).remove(force=True)
            removed.append(volume)
    for name in removed:
        log(f"removed {name}")
    return removed


@dataclass
class Load:
    """A live load while a roll runs: ``clients`` threads sending /generate through the router with
    its client key (each counted sent, and failed unless the answer is a 200 with SGLang's meta_info),
    and a poller of the router's /workers every 0.5 s (``polls``). With ``report``, a line with the
    counts every ``every`` seconds and at once when a request fails."""

    fleet: Fleet
    clients: int = 2
    report: Callable[[str], Any] | None = None
    every: float = 10.0
    sent: int = 0
    failed: list[str] = field(default_factory=list)
    polls: list[tuple[float, dict[str, bool]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def count_line(self) -> str:
        with self._lock:
            sent, failed = self.sent, len(self.failed)
        return f"live load through the router: {sent} requests sent, {failed} failed"

    def _client(self) -> None:
        body = json.dumps({"text": "def roll(", "sampling_params": {"max_new_tokens": 16}}).encode()
        headers = {"Content-Type": "application/json", **bearer(self.fleet.router_key)}
        while not self._stop.is_set():
            request = urllib.request.Request(f"{self.fleet.router_base}/generate", data=body, headers=headers)
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
            if error and self.report is not None:
                self.report(f"{self.count_line()} (FAILED: {error})")

    def _poll(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                self.polls.append((time.time(), self.fleet.workers()))
            self._stop.wait(0.5)

    def _reporter(self) -> None:
        while not self._stop.wait(self.every):
            if self.report is not None:
                self.report(self.count_line())

    def __enter__(self) -> Load:
        targets = [self._client] * self.clients + [self._poll, self._reporter]
        self._threads = [threading.Thread(target=target, daemon=True) for target in targets]
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
        return out_windows(self.polls, url)


def out_windows(polls: list[tuple[float, dict[str, bool]]], url: str) -> list[tuple[float, float, float]]:
    """Load.out_windows over a list of (time, /workers) polls."""
    windows: list[tuple[float, float, float]] = []
    last_in = polls[0][0] if polls else 0.0
    gone: float | None = None
    for when, workers in polls:
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


def most_out_at_once(polls: list[tuple[float, dict[str, bool]]], replicas: int) -> int:
    """The most replicas out of the router (unlisted or unhealthy) in any one poll."""
    return max(
        (sum(not ok for ok in w.values()) + max(0, replicas - len(w)) for _when, w in polls), default=0
    )
