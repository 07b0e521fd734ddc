"""Drift on a converged lab host, tampered by hand as an operator would: `sglang-deploy drift` (site.yml
in check + diff mode) names the task of every tamper and exits 2, one `up` repairs them all, `drift`
then exits 0 and `up` again changes nothing.

All tampers are applied together (they touch different things), on the shared converged lab host:
one check run, one repair run. The lab host has no API key, so this file converges it with one first
(the key file is a tamper target) and converges it back without one at the end, leaving it as the
other e2e tests expect. Two tampers of the same file conflict (an edited NCCL value, a deleted NCCL
env file): the deletion is the second round, checked before that last run, which repairs it.
The lab installs CUDA by the wheel method (Debian 12 is not the production OS): no apt hold or
preferences exist there to remove; the cuda_toolkit_apt molecule scenario covers that tamper.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import LAB_HOST, LAB_OVERRIDDEN, REPO, cli, lab_exec, lab_inventory

pytestmark = pytest.mark.e2e

KEY = "drift-lab-test-key-0123456789abcdef"  # a test-only key (the lab serves nothing with it)
SP = "/opt/sglang/current/venv/lib/python3.11/site-packages"
UV = "UV_CACHE_DIR=/var/cache/sglang-deploy/uv /opt/sglang/tools/uv/bin/uv"
PY = "/opt/sglang/current/venv/bin/python"
DROPIN = "/etc/systemd/system/sglang-kimi.service.d/override.conf"
CLOCK = {"start": time.monotonic()}  # reset when the module's rounds begin (after the session converge)
MASK = "********"

SERVICE_STATE = (
    "sglang_service : Apply the service's host state (user, directories, launcher, launch-args.json, "
    "key file, unit, drop-ins, enablement)"
)
# every drift of the release venv: one task, the lifecycle module's repair (its message one line per kind)
STACK_REPAIR = (
    "sglang_stack : Report and repair the drift of the release venv"
    " (reinstall from its lock, remove start-up files, owner root)"
)
# tamper id -> (shell command run in the lab host, task that must report it, text its detail names)
TAMPERS: dict[str, tuple[str, str, str]] = {
    "nccl_value_edited": (
        "echo NCCL_PROTO=LL >> /etc/sglang/nccl.env",
        "nccl_env : Render the environment file",
        "",
    ),
    "unit_edited": (
        "sed -i 's|^ExecStart=.*|ExecStart=/bin/sleep infinity|' /etc/systemd/system/sglang-kimi.service",
        SERVICE_STATE,
        "/etc/systemd/system/sglang-kimi.service: +",
    ),
    "dropin_replaces_execstart": (
        f"mkdir -p {Path(DROPIN).parent} && "
        f"printf '[Service]\\nExecStart=\\nExecStart=/bin/sleep 1\\n' > {DROPIN}",
        SERVICE_STATE,
        "override.conf: state: file -> absent",
    ),
    "runtime_dropin": (
        # a drop-in systemd loads from /run (no managed file changes): the probe asks systemd
        "mkdir -p /run/systemd/system/sglang-kimi.service.d && printf '[Service]\\nEnvironment=DRIFT=1\\n'"
        " > /run/systemd/system/sglang-kimi.service.d/x.conf && systemctl daemon-reload",
        SERVICE_STATE,
        "/run/systemd/system/sglang-kimi.service.d/x.conf",
    ),
    "api_key_file_deleted": (
        "rm -f /etc/sglang/sglang-config.yaml",
        # the state module names the file, never its content (a path is not a secret: readable)
        SERVICE_STATE,
        "/etc/sglang/sglang-config.yaml: would be created",
    ),
    "service_stopped_and_disabled": (
        "systemctl disable --now sglang-kimi.service",
        SERVICE_STATE,
        "sglang-kimi.service: enabled: disabled -> enabled",
    ),
    "patched_file_reverted": (
        # patch 0004 reversed in place with the series' own file
        "cd / && patch -R -s -p2 -d " + SP + " --no-backup-if-mismatch -i /tmp/drift-0004.patch",
        STACK_REPAIR,
        "eagle_worker_v2.py",
    ),
    "line_appended_to_patched_file": (
        f"echo '# appended by hand' >> {SP}/sglang/srt/layers/communicator.py",
        STACK_REPAIR,
        "communicator.py",
    ),
    "startup_pth_in_release_venv": (
        # Python runs its `import` line at every start; no distribution's RECORD lists it
        f"printf 'import os\\n' > {SP}/zz-drift.pth",
        STACK_REPAIR,
        "zz-drift.pth",
    ),
    "other_version_of_pinned_package": (
        f"{UV} pip install -q --python {PY} transformers==4.57.0",
        STACK_REPAIR,
        "transformers 4.57.0 installed, the lock pins 4.57.1",
    ),
    "pinned_package_uninstalled": (
        f"{UV} pip uninstall -q --python {PY} flashinfer-cubin",
        STACK_REPAIR,
        "flashinfer-cubin not installed",
    ),
    "current_points_at_wrong_dir": (
        "mkdir -p /opt/sglang/wrong && ln -sfnT /opt/sglang/wrong /opt/sglang/current.tmp"
        " && mv -T /opt/sglang/current.tmp /opt/sglang/current",
        "sglang_stack : Apply the stack's run state (the launch record and its link, current)",
        "",
    ),
    "nvcc_deleted_from_toolkit": (
        'rm -f "$(readlink -f /opt/cuda/13.0.1/bin/nvcc)"',
        # reported by the module that reinstalls the wheels (sglang.deploy.release state venv): the drift
        # is its message and the header of its diff
        "cuda_toolkit : Create, install or repair the wheel toolkit (the probe found the venv missing or the"
        " toolkit drifted) - cuda-toolkit[nvcc,cudart,nvvm,crt]==13.0.1",
        "drift: /opt/cuda/13.0.1: bin/nvcc is missing",
    ),
}
# The tampers on paths under the release's venv must run before current is pointed elsewhere.
ORDER = [k for k in TAMPERS if k != "current_points_at_wrong_dir"] + ["current_points_at_wrong_dir"]


def elapsed() -> str:
    return f"{time.monotonic() - CLOCK['start']:.0f}s"


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return (
        lab_inventory(tmp_path_factory.mktemp("drift-inventory"))
        if LAB_OVERRIDDEN
        else REPO / "inventory" / "lab.yml"
    )


def run_cli(action: str, inventory: Path, artifacts: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """`sglang-deploy drift|up` against the lab; (rc, summary.json or the --json report, stdout)."""
    args = [action, "-i", str(inventory), "--artifacts", str(artifacts), *extra]
    if action == "drift":
        args.append("--json")
    proc = cli(*args, timeout=1800)
    print(f"[drift-lab e2e +{elapsed()}] {action} rc={proc.returncode}")
    if action == "drift":
        text = proc.stdout[proc.stdout.index("{") :] if "{" in proc.stdout else "{}"
        return proc.returncode, json.loads(text), proc.stdout
    return proc.returncode, json.loads((artifacts / "summary.json").read_text()), proc.stdout


def drifted_tasks(report: dict[str, Any]) -> dict[str, str]:
    """'role : task' -> the details of its drifted results (joined) for the lab host."""
    tasks: dict[str, str] = {}
    for task in report["hosts"][LAB_HOST]["drifted"]:
        label = f"{task['role']} : {task['task']}" if task["role"] else task["task"]
        tasks[label] = tasks.get(label, "") + "\n" + (task["detail"] or "")
    return tasks


@pytest.fixture(scope="module")
def rounds(
    converged_lab: dict[str, object], inventory: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Converge with a key, tamper everything, `drift` (round 1); the rest happens in the tests below.
    Teardown: the lab converged back without a key (the state the other e2e tests share)."""
    art = tmp_path_factory.mktemp("drift-artifacts")
    CLOCK["start"] = time.monotonic()
    rc, _summary, out = run_cli("up", inventory, art / "keyed", "-e", f"sglang_api_key={KEY}")
    assert rc == 0, out[-4000:]
    [patch] = (REPO / "patches").glob("0004*.patch")
    lab_exec("sh", "-c", f"cat > /tmp/drift-0004.patch <<'EOF'\n{patch.read_text()}EOF")
    for name in ORDER:
        lab_exec("sh", "-c", TAMPERS[name][0])
    print(f"[drift-lab e2e +{elapsed()}] {len(TAMPERS)} tampers applied")
    rc, report, out = run_cli("drift", inventory, art / "drift1", "-e", f"sglang_api_key={KEY}")
    state: dict[str, Any] = {"inventory": inventory, "art": art, "drift_rc": rc, "report": report, "out": out}
    yield state
    rc, _summary, out = run_cli("up", inventory, art / "restore")
    assert rc == 0, out[-4000:]
    lab_exec("rm", "-rf", "/opt/sglang/wrong", "/tmp/drift-0004.patch")
    lab_exec("test", "-f", "/etc/sglang/nccl.env")  # round 2 repaired (asserts rc 0)
    print(f"[drift-lab e2e] this file took {elapsed()} (7 runs; the lab converged back without a key)")


