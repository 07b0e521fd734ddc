"""bench/device/*.sh on this CPU machine, far enough to catch what broke them on the GPU host: every
script sources bench/device/env.sh (the collection path, a callbacks setting ansible-core 2.19 accepts,
the lab's model directory for preflight's model checks) and runs its playbooks with no checkout
ansible.cfg and no .collections link. A TEST DOUBLE of nvidia-smi (the GPU cannot exist here) prints
the recorded single-H200 host's answers; each script must get through preflight on them and stop
only where a GPU or the CUDA toolkit is needed, never at start-up."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from modload import REPO

SAMPLES = REPO / "tests" / "data" / "nvidia-smi"
START_UP_FAILURES = (
    "couldn't resolve module/action",
    "A non-empty plugin name is required",
    "could not find the requested",  # a role or collection missing
    "ERROR! the role",
    "unable to find",
    # bench/device/ansible.cfg's inventory read as paths: every file of bench/device/ parsed, the
    # executable ones RUN as inventory scripts (bench/device/inventory.yml says why)
    "as an inventory source",
    "Failed to parse inventory",
)


@pytest.fixture(scope="module")
def device_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("device")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    query = (SAMPLES / "h200x1.query-gpu.csv").read_text()
    topo = (SAMPLES / "h200x1.topo-m.txt").read_text()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n# TEST DOUBLE of nvidia-smi (tests/test_device_scripts.py): a single-H200 host\n"
        'case "$*" in\n'
        "  -L) echo 'GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)' ;;\n"
        "  topo*) printf '%s' " + shlex.quote(topo) + " ;;\n"
        "  *--format=csv,nounits*) printf '%s' " + shlex.quote(query) + " ;;\n"
        "  *driver_version*noheader*) echo 580.159.04 ;;\n"
        "  *noheader*) echo 'NVIDIA H200, 580.159.04, 9.0' ;;\n"
        "  *) exit 2 ;;\n"
        "esac\n"
    )
    smi.chmod(0o755)
    venv_bin = Path(sys.executable).parent
    # a bare host: no checkout ansible.cfg, no ANSIBLE_* of this machine; python3 is the one with ansible
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = f"{bin_dir}:{venv_bin}:/usr/bin:/bin:/usr/sbin:/sbin"
    env["LC_ALL"] = "C.UTF-8"
    # this machine's OS stands in for the GPU host's Ubuntu 24.04 (the double is no lab host)
    env["SGLANG_DEVICE_EXTRA_VARS"] = '{"sglang_os_distribution": "Debian", "sglang_os_version": "12"}'
    return env


def run_script(env: dict[str, str], out: Path, *argv: str) -> tuple[int, str]:
    proc = subprocess.run(
        [str(REPO / "bench" / "device" / argv[0]), *argv[1:]],
        cwd="/", env={**env, "OUT": str(out)}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def assert_started(out: str) -> None:
    for failure in START_UP_FAILURES:
        assert failure not in out, out[-4000:]
    assert "host pattern, ignoring: sglang_servers" not in out, out[-4000:]


def test_the_device_config_reads_one_inventory_file_and_runs_no_script(device_env: dict[str, str]) -> None:
    """bench/device/ansible.cfg's inventory is its inventory.yml and nothing else: `inventory = localhost,`
    there made ansible parse every file of bench/device/ as an inventory source and execute the device
    scripts (autotune_nccl.sh ran its repetitions) at the start of every playbook run."""
    proc = subprocess.run(
        ["bash", "-c", "source bench/device/env.sh; trap device_cleanup EXIT; ansible-inventory --list -vvv"],
        cwd=REPO, env=device_env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert_started(out)
    assert f"Parsed {REPO / 'bench' / 'device' / 'inventory.yml'} inventory source" in out, out[-4000:]
    assert "autotune_nccl" not in out, out[-4000:]
    assert "repetition" not in out, out[-4000:]


def test_preflight_real_passes_preflight_and_stops_at_the_missing_toolkit(
    device_env: dict[str, str], tmp_path: Path
) -> None:
    rc, out = run_script(device_env, tmp_path, "preflight_real.sh", "1", "/nonexistent/cuda-13.0")
    assert_started(out)
    # preflight ran on the double's answers (the probe module of the collection, the model checks)...
    assert "TASK [preflight : Probe the host" in out
    assert "TASK [cuda_toolkit :" in out, out[-4000:]
    # ...and the run stopped where the CUDA toolkit is needed, not before
    assert "/nonexistent/cuda-13.0" in out
    # the bad tp size was refused by preflight
    assert 'sglang_tp_size="4" does not fit the 1 GPU(s)' in out, out[-4000:]
    # and a model under /tmp, which the unit's PrivateTmp=yes would hide, by preflight's model checks
    assert "PrivateTmp=yes" in out, out[-4000:]
    assert "a model under /tmp was NOT rejected" not in out, out[-4000:]
    assert rc != 0  # no CUDA toolkit here


def test_cuda_existing_reaches_the_toolkit_role(device_env: dict[str, str], tmp_path: Path) -> None:
    rc, out = run_script(device_env, tmp_path, "cuda_existing.sh", "/nonexistent/cuda-13.0")
    assert_started(out)
    assert "TASK [cuda_toolkit :" in out, out[-4000:]
    assert "/nonexistent/cuda-13.0" in out
    assert rc != 0


def test_verify_layers_passes_preflight(device_env: dict[str, str], tmp_path: Path) -> None:
    rc, out = run_script(device_env, tmp_path, "verify_layers.sh", "/nonexistent/cuda-13.0", "2.9.1")
    assert_started(out)
    assert "TASK [preflight : Probe the host" in out
    assert "TASK [cuda_toolkit :" in out, out[-4000:]
    assert rc != 0


def test_nccl_profiles_renders_with_the_collection(device_env: dict[str, str], tmp_path: Path) -> None:
    _rc, out = run_script(device_env, tmp_path, "nccl_profiles.sh", str(tmp_path / "profiles"), "default")
    assert_started(out)
    # the role rendered the file (the script prints it), then the benchmark needs torch and a GPU
    assert "===== default: /tmp/nccl-default.env" in out, out[-4000:]
    assert "# Managed by Ansible (role nccl_env)" in out, out[-4000:]
    assert "# profile: none (requested: none" in out, out[-4000:]


def test_autotune_nccl_on_one_gpu_reports_the_nccl_part_skipped(
    device_env: dict[str, str], tmp_path: Path
) -> None:
    # one GPU: no all-reduce to tune; the script must say so and exit 0, not render a record it has not
    # got (seen on the lent 1-GPU H200, 2026-12-05: "choices differ: run 1 [] run 2 []", exit 0)
    rc, out = run_script(device_env, tmp_path, "autotune_nccl.sh")
    assert_started(out)
    assert "autotune NCCL part skipped: tp 1 (no all-reduce)" in out, out[-4000:]
    assert "autotune NCCL skipped: 1 GPU (tp 1, no all-reduce); no record written" in out, out[-4000:]
    assert "choices differ" not in out
    assert rc == 0, out[-4000:]
