"""cuda_toolkit, wheel method: NVIDIA's 13.0.1 wheels in /opt/cuda/13.0.1, a usable bin/nvcc."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

PREFIX = "/opt/cuda/13.0.1"
KERNEL = r"""
#include <cstdio>
__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
int main() { printf("built\n"); return 0; }
"""


def test_nvcc_reports_13_0_1_build(host) -> None:
    out = host.check_output(f"{PREFIX}/bin/nvcc --version")
    assert "Cuda compilation tools, release 13.0, V13.0.88" in out


def test_prefix_looks_like_cuda_home(host) -> None:
    for d in ("bin", "include", "lib64", "nvvm"):
        assert host.file(f"{PREFIX}/{d}").is_symlink, d
    assert host.file(f"{PREFIX}/include/cuda_runtime.h").exists
    assert host.file(f"{PREFIX}/lib64/libcudart.so.13").exists
    pkgs = host.check_output(f"{PREFIX}/venv/bin/python -m pip list --format=freeze")
    assert "cuda-toolkit==13.0.1" in pkgs
    assert "nvidia-cuda-nvcc==13.0.88" in pkgs


def test_cu_file_compiles_for_sm_90_and_sm_120(host) -> None:
    host.run_expect([0], "mkdir -p /tmp/cutest")
    host.run_expect([0], f"cat > /tmp/cutest/k.cu <<'EOF'\n{KERNEL}\nEOF")
    for arch in ("90", "120"):
        cmd = host.run(
            f"{PREFIX}/bin/nvcc -arch=sm_{arch} -cubin -o /tmp/cutest/k{arch}.cubin /tmp/cutest/k.cu"
        )
        assert cmd.rc == 0, cmd.stderr
        assert host.file(f"/tmp/cutest/k{arch}.cubin").size > 0
    fat = host.run(
        f"{PREFIX}/bin/nvcc -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 "
        f"-L{PREFIX}/lib64 -o /tmp/cutest/k /tmp/cutest/k.cu && /tmp/cutest/k"
    )
    assert fat.rc == 0, fat.stderr
    assert fat.stdout.strip() == "built"


def test_host_compiler_and_profile_snippet(host) -> None:
    assert host.package("g++").is_installed
    assert host.package("python3-venv").is_installed
    out = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc'")
    assert out.splitlines() == [PREFIX, f"{PREFIX}/bin/nvcc"]


def test_offline_install_from_wheelhouse(host) -> None:
    """Air-gapped path: wheels in a directory, pip --no-index --find-links, second prefix."""
    host.run_expect(
        [0],
        f"{PREFIX}/venv/bin/python -m pip download -q -d /opt/wheelhouse "
        "'cuda-toolkit[nvcc,cudart,nvvm,crt]==13.0.1'",
    )
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="false", ANSIBLE_NOCOLOR="1")
    args = ["ansible-playbook", "-i", str(inventory), str(playbook)]
    args += [
        "-e",
        "cuda_toolkit_prefix=/opt/cuda-offline/13.0.1",
        "-e",
        "cuda_toolkit_wheelhouse=/opt/wheelhouse",
    ]
    args += ["-e", "cuda_toolkit_profile_snippet=false"]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    ver = host.check_output("/opt/cuda-offline/13.0.1/bin/nvcc --version")
    assert "release 13.0, V13.0.88" in ver
    host.run_expect([0], "rm -rf /opt/cuda-offline /opt/wheelhouse")


def test_deleted_nvcc_is_drift_repaired_by_a_run_and_selftest_cached(host) -> None:
    """nvcc deleted from the wheel toolkit: --check reports it as a change (no failure), a run
    reinstalls the wheels, and the next run skips the compile (same nvcc, same inputs)."""
    import moltest  # noqa: PLC0415 (molecule/shared on the verifier's path)

    nvcc = host.check_output(f"readlink -f {PREFIX}/bin/nvcc")
    host.run_expect([0], f"rm -f {nvcc} {PREFIX}/bin/ptxas")
    rc, out = moltest.run_playbook("converge.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    # reported by the module that reinstalls (sglang.deploy.release state venv), as its diff
    assert "Create, install or repair the wheel toolkit" in out, out[-4000:]
    assert "+++ after: drift: /opt/cuda/13.0.1: bin/nvcc is missing; missing bin/ptxas" in out, out[-4000:]
    assert "+cuda-toolkit 13.0.1 (reinstalled)" in out, out[-4000:]
    assert moltest.totals(out)["changed"] > 0
    assert not host.file(nvcc).exists, "check mode changed the toolkit"
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    version = host.check_output(f"{PREFIX}/bin/nvcc --version")
    assert "Cuda compilation tools, release 13.0, V13.0.88" in version
    assert host.file(f"{PREFIX}/bin/ptxas").exists
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert moltest.totals(out)["changed"] == 0, out[-4000:]
    assert "self-test passed before with this nvcc" in out, out[-4000:]


STATE_TASK = (
    "cuda_toolkit : Apply the toolkit's host state (prefix, requirements file, links, profile snippet)"
)
PROFILE = "/etc/profile.d/cuda-toolkit.sh"


def test_tampered_link_snippet_and_prefix_mode_reported_by_one_task_and_restored(host) -> None:
    """The role's host state is one description applied by one managed_state task: a retargeted
    lib64 link, an edited profile snippet and a chmodded prefix are each reported by --check --diff
    in that one task (nothing else changes, nothing is reinstalled, nothing written), then restored."""
    import moltest  # noqa: PLC0415 (molecule/shared on the verifier's path)

    lib64 = host.check_output(f"readlink {PREFIX}/lib64")
    snippet = host.file(PROFILE).content_string
    host.run_expect(
        [0],
        f"ln -sfn /tmp {PREFIX}/lib64 && echo 'export CUDA_HOME=/elsewhere' >> {PROFILE}"
        f" && chmod 0700 {PREFIX}",
    )
    rc, out = moltest.run_playbook("converge.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    assert moltest.changed_tasks(out) == [STATE_TASK], out[-4000:]
    assert moltest.totals(out)["changed"] == 1, out[-4000:]
    assert '"src": "/tmp"' in out, out[-4000:]
    assert f'"src": "{lib64}"' in out, out[-4000:]
    assert "-export CUDA_HOME=/elsewhere" in out, out[-4000:]
    assert '"mode": "0700"' in out, out[-4000:]
    assert host.check_output(f"readlink {PREFIX}/lib64") == "/tmp", "check mode changed the link"
    assert host.file(PREFIX).mode == 0o700, "check mode changed the prefix"
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert moltest.changed_tasks(out) == [STATE_TASK], out[-4000:]
    assert host.check_output(f"readlink {PREFIX}/lib64") == lib64
    assert host.file(PROFILE).content_string == snippet
    prefix = host.file(PREFIX)
    assert (prefix.user, prefix.group, prefix.mode) == ("root", "root", 0o755)
    rc, out = moltest.run_playbook("converge.yml", "--check")
    assert rc == 0, out[-4000:]
    assert moltest.totals(out)["changed"] == 0, out[-4000:]
