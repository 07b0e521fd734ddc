"""The fleet of the fleet_lab tests (tests/e2e/test_roll_lab.py, test_status_lab.py): one router
container converged by the REAL sglang_router role (site.yml's router stages) and N replica
containers, each the real sglang-kimi unit running the named TEST DOUBLE
playbooks/lab/sglang_protocol_double.py (SGLang's protocol, no GPU) with the release python.

A full stack install takes most of an hour per container on 2 CPUs, so the replicas are made from ONE
converged replica: a seed container converged by site.yml (lab mode, the whole stack), given the
double and the lab tokenizer (playbooks/lab/install_double.yml), stopped and `docker commit`ted to an
image. Every replica container starts from that image, and the fleet's own site.yml run on it is the
stack's no-op rerun (the release, receipt and venv are there already) - the same state a real fleet
has after its first deployment. The image is made once per pytest session (the `replica_image`
fixture of conftest.py) and removed at its end; SGLANG_E2E_FLEET_IMAGE=<tag> names a prebuilt one
that is used and left in place (a developer's own: a fleet_lab run with SGLANG_E2E_KEEP_FLEET_IMAGE=1
keeps the image it made).

The replicas are registered by their IPs on the fleet's docker network (each server's
sglang_router_worker_url), which the controller reaches too; sglang_router_url keeps its default (the
router container's name: the plays that use it run on the replicas and the router, which resolve it).
The router demands its client key (the role's default,
sglang_router_api_key_required: true; the key is a test-only value in the inventory): verify's router
benchmark and the client threads reach /generate with it. Its /workers takes only the admin key (the
role's --control-plane-api-keys): the roll's drain and readmit and the role reach it from the router
container itself (loopback), as a real fleet's would; the controller reads /workers with the admin key
over the fleet's network only as the test's observer. The router is exposed to the fleet's network the
way an inventory does it (the role's defaults are loopback and IPAddressAllow=localhost):
sglang_router_host and sglang_router_prometheus_host 0.0.0.0, sglang_router_ip_address_allow
[localhost, <the fleet network's subnet>].
The servers run without a key and bind 0.0.0.0 (test only: sglang_allow_unauthenticated_bind)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e_lab import REPO, cli, docker_host, lab_group_vars, playbook, write_yaml

IMAGE_ENV = "SGLANG_E2E_FLEET_IMAGE"
KEEP_ENV = "SGLANG_E2E_KEEP_FLEET_IMAGE"
IMAGE_TAG = "sglang-deploy/fleet-replica:e2e"
SEED = "sglang-lab-fleet-seed"
DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
PYTHON = "/opt/sglang/current/venv/bin/python"
ROUTER_PORT = 30080
ROUTER_PROM_PORT = 29000
SERVER_PORT = 30000
IP_FORMAT = '{{(index .NetworkSettings.Networks "NET").IPAddress}}'
ROUTER_KEY = "Fleet-E2E-Router-Key-0123456789abcdef"  # test-only value (the fleet's inventory)
AUTH = {"Authorization": f"Bearer {ROUTER_KEY}"}
ADMIN_KEY = "Fleet-E2E-Router-Admin-Key-0123456789"  # test-only value (the fleet's inventory)
ADMIN_AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
SUBNET_FORMAT = "{{(index .IPAM.Config 0).Subnet}}"


def double_vars(*flags: str) -> dict[str, Any]:
    """The double behind the real unit (100 tok/s per request unless a flag says otherwise)."""
    return {"sglang_service_exec_override": [PYTHON, DOUBLE, "--double-tokens-per-s", "100", *flags]}


def docker(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, check=False, timeout=timeout)
    assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


def _link_group_vars_all(dest: Path) -> None:
    link = dest / "group_vars" / "all"
    if not link.exists():
        link.symlink_to(REPO / "group_vars" / "all")


def build_replica_image(tmp: Path) -> str:
    """The seed replica converged by site.yml (the whole stack, lab mode: the unit installed, not
    started), the double and the tokenizer added, stopped and committed to IMAGE_TAG; its tag."""
    started = time.monotonic()
    subprocess.run(["docker", "rm", "-f", "-v", SEED], capture_output=True, check=False)
    made = cli("lab", "create", "--name", SEED)
    assert made.returncode == 0, made.stderr
    try:
        (tmp / "group_vars").mkdir(parents=True, exist_ok=True)
        servers = {"children": {"lab": {"hosts": {SEED: docker_host(SEED)}}}}
        write_yaml(tmp / "seed.yml", {"all": {"children": {"sglang_servers": servers}}})
        write_yaml(tmp / "group_vars" / "lab.yml", lab_group_vars())
        _link_group_vars_all(tmp)
        converge = playbook("-i", str(tmp / "seed.yml"), "site.yml", timeout=5400)
        assert converge.returncode == 0, converge.stdout[-6000:]
        double = playbook("-i", str(tmp / "seed.yml"), "playbooks/lab/install_double.yml")
        assert double.returncode == 0, double.stdout[-6000:]
        docker("stop", SEED, timeout=300)
        docker("commit", "--message", "sglang-deploy e2e: a converged replica", SEED, IMAGE_TAG, timeout=1800)
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", SEED], capture_output=True, check=False)
    print(f"replica image {IMAGE_TAG} made in {time.monotonic() - started:.0f}s")
    return IMAGE_TAG


def remove_replica_image(tag: str) -> None:
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)


@dataclass
class Fleet:
    prefix: str
    router: str
    replicas: list[str]
    network: str
    tmp: Path
    inventory: Path = Path()
    ips: dict[str, str] = field(default_factory=dict)
    subnet: str = ""
    created_s: float = 0.0

    @property
    def router_base(self) -> str:
        return f"http://{self.ips[self.router]}:{ROUTER_PORT}"

    def worker_url(self, replica: str) -> str:
        return f"http://{self.ips[replica]}:{SERVER_PORT}"

    def workers(self) -> dict[str, bool]:
        """The router's /workers, read from the controller: url -> is_healthy."""
        request = urllib.request.Request(f"{self.router_base}/workers", headers=ADMIN_AUTH)
        with urllib.request.urlopen(request, timeout=5) as answer:
            body = json.loads(answer.read())
        return {w["url"]: bool(w["is_healthy"]) for w in body["workers"]}

    def wait_workers(self, expected: dict[str, bool], timeout: float = 60) -> dict[str, bool]:
        """The router's /workers once it equals ``expected`` (health checks run every 2 s), else the last."""
        deadline, seen = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            seen = self.workers()
            if seen == expected:
                break
            time.sleep(1)
        return seen

    def extra(self, name: str, data: dict[str, Any]) -> str:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(data))
        return f"@{path}"


