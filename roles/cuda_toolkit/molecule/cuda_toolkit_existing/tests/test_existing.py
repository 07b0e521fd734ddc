"""cuda_toolkit, existing method: adopt the right toolkit, reject wrong ones and bad input.

The converge adopted /opt/fake-cuda/good (fake nvcc V13.0.88 + version.json 13.0.1). These tests
re-run the converge playbook with -e overrides against the same container and read the result.
"""

from __future__ import annotations

import moltest
import pytest

# Files written after the converge (the profile snippet is the last write of this scenario: the
# host state task writes it, and with the compile check off nothing is written after it).
NEWER_FILES = (
    "find / -xdev -newer /etc/profile.d/cuda-toolkit.sh -type f "
    "-not -path '/proc/*' -not -path '/tmp/*' -not -path '/root/.ansible/*' | sort"
)


def run_role(*extra: str) -> tuple[int, str]:
    return moltest.run_playbook("converge.yml", extra=extra, timeout=600)


def changed(out: str) -> int:
    return moltest.totals(out)["changed"]


def test_profile_snippet_points_at_adopted_toolkit(host) -> None:
    f = host.file("/etc/profile.d/cuda-toolkit.sh")
    assert f.exists
    assert f.mode == 0o644
    out = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc'")
    assert out.splitlines() == ["/opt/fake-cuda/good", "/opt/fake-cuda/good/bin/nvcc"]


def test_nothing_installed(host) -> None:
    assert not host.file("/opt/cuda").exists
    assert not host.file("/etc/apt/sources.list.d/nvidia-cuda.sources").exists
    assert not host.package("g++").is_installed


def test_conclusion_is_reported() -> None:
    rc, out = run_role()
    assert rc == 0, out[-3000:]
    assert changed(out) == 0
    assert "CUDA toolkit 13.0.1 (nvcc V13.0.88, /opt/fake-cuda/good/version.json cuda.version=13.0.1)" in out


@pytest.mark.parametrize(
    ("path", "found"),
    [
        ("/opt/fake-cuda/wrong-13.0.48", "found nvcc release 13.0, V13.0.48 (= CUDA 13.0.0)"),
        (
            "/opt/fake-cuda/wrong-12.8",
            "found nvcc release 12.8, V12.8.93 (= CUDA release not in sglang_cuda_nvcc_builds)",
        ),
    ],
)
def test_wrong_toolkit_rejected_with_found_vs_expected(path: str, found: str) -> None:
    rc, out = run_role(f"cuda_toolkit_existing_path={path}")
    assert rc != 0
    flat = " ".join(out.split())
    assert found in flat, out[-3000:]
    assert "expected release 13.0, V13.0.88 (= CUDA 13.0.1, sglang_cuda_version)" in flat, out[-3000:]


def test_missing_toolkit_rejected() -> None:
    rc, out = run_role("cuda_toolkit_existing_path=/opt/no-such-cuda")
    assert rc != 0
    assert "cuda_toolkit_existing_path=/opt/no-such-cuda has no executable bin/nvcc" in " ".join(out.split())


def test_same_nvcc_build_other_release_accepted_unless_exact_required() -> None:
    path = "cuda_toolkit_existing_path=/opt/fake-cuda/same-build-13.0.2"
    rc, out = run_role(path)
    flat = " ".join(out.split())
    assert rc == 0, out[-3000:]
    assert "NOT the pinned 13.0.1, accepted: same nvcc build V13.0.88" in flat
    rc, out = run_role(path, "cuda_toolkit_require_exact_release=true")
    assert rc != 0
    flat = " ".join(out.split())
    assert "is CUDA 13.0.2" in flat
    assert "expected 13.0.1" in flat
    # Leave the host as converged.
    assert run_role()[0] == 0


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        (["cuda_toolkit_method=yum"], ["cuda_toolkit_method", "yum", "auto, apt, wheel, existing"]),
        (
            ["cuda_toolkit_expected_version=13.0"],
            ['cuda_toolkit_expected_version="13.0" is not valid', "X.Y.Z"],
        ),
        (
            ["sglang_cuda_version=13.0.1rc1"],
            ['cuda_toolkit_expected_version="13.0.1rc1" is not valid', "sglang_cuda_version"],
        ),
        (
            ["cuda_toolkit_method=wheel", "cuda_toolkit_prefix=opt/cuda"],
            ['cuda_toolkit_prefix="opt/cuda" is not valid: allowed a path starting with /'],
        ),
        (
            ["cuda_toolkit_method=wheel", "cuda_toolkit_wheelhouse=wheels"],
            ['cuda_toolkit_wheelhouse="wheels" is not valid: allowed a path starting with /'],
        ),
        (["cuda_toolkit_gpu_check=maybe"], ["cuda_toolkit_gpu_check", "auto, required, skip"]),
    ],
)
def test_bad_input_rejected_before_any_change(host, extra: list[str], names: list[str]) -> None:
    before = host.check_output(NEWER_FILES)
    rc, out = run_role(*extra)
    flat = " ".join(out.split())
    assert rc != 0, out[-3000:]
    for n in names:
        assert n in flat, out[-3000:]
    assert changed(out) == 0
    after = host.check_output(NEWER_FILES)
    assert before == after
    assert not host.file("/opt/cuda").exists


def test_driver_gate() -> None:
    rc, out = run_role("preflight_driver_branch=535")
    flat = " ".join(out.split())
    assert rc != 0
    assert "preflight found NVIDIA driver branch 535 (preflight_driver_branch)" in flat
    assert "needs R580+ (sglang_driver_min_branch)" in flat
    rc, out = run_role("preflight_driver_branch=535", "cuda_toolkit_allow_driver_mismatch=true")
    assert rc == 0, out[-3000:]
    rc, out = run_role("preflight_driver_branch=580", "preflight_cuda_driver_ok=true")
    assert rc == 0, out[-3000:]
    assert "driver gate: branch 580" in " ".join(out.split())
