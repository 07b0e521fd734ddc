"""The README's flow, through the installed CLI: `sglang-deploy lab create`, `sglang-deploy up` (twice:
the second run changes nothing), a bad input that preflight rejects. The lab host (sglang-lab, as in
inventory/lab.yml) and its first `up` are session fixtures of conftest.py shared by every e2e test;
the lab is destroyed at the end of the session. Artifacts go to the default dir (<repo>/artifacts),
exactly as the README does."""

from __future__ import annotations

import json

import pytest
from e2e_lab import ARTIFACTS, LAB_HOST, LAB_OVERRIDDEN, cli, lab_exec, summary

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
    for run in (str(first["stdout"]), second.stdout):
        assert_closing(run)


def assert_closing(stdout: str) -> None:
    """The newcomer's closing block of `make up`, checked against the lab host itself: the release
    `current` points at, the unit's enablement and state as systemd reports them, the lab's limits
    (no GPU: not started; verify's GPU layers and the benchmark skipped) and the next commands."""
    assert "\ndeployed:\n" in stdout, stdout[-3000:]
    closing = stdout[stdout.index("\ndeployed:\n") :]
    release = lab_exec("readlink", "/opt/sglang/current").strip().rsplit("/", 1)[-1]
    enabled = lab_exec("systemctl", "is-enabled", "sglang-kimi.service", check=False).strip()
    active = lab_exec("systemctl", "is-active", "sglang-kimi.service", check=False).strip()
    assert (enabled, active) == ("enabled", "inactive")  # lab mode: installed and enabled, not started
    assert f"  {LAB_HOST}: release {release} (/opt/sglang/releases/{release})" in closing
    assert (
        f"    unit sglang-kimi.service (/etc/systemd/system/sglang-kimi.service): {enabled}, {active}"
        in closing
    )
    assert "    NCCL env /etc/sglang/nccl.env (profile none)" in closing
    assert "what could not be done here:" in closing
    assert f"  {LAB_HOST}: no GPU (lab mode): unit installed ({enabled}, {active}), not started" in closing
    assert f"  {LAB_HOST}: verify gpu, cuda, torch, nccl skipped: no GPU (lab mode)" in closing
    assert f"  {LAB_HOST}: benchmark and gate not run: verdict skipped" in closing
    for command in ("drift", "verify", "releases"):
        assert f"  sglang-deploy {command} -i inventory/lab.yml    # " in closing


def test_up_runs_as_an_installed_collection_without_the_prefork_callback(
    converged_lab: dict[str, object],
) -> None:
    """The session's first `up` (the full converge of the fresh lab host) runs with the checkout's
    callbacks minus sglang.deploy.prefork (e2e_lab.INSTALLED_CALLBACKS), the default of an installed
    collection: ansible-playbook got that setting (runner's command record)."""
    if LAB_OVERRIDDEN:
        pytest.skip("SGLANG_E2E_LAB: the lab was converged by ansible-playbook, not the CLI")
    first = converged_lab["summary"]
    assert isinstance(first, dict)
    runs = ARTIFACTS / "runner" / "artifacts"
    command = json.loads((runs / first["run_id"] / "command").read_text())
    callbacks = command["env"]["ANSIBLE_CALLBACKS_ENABLED"].split(",")
    assert "sglang.deploy.prefork" not in callbacks
    assert "ansible.posix.profile_tasks" in callbacks
    # a later run of the CLI (test_up_converges_then_changes_nothing's second up, when it ran) uses the
    # checkout's ansible.cfg, as `make up` does: the callback is on
    if summary()["run_id"] != first["run_id"]:
        later = json.loads((runs / summary()["run_id"] / "command").read_text())
        assert "ANSIBLE_CALLBACKS_ENABLED" not in later["env"]


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