def write_inventory(
    fleet: Fleet, server_vars: dict[str, Any], all_vars: dict[str, Any], router_vars: dict[str, Any]
) -> Path:
    dest = fleet.tmp / "inventory"
    (dest / "group_vars").mkdir(parents=True, exist_ok=True)
    router = {  # the REAL role; a fast health check so a stopped replica is seen within seconds
        # as the lab group's hosts: root already, and sudo would drop the container's CA bundle variables
        "ansible_become": False,
        "sglang_router_policy": "round_robin",
        "sglang_router_api_key": ROUTER_KEY,
        "sglang_router_admin_api_key": ADMIN_KEY,
        # exposed to the fleet's network (replicas, controller), as an inventory names its networks
        "sglang_router_host": "0.0.0.0",
        "sglang_router_prometheus_host": "0.0.0.0",
        "sglang_router_ip_address_allow": ["localhost", fleet.subnet],
        "sglang_router_health_check_interval_secs": 2,
        "sglang_router_health_failure_threshold": 1,
        "sglang_router_health_success_threshold": 1,
        **router_vars,
    }
    replicas = {n: docker_host(n, sglang_router_worker_url=fleet.worker_url(n)) for n in fleet.replicas}
    children = {
        "sglang_routers": {"hosts": {fleet.router: docker_host(fleet.router, **router)}},
        "sglang_servers": {"children": {"lab": {"hosts": replicas}}},
    }
    top = ({"vars": all_vars} if all_vars else {}) | {"children": children}
    write_yaml(dest / "fleet.yml", {"all": top})
    defaults = {
        # the router reaches the replicas over the fleet's network, without a key: open on purpose
        "sglang_service_host": "0.0.0.0",
        "sglang_allow_unauthenticated_bind": True,
        **server_vars,
    }
    write_yaml(dest / "group_vars" / "lab.yml", lab_group_vars(**defaults))
    _link_group_vars_all(dest)
    return dest / "fleet.yml"


def make_fleet(  # noqa: PLR0917 - a test fixture's one constructor
    tmp: Path,
    prefix: str,
    replicas: int,
    image: str,
    server_vars: dict[str, Any],
    all_vars: dict[str, Any] | None = None,
    router_vars: dict[str, Any] | None = None,
) -> Fleet:
    """The router (base lab image) and ``replicas`` containers from ``image``, on a network of their
    own; then the README's command, `sglang-deploy up` with the double: the router role installs and
    starts the router, each replica starts the double behind its unit and records its baseline, and
    Stage 6 registers the verified replicas. Every replica is then healthy in the router."""
    names = [f"{prefix}-{i}" for i in range(1, replicas + 1)]
    fleet = Fleet(prefix, f"{prefix}-router", names, f"{prefix}-net", tmp)
    started = time.monotonic()
    remove_fleet(fleet)
    docker("network", "create", fleet.network)
    fleet.subnet = docker("network", "inspect", "-f", SUBNET_FORMAT, fleet.network).stdout.strip()
    jobs = [("--name", fleet.router)] + [("--name", n, "--image", image) for n in names]
    with ThreadPoolExecutor(len(jobs)) as pool:
        made = list(pool.map(lambda args: cli("lab", "create", *args), jobs))
    assert all(proc.returncode == 0 for proc in made), [proc.stdout + proc.stderr for proc in made]
    for name in [fleet.router, *names]:
        docker("network", "connect", fleet.network, name)
        address = docker("inspect", "-f", IP_FORMAT.replace("NET", fleet.network), name)
        fleet.ips[name] = address.stdout.strip()
    inventory = write_inventory(fleet, server_vars, all_vars or {}, router_vars or {})
    fleet.inventory = inventory
    first = cli("up", "-i", str(inventory), "-e", fleet.extra("double", double_vars()),
                "--artifacts", str(tmp / "art-first"), "--progress", "plain", timeout=3600)  # fmt: skip
    assert first.returncode == 0, first.stdout[-8000:]
    expected = {fleet.worker_url(n): True for n in names}
    assert fleet.wait_workers(expected) == expected, fleet.workers()
    fleet.created_s = time.monotonic() - started
    print(f"fleet {prefix} ready in {fleet.created_s:.0f}s")
    return fleet


def remove_fleet(fleet: Fleet) -> None:
    for name in [fleet.router, *fleet.replicas]:
        subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)
    subprocess.run(["docker", "network", "rm", fleet.network], capture_output=True, check=False)


def replica_image_from_env() -> str | None:
    return os.environ.get(IMAGE_ENV) or None