def test_drift_exits_2_with_junit_failures(rounds: dict[str, Any]) -> None:
    assert rounds["drift_rc"] == 2, rounds["out"][-4000:]
    assert rounds["report"]["result"] == "drift"
    junit = (rounds["art"] / "drift1" / "junit.xml").read_text()
    assert "<failure" in junit
    assert "Create, install or repair the wheel toolkit" in junit


def find_task(tasks: dict[str, str], wanted: str) -> str | None:
    """The drifted task label equal to `wanted`, where the CLI's redactor may have masked a word
    (it printed 'Render the ******** unit' for 'Render the systemd unit')."""
    words = wanted.split()
    for label in tasks:
        have = label.split()
        if len(have) == len(words) and all(h in (w, MASK) for h, w in zip(have, words, strict=True)):
            return label
    return None


@pytest.mark.parametrize("name", ORDER)
def test_drift_names_the_task_of_each_tamper(rounds: dict[str, Any], name: str) -> None:
    _cmd, task, text = TAMPERS[name]
    tasks = drifted_tasks(rounds["report"])
    label = find_task(tasks, task)
    assert label is not None, f"{name}: {task!r} not among the drifted tasks {sorted(tasks)}"
    assert text in tasks[label], f"{name}: {text!r} not in the detail of {task!r}: {tasks[label][-2000:]}"


