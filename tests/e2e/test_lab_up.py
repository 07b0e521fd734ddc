"""The README's flow, through the installed CLI: `sglang-deploy lab create`, `sglang-deploy up` (twice:
the second run changes nothing), a bad input that preflight rejects. The lab host (sglang-lab, as in
inventory/lab.yml) and its first `up` are session fixtures of conftest.py shared by every e2e test;
the lab is destroyed at the end of the session. Artifacts go to the default dir (<repo>/artifacts),
exactly as the README does."""

from __future__ import annotations

import pytest
from e2e_lab import ARTIFACTS, LAB_HOST, cli, summary

pytestmark = pytest.mark.e2e


def test_up_converges_then_changes_nothing(converged_lab: dict[str, object]) -> None:
    first = converged_lab
    assert " TASK " in str(first["stdout"])  # live progress, plain lines (stdout is not a TTY here)
    assert f" {LAB_HOST}  " in str(first["stdout"])
    assert "status=successful rc=0" in str(first["stdout"])
    result = first["summary"]
    assert isinstance(result, dict)
    assert result["playbook"] == "site.yml"
    assert result["status"] == "successful"
    assert result["rc"] == 0
    host = result["hosts"][LAB_HOST]
    assert host["failed"] == 0
    assert host["unreachable"] == 0
    assert host["ok"] > 0
    assert host["status"] == "ok"
    assert "preflight" in result["roles"]
    assert (ARTIFACTS / "runs" / result["run_id"] / "summary.json").is_file()

    second = cli("up")
    assert second.returncode == 0, second.stdout + second.stderr
    assert summary()["hosts"][LAB_HOST]["changed"] == 0
    assert summary()["hosts"][LAB_HOST]["failed"] == 0
    assert (ARTIFACTS / "junit.xml").is_file()


def test_bad_input_fails_and_names_the_task(converged_lab: dict[str, object]) -> None:
    bad = cli("up", "-e", "sglang_service_port=80")
    assert bad.returncode != 0
    result = summary()
    assert result["rc"] == bad.returncode
    assert result["status"] == "failed"
    assert result["hosts"][LAB_HOST]["failed"] >= 1
    assert result["hosts"][LAB_HOST]["changed"] == 0  # bad input fails before any host change
    [failed] = [t for t in result["failed_tasks"] if t["host"] == LAB_HOST]
    assert failed["task"]
    assert "sglang_service_port='80' is not valid" in failed["message"]  # -e k=v gives a string
    assert "1024-65535" in failed["message"]
    assert f"FAILED {LAB_HOST}:" in bad.stdout
