"""The lab fleet (src/sglang_deploy/lab_fleet.py) and `sglang-deploy lab demo --fleet` without docker:
the inventory the fleet gets, the out-of-router windows and the most replicas out at once from the
/workers polls, the roll's verdict from rollout.json, the router keys kept in the demo's inventory, and
the demo's steps and exit status with the runs, the containers and the load faked (exit 0 only when the
roll dropped nothing and every step did what it shows)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
import yaml

from sglang_deploy import commands_demo_fleet as fleet_demo
from sglang_deploy import commands_status, commands_up, commands_verify
from sglang_deploy.commands_demo import DESCRIPTION
from sglang_deploy.commands_demo import run as demo_run
from sglang_deploy.lab_fleet import Fleet, inventory_data, most_out_at_once, out_windows

REPO = Path(__file__).resolve().parents[1]


def a_fleet(tmp: Path) -> Fleet:
    fleet = Fleet.named("lab-fleet", 2, tmp, "client-key-0123456789abcdef", "admin-key-0123456789abcdef")
    fleet.ips = {"lab-fleet-router": "10.9.0.2", "lab-fleet-1": "10.9.0.3", "lab-fleet-2": "10.9.0.4"}
    fleet.subnet = "10.9.0.0/16"
    return fleet


def test_the_fleet_inventory_names_the_router_and_each_replica_by_its_address(tmp_path: Path) -> None:
    fleet = a_fleet(tmp_path)
    top, group = inventory_data(fleet, {"sglang_tp_size": 1}, {"verify_levels": [1]}, router_more={"x": 1})
    children = top["all"]["children"]
    router = children["sglang_routers"]["hosts"]["lab-fleet-router"]
    assert router["ansible_connection"] == "community.docker.docker"
    assert router["sglang_router_api_key"] == fleet.router_key
    assert router["sglang_router_admin_api_key"] == fleet.admin_key
    assert router["sglang_router_ip_address_allow"] == ["localhost", "10.9.0.0/16"]
    assert router["x"] == 1
    replicas = children["sglang_servers"]["children"]["lab"]["hosts"]
    assert list(replicas) == ["lab-fleet-1", "lab-fleet-2"]  # inventory order = roll order
    assert replicas["lab-fleet-2"]["sglang_router_worker_url"] == "http://10.9.0.4:30000"
    assert group == {
        "sglang_tp_size": 1,
        "sglang_service_host": "0.0.0.0",
        "sglang_allow_unauthenticated_bind": True,
        "verify_levels": [1],
    }
    assert fleet.expected_workers() == {"http://10.9.0.3:30000": True, "http://10.9.0.4:30000": True}
    assert "vars" not in top["all"]


def test_out_windows_and_the_most_out_at_once() -> None:
    a, b = "http://a:30000", "http://b:30000"
    polls = [
        (1.0, {a: True, b: True}),
        (2.0, {b: True}),  # a drained: unlisted
        (3.0, {a: False, b: True}),  # listed, not healthy yet
        (4.0, {a: True, b: True}),
        (5.0, {a: True, b: False}),
    ]
    assert out_windows(polls, a) == [(1.0, 2.0, 4.0)]
    assert out_windows(polls, b) == [(4.0, 5.0, math.inf)]
    assert most_out_at_once(polls, 2) == 1
    assert most_out_at_once([*polls, (6.0, {})], 2) == 2
    assert most_out_at_once([], 2) == 0


def test_the_roll_verdict_wants_one_batch_per_replica_none_failed() -> None:
    good = {"batches": [{"hosts": ["r1"], "failed": []}, {"hosts": ["r2"], "failed": []}],
            "stopped": "", "not_started": [], "rc": 0}  # fmt: skip
    assert fleet_demo.roll_verdict(good, ["r1", "r2"]) == (True, "2 batch(es) of 1, failed: none")
    stopped = {"batches": [{"hosts": ["r1"], "failed": ["r1"]}], "rc": 2,
               "stopped": "1 of 1 host(s) of batch 1 failed", "not_started": ["r2"]}  # fmt: skip
    ok, text = fleet_demo.roll_verdict(stopped, ["r1", "r2"])
    assert not ok
    assert "failed: r1" in text
    assert "STOPPED: 1 of 1 host(s)" in text
    assert not fleet_demo.roll_verdict({**good, "rc": 2}, ["r1", "r2"])[0]
    assert not fleet_demo.roll_verdict(good, ["r2", "r1"])[0]


def test_the_keys_of_an_earlier_fleet_are_read_back(tmp_path: Path) -> None:
    fleet = a_fleet(tmp_path)
    assert fleet_demo.saved_keys(tmp_path / "absent.yml", fleet.router) == ("", "")
    top, _group = inventory_data(fleet, {}, {})
    (tmp_path / "fleet.yml").write_text(yaml.safe_dump(top))
    assert fleet_demo.saved_keys(tmp_path / "fleet.yml", fleet.router) == (fleet.router_key, fleet.admin_key)
    assert fleet_demo.fleet_prefix("sglang-lab") == "sglang-lab-fleet"
    assert fleet_demo.mounts("p") == {"p-releases": "/opt/sglang/releases", "p-locks": "/opt/sglang/locks"}


class FakeLoad:
    """lab_fleet.Load without threads: ``failed`` requests of ``sent``, and /workers polls."""

    def __init__(self, sent: int, failed: int, polls: list[tuple[float, dict[str, bool]]]) -> None:
        self.sent, self.failed, self.polls = sent, [f"t {i} refused" for i in range(failed)], polls

    def __call__(self, *_a: Any, **_k: Any) -> FakeLoad:
        return self

    def __enter__(self) -> FakeLoad:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def count_line(self) -> str:
        return f"live load through the router: {self.sent} requests sent, {len(self.failed)} failed"


def run_fleet_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str], *, failed: int = 0) -> tuple[int, str]:
    args = argparse.Namespace(verbose=0, progress="plain", name="lab")
    runner = fleet_demo.FleetDemo(args, REPO, tmp_path / "demo")
    fleet = runner.fleet
    invocation = {name: 0 for name in fleet.replicas}
    built: list[str] = []

    def create(made: Fleet, *_a: Any, **_k: Any) -> None:
        made.ips = {name: f"10.9.0.{i}" for i, name in enumerate([made.router, *made.replicas], start=2)}
        made.subnet = "10.9.0.0/16"

    def on_host(_self: Any, name: str, *cmd: str) -> str:
        if cmd[0] == "readlink":
            return "releases/abc123"
        if "Description" in cmd:
            return DESCRIPTION
        if "InvocationID" in cmd:
            return str(invocation[name])
        return ""

    class FakeLab:
        def __init__(self, _root: Path, name: str) -> None:
            self.name = name

        def exec(self, *_cmd: str) -> tuple[int, str]:
            return (0 if built else 1), ""

    def up(ns: argparse.Namespace) -> int:
        extra = [json.loads(e) for e in ns.extra_vars]
        if ns.inventory.name == "servers.yml":
            built.append("release")
            return 0
        if ns.serial is None:  # the fleet's first up records each replica's baseline
            for name in fleet.replicas:
                baseline = runner.out / "inventory" / "host_vars" / name / "verify_baseline.yml"
                baseline.parent.mkdir(parents=True, exist_ok=True)
                baseline.write_text("verify_baseline_records: {}\n")
            return 0
        assert extra == [fleet_demo.UPGRADE]
        batches = [{"hosts": [n], "failed": [], "run_id": str(i)} for i, n in enumerate(fleet.replicas)]
        for name in fleet.replicas:
            invocation[name] += 1
        (ns.artifacts).mkdir(parents=True, exist_ok=True)
        (ns.artifacts / "rollout.json").write_text(
            json.dumps({"batches": batches, "stopped": "", "not_started": [], "rc": 0})
        )
        return 0

    def verify(ns: argparse.Namespace) -> int:
        for name in fleet.replicas:
            dest = ns.report_dir / "fetched" / name / "var" / "lib" / "sglang-deploy"
            dest.mkdir(parents=True)
            (dest / "verify-results.json").write_text(json.dumps({"status": "passed"}))
            (dest / "production_v2.md").write_text("# doc\n")
            (ns.report_dir / f"throughput-{name}.png").write_bytes(b"png")
        (ns.report_dir / "report.md").write_text("# report\n")
        return 0

    polls = [(1.0, {fleet.worker_url(n): True for n in fleet.replicas})] if fleet.ips else []

    class Result:
        rc = 0

    with (
        patch.object(fleet_demo, "create_containers", create),
        patch.object(fleet_demo.FleetDemo, "on_host", on_host),
        patch.object(fleet_demo, "Lab", FakeLab),
        patch.object(Fleet, "wait_workers", lambda self, expected, timeout=60: expected),
        patch.object(commands_up, "run", up),
        patch.object(commands_verify, "run", verify),
        patch.object(commands_status, "run", lambda _ns: 0),
        patch("sglang_deploy.commands_demo.execute", lambda *_a: Result()),
        patch.object(fleet_demo, "Load", FakeLoad(1234, failed, polls)),
        patch("sglang_deploy.commands_demo_fleet.time.sleep", lambda _s: None),
    ):
        rc = runner.run()
    return rc, capsys.readouterr().out


def test_the_fleet_demo_exits_0_with_no_failed_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_fleet_demo(tmp_path, capsys)
    assert rc == 0, out
    assert "lab demo: done, as expected" in out
    for title in ("fleet hosts", "release", "test double", "up", "roll", "verify", "status"):
        assert f"  ok  {title} " in out
    assert "roll behind the router: 1234 requests sent, 0 failed" in out
    inventory = tmp_path / "demo" / "inventory" / "fleet.yml"
    assert f"status: sglang-deploy status -i {inventory}" in out
    assert inventory.stat().st_mode & 0o777 == 0o600  # it holds the router's keys
    assert "sglang_routers" not in (tmp_path / "demo" / "inventory" / "servers.yml").read_text()
    for label in ("report", "chart (lab-fleet-1)", "production_v2.md (lab-fleet-2)", "rollout.json"):
        assert f"  {label}: " in out
    keys = fleet_demo.saved_keys(inventory, "lab-fleet-router")
    assert all(len(key) == 48 for key in keys)
    assert keys[0] != keys[1]


def test_one_failed_request_makes_the_demo_unexpected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out = run_fleet_demo(tmp_path, capsys, failed=1)
    assert rc == 1
    assert "  BAD roll " in out
    assert "1234 requests sent through the router, 1 failed" in out
    assert "lab demo: UNEXPECTED: roll" in out


def test_the_fleet_demo_leaves_the_lab_host_alone(tmp_path: Path) -> None:
    """`lab demo --fleet --name N` makes N-fleet-*, never the lab host N itself."""
    args = argparse.Namespace(
        verbose=0, progress="plain", name="lab", image="x", fleet=True, artifacts=tmp_path
    )

    def no_lab(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the lab host was touched")

    with (
        patch("sglang_deploy.commands_demo.Lab", no_lab),
        patch.object(
            fleet_demo.FleetDemo, "run", lambda self: 0 if self.out == tmp_path / "demo" / "lab-fleet" else 1
        ),
    ):
        assert demo_run(args) == 0
