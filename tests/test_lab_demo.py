"""`sglang-deploy lab demo`'s steps and exit status without a lab host: the runs (`up`, verify, the
double's playbook) and the lab container are fakes; what is checked is the order of the steps, what
each one expects, and that the demo exits 0 only when the slower release failed the gate and was
rolled back (the expected outcome), 1 when a step did something else."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from sglang_deploy import commands_demo as demo
from sglang_deploy import commands_up, commands_verify
from sglang_deploy.lab import Lab

FIRST = "abc123"


class FakeLab(Lab):
    """The container: `current` and the unit, changed by the slow-release script."""

    def __init__(self) -> None:  # no docker client
        self.name = "lab-x"
        self.current = FIRST
        self.commands: list[tuple[str, ...]] = []

    def exec(self, *cmd: str) -> tuple[int, str]:
        self.commands.append(cmd)
        if cmd[:1] == ("readlink",):
            return 0, f"releases/{self.current}\n"
        if cmd[:2] == ("sh", "-c") and "cp -al" in cmd[2]:
            self.current = cmd[5]
            return 0, ""
        if cmd[:3] == ("systemctl", "show", "-p"):
            return 0, demo.DESCRIPTION + "\n"
        if cmd[:2] == ("sh", "-c") and "is-active" in cmd[2]:
            return 0, "active\n"
        return 0, ""


def write_results(report_dir: Path, host: str, data: dict[str, Any]) -> None:
    dest = report_dir / "fetched" / host / "var" / "lib" / "sglang-deploy"
    dest.mkdir(parents=True)
    (dest / "verify-results.json").write_text(json.dumps(data))
    (dest / "production_v2.md").write_text("# doc\n")


def run_demo(tmp_path: Path, slow_gate: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, FakeLab]:
    lab = FakeLab()
    args = argparse.Namespace(verbose=0, progress="plain")
    runner = demo.Demo(args, Path(__file__).resolve().parents[1], tmp_path / "demo", lab=lab)

    def up(ns: argparse.Namespace) -> int:
        extra = [json.loads(e) for e in ns.extra_vars]
        if {"verify_benchmark": "always"} in extra:
            runner.baseline.parent.mkdir(parents=True, exist_ok=True)
            runner.baseline.write_text("verify_baseline_records: {}\n")
        return 0

    def verify(ns: argparse.Namespace) -> int:
        if ns.report_dir.name == "verify-pass":
            write_results(
                ns.report_dir, lab.name, {"status": "passed", "results": {"gate": {"status": "passed"}}}
            )
            return 0
        lab.current = FIRST  # the rollback
        results = {"gate": {"status": slow_gate}, "gate_after_rollback": {"status": "passed"}}
        write_results(ns.report_dir, lab.name, {"status": "rolled back", "results": results,
                                                "verdict": {"failed": ["gate"]}})  # fmt: skip
        return 2

    class Result:
        rc = 0

    with (
        patch.object(commands_up, "run", up),
        patch.object(commands_verify, "run", verify),
        patch.object(demo, "execute", lambda *_a: Result()),
    ):
        rc = runner.run()
    return rc, capsys.readouterr().out, lab


def test_the_expected_run_exits_0_naming_the_double_and_the_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, lab = run_demo(tmp_path, "failed", capsys)
    assert rc == 0, out
    assert "lab demo: done, as expected" in out
    assert "sglang-protocol-double, a TEST DOUBLE of SGLang's HTTP server" in out
    assert "The failed gate and the rollback of the slower release are what the demo shows" in out
    for title in ("prepare", "converge", "test double", "up", "verify", "slower release"):
        assert f"  ok  {title} " in out
    assert "status rolled back (failed: gate), gate failed" in out
    assert str(tmp_path / "demo" / "verify-rollback" / "report.md") in out
    assert f"sglang-deploy status -i {tmp_path / 'demo' / 'inventory' / 'lab.yml'}" in out
    script = next(c for c in lab.commands if c[:2] == ("sh", "-c") and "cp -al" in c[2])
    assert script[4:] == (FIRST, f"{FIRST}{demo.SLOW_SUFFIX}", str(demo.SLOW_TOKENS_PER_S))
    assert demo.SLOW_TOKENS_PER_S == 70
    assert demo.SLOWER_PCT == 30
    inventory = (tmp_path / "demo" / "inventory" / "group_vars" / "lab.yml").read_text()
    assert "sglang_protocol_double.py" in inventory
    assert "verify_levels:\n- 1\n- 3\n- 25" in inventory


def test_a_slower_release_that_passes_the_gate_is_unexpected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rolled back for another reason (e.g. start-up) while the gate passed: not what the demo shows."""
    rc, out, _lab = run_demo(tmp_path, "passed", capsys)
    assert rc == 1
    assert "  BAD verify the slower release" in out
    assert "lab demo: UNEXPECTED: verify the slower release" in out
