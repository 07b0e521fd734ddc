"""A rolling deployment through the CLI on three lab containers (sglang-lab-cli-fleet-1..3, created in
parallel, removed at the end): `sglang-deploy up --serial 1 --max-fail-percent 0` stops before the
third host when the second fails its verify gate; `--serial 2 --max-fail-percent 50` tolerates one
failed host of a batch of two and goes on.

Cheap on purpose: only the stages a roll's decision needs run (`--tags preflight,verify`: validate,
gather, verify layers 1-5); no stack is installed. The failing host is made to fail layer 5 (HTTP):
a TEST DOUBLE for a server that is up but does not answer - a transient unit named sglang-kimi.service
running `sleep infinity` (so verify sees the unit running and probes /health, which nobody serves),
with verify_http_wait_s: 3 in its host_vars so the probe gives up quickly."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import REPO, cli, docker_host, lab_exec, write_yaml

pytestmark = pytest.mark.e2e

HOSTS = [f"sglang-lab-cli-fleet-{i}" for i in (1, 2, 3)]
BROKEN = HOSTS[1]
ROLL = ("--tags", "preflight,verify", "--progress", "plain")


def write_inventory(dest: Path) -> Path:
    """HOSTS in the lab group (group_vars as inventory/lab.yml's); BROKEN's verify probe gives up fast."""
    servers = {"children": {"lab": {"hosts": {host: docker_host(host) for host in HOSTS}}}}
    (dest / "group_vars").mkdir(parents=True)
    write_yaml(dest / "fleet.yml", {"all": {"children": {"sglang_servers": servers}}})
    (dest / "group_vars" / "lab.yml").write_text((REPO / "inventory" / "group_vars" / "lab.yml").read_text())
    (dest / "group_vars" / "all").symlink_to(REPO / "group_vars" / "all")
    (dest / "host_vars").mkdir()
    (dest / "host_vars" / f"{BROKEN}.yml").write_text("verify_http_wait_s: 3\nverify_http_timeout_s: 3\n")
    return dest / "fleet.yml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    started = time.monotonic()
    with ThreadPoolExecutor(len(HOSTS)) as pool:
        made = list(pool.map(lambda name: cli("lab", "create", "--name", name), HOSTS))
    assert all(proc.returncode == 0 for proc in made), [proc.stderr for proc in made]
    print(f"fleet of {len(HOSTS)} created in {time.monotonic() - started:.1f}s")
    # the test double: a unit of the service's name that runs but serves nothing
    lab_exec("systemd-run", "--unit=sglang-kimi", "--", "sleep", "infinity", name=BROKEN)
    try:
        yield write_inventory(tmp_path_factory.mktemp("fleet"))
    finally:
        for name in HOSTS:
            subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)


def rollout(artifacts: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((artifacts / "rollout.json").read_text())
    return data


def hosts_of_runs(artifacts: Path) -> set[str]:
    """Every host any run of this artifacts dir touched (the per-run summaries)."""
    found: set[str] = set()
    for summary in (artifacts / "runs").glob("*/summary.json"):
        found.update(json.loads(summary.read_text())["hosts"])
    return found


def test_a_failed_verify_gate_stops_the_roll(fleet: Path, tmp_path: Path) -> None:
    art = tmp_path / "art"
    proc = cli(
        "up", "-i", str(fleet), "--artifacts", str(art), "--serial", "1", "--max-fail-percent", "0", *ROLL
    )
    assert proc.returncode == 2, proc.stdout[-6000:]
    assert "rolling over 3 host(s) in 3 batch(es) of --serial 1, --max-fail-percent 0" in proc.stdout
    assert f"ROLL STOPPED: 1 of 1 host(s) of batch 2 failed ({BROKEN})" in proc.stdout
    assert f"not started (left as they were): {HOSTS[2]}" in proc.stdout
    report = rollout(art)
    assert [b["hosts"] for b in report["batches"]] == [[HOSTS[0]], [BROKEN]]
    assert [b["failed"] for b in report["batches"]] == [[], [BROKEN]]
    assert report["not_started"] == [HOSTS[2]]
    assert hosts_of_runs(art) == {HOSTS[0], BROKEN}  # the third host was never run on
    summary = json.loads((art / "runs" / report["batches"][1]["run_id"] / "summary.json").read_text())
    [failed] = summary["failed_tasks"]
    assert failed["role"] == "verify"
    assert "layer 5" in failed["message"] or "layer 5" in failed["task"], failed


def test_a_tolerated_failure_rolls_on(fleet: Path, tmp_path: Path) -> None:
    art = tmp_path / "art"
    proc = cli(
        "up", "-i", str(fleet), "--artifacts", str(art), "--serial", "2", "--max-fail-percent", "50", *ROLL
    )
    assert proc.returncode == 2, proc.stdout[-6000:]  # a host failed: the roll's status says so
    assert "ROLL STOPPED" not in proc.stdout
    report = rollout(art)
    assert [b["hosts"] for b in report["batches"]] == [HOSTS[:2], HOSTS[2:]]
    assert [b["failed"] for b in report["batches"]] == [[BROKEN], []]
    assert report["not_started"] == []
    assert hosts_of_runs(art) == set(HOSTS)