def test_one_up_repairs_everything_then_no_drift_and_no_change(rounds: dict[str, Any]) -> None:
    inv, art = rounds["inventory"], rounds["art"]
    rc, summary, out = run_cli("up", inv, art / "repair", "-e", f"sglang_api_key={KEY}")
    assert rc == 0, out[-6000:]
    assert summary["hosts"][LAB_HOST]["changed"] > 0
    assert lab_exec("readlink", "/opt/sglang/current").strip().startswith("releases/")
    assert not lab_exec("sh", "-c", f"ls {DROPIN} 2>/dev/null || true").strip()
    assert "x.conf" not in lab_exec("systemctl", "show", "-p", "DropInPaths", "sglang-kimi.service")
    assert not lab_exec("sh", "-c", f"ls {SP}/zz-drift.pth 2>/dev/null || true").strip()
    assert lab_exec("stat", "-c", "%a %U", "/etc/sglang/sglang-config.yaml").split() == ["600", "root"]
    assert lab_exec("systemctl", "is-enabled", "sglang-kimi.service", check=False).strip() == "enabled"
    assert "V13.0.88" in lab_exec("/opt/cuda/13.0.1/bin/nvcc", "--version")
    versions = lab_exec(
        PY,
        "-c",
        "import importlib.metadata as m; print(m.version('transformers'), m.version('flashinfer-cubin'))",
    )
    assert versions.split() == ["4.57.1", "0.6.4"]
    assert "NCCL_PROTO" not in lab_exec("cat", "/etc/sglang/nccl.env")

    rc, report, out = run_cli("drift", inv, art / "drift2", "-e", f"sglang_api_key={KEY}")
    assert rc == 0, out[-6000:]
    assert report["result"] == "clean"
    rc, summary, out = run_cli("up", inv, art / "again", "-e", f"sglang_api_key={KEY}")
    assert rc == 0, out[-4000:]
    assert summary["hosts"][LAB_HOST]["changed"] == 0, out[-6000:]


def test_deleted_nccl_env_file_is_reported(rounds: dict[str, Any]) -> None:
    """Round 2 (conflicts with the edited value of round 1); the teardown's run restores the file."""
    lab_exec("rm", "-f", "/etc/sglang/nccl.env")
    rc, report, out = run_cli(
        "drift", rounds["inventory"], rounds["art"] / "drift3", "-e", f"sglang_api_key={KEY}"
    )
    assert rc == 2, out[-4000:]
    assert find_task(drifted_tasks(report), "nccl_env : Render the environment file")
