"""`sglang-deploy lab demo --fleet` end to end, as `make demo-fleet` runs it (the CLI by its absolute path,
a login shell's environment), on a fleet of its own (sglang-lab-fleetdemo-e2e-fleet-router and -1, -2:
never the lab hosts of scripts/test's lanes nor the fleet e2e's), made and converged by the demo itself,
removed afterwards with `lab destroy --fleet` (containers, network, the shared release store).

Asserted: exit 0 (every step as expected), zero failed requests among the many sent through the router
during the roll (the summary's count and the live count lines), the roll's verdict (rollout.json: one
batch per replica, none failed, none left out), each replica's unit the named test double and active, the
router's unit SGLang's router, verify's results passed on each replica, and every path the summary names
exists (report.md, the charts, production_v2.md, the inventory for `sglang-deploy status -i`)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import cli, lab_exec

from sglang_deploy.commands_demo import DESCRIPTION
from sglang_deploy.commands_demo_fleet import fleet_prefix, mounts

pytestmark = [pytest.mark.e2e, pytest.mark.demo_fleet]

NAME = "sglang-lab-fleetdemo-e2e"
PREFIX = fleet_prefix(NAME)
REPLICAS = [f"{PREFIX}-1", f"{PREFIX}-2"]
ROUTER = f"{PREFIX}-router"
RESULTS = "var/lib/sglang-deploy/verify-results.json"


def present() -> list[str]:
    names = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    volumes = subprocess.run(["docker", "volume", "ls", "--format", "{{.Name}}"], capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    return [n for n in names + volumes if n.startswith(PREFIX)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One fleet demo run from nothing (its fleet removed afterwards, also when the run fails)."""
    artifacts = Path(tmp_path_factory.mktemp("demo-fleet"))
    cli("lab", "destroy", "--fleet", "--name", NAME)
    try:
        run = cli("lab", "demo", "--fleet", "--name", NAME, "--artifacts", str(artifacts),
                  "--progress", "plain", timeout=5400)  # fmt: skip
        yield {"run": run, "out": run.stdout + run.stderr, "dir": artifacts / "demo" / PREFIX}
    finally:
        removed = cli("lab", "destroy", "--fleet", "--name", NAME)
        assert removed.returncode == 0, removed.stderr
        assert present() == []


def test_the_fleet_demo_rolls_without_a_failed_request(demo: dict[str, Any]) -> None:
    out, folder = demo["out"], demo["dir"]
    assert demo["run"].returncode == 0, out[-8000:]
    assert "lab demo: done, as expected" in out, out[-4000:]
    assert "sglang-protocol-double, a TEST DOUBLE of SGLang's HTTP server" in out
    [(sent, failed)] = re.findall(r"roll behind the router: (\d+) requests sent, (\d+) failed", out)
    assert int(sent) > 20, sent
    assert int(failed) == 0, out[-8000:]
    live = re.findall(r"live load through the router: (\d+) requests sent, (\d+) failed", out)
    assert live, out[-4000:]
    assert all(f == "0" for _s, f in live), live
    # the roll's verdict: one batch per replica in order, none failed, none left out
    rollout = json.loads((folder / "roll" / "rollout.json").read_text())
    assert [b["hosts"] for b in rollout["batches"]] == [[r] for r in REPLICAS]
    assert [b["failed"] for b in rollout["batches"]] == [[], []]
    assert rollout["not_started"] == []
    assert not rollout["stopped"]
    assert rollout["rc"] == 0
    for name in REPLICAS:
        assert lab_exec("systemctl", "is-active", "sglang-kimi", name=name).strip() == "active"
        unit = lab_exec("systemctl", "show", "-p", "Description", "--value", "sglang-kimi", name=name).strip()
        assert unit == DESCRIPTION
        assert "--double-ttft-ms 22" in lab_exec("systemctl", "cat", "sglang-kimi", name=name)  # the upgrade
        results = json.loads((folder / "verify" / "fetched" / name / RESULTS).read_text())
        assert results["status"] == "passed", results.get("verdict")
        # the shared release store: each replica's current in it
        assert lab_exec("readlink", "/opt/sglang/current", name=name).startswith("releases/")
    assert lab_exec("systemctl", "is-active", "sglang-router", name=ROUTER).strip() == "active"
    names = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    assert NAME not in names  # the fleet's own containers only: no lab host of the name
    assert sorted(mounts(PREFIX)) == sorted(n for n in present() if n.endswith(("-releases", "-locks")))
    report = (folder / "verify" / "report.md").read_text()
    assert "> **Test double, not SGLang**" in report, report[:2000]
    # every path the summary names exists; report, charts and production documents among them
    labels = r"report|chart \([^)]+\)|production_v2\.md \([^)]+\)|rollout\.json"
    named = dict(re.findall(rf"^  ({labels}): (\S+)$", out, re.MULTILINE))
    assert "report" in named, out[-4000:]
    assert {f"chart ({r})" for r in REPLICAS} | {f"production_v2.md ({r})" for r in REPLICAS} <= set(named)
    for label, path in named.items():
        assert Path(path).is_file(), (label, path)
    doc = Path(named[f"production_v2.md ({REPLICAS[0]})"]).read_text()
    assert "> **Test double, not SGLang**" in doc
    inventory = folder / "inventory" / "fleet.yml"
    assert f"status: sglang-deploy status -i {inventory}" in out
    assert inventory.is_file()
