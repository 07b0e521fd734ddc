"""Unit tests of the verify role's layer scripts (roles/verify/files/*.py, loaded from their paths):
nvidia-smi parsing and the comparison with preflight's facts (layer 1), the per-GPU kernel result
checks (layer 2), torch version / matmul checks (layer 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from modload import load_module

ROOT = Path(__file__).resolve().parents[1]
FILES = ROOT / "roles" / "verify" / "files"
RESULTS = ROOT / "bench" / "results" / "2026-11-30-h200x2-verify-layers.json"


gpu = load_module("verify_gpu", FILES / "verify_gpu.py")
cuda = load_module("verify_cuda", FILES / "verify_cuda.py")
torch_layer = load_module("verify_torch", FILES / "verify_torch.py")

SMI = (
    "0, NVIDIA H200, 9.0, 580.159.04, 143771, 00000000:00:06.0\n"
    "1, NVIDIA H200, 9.0, 580.159.04, 143771, 00000000:00:07.0\n"
)
EXPECT = {
    "count": 2,
    "names": ["NVIDIA H200", "NVIDIA H200"],
    "compute_capability": "9.0",
    "driver_version": "580.159.04",
}


def test_gpu_query_parsed() -> None:
    gpus = gpu.parse_query(SMI)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
        "driver_version": "580.159.04",
        "memory_mib": 143771,
        "pci_bus_id": "00000000:00:06.0",
    }
    assert gpu.parse_query("\n") == []
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        gpu.parse_query("No devices were found\n")


def test_gpu_agrees_with_preflight() -> None:
    assert gpu.compare(gpu.parse_query(SMI), EXPECT) == []


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"count": 3}, "nvidia-smi reports 2 GPU(s), preflight_gpu_count=3"),
        ({"names": ["NVIDIA H100", "NVIDIA H200"]}, "preflight_gpu_names"),
        ({"compute_capability": "12.0"}, "compute capability 9.0 != preflight_gpu_compute_capability 12.0"),
        ({"driver_version": "570.1"}, "driver 580.159.04 != preflight_driver_version 570.1"),
    ],
)
def test_gpu_disagreement_named(override: dict[str, object], needle: str) -> None:
    problems = gpu.compare(gpu.parse_query(SMI), {**EXPECT, **override})
    assert len(problems) == 1
    assert needle in problems[0]


def test_gpu_lowest_compute_capability_compared() -> None:
    mixed = gpu.parse_query("0, A, 12.0, 580.1\n1, B, 9.0, 580.1\n")
    assert gpu.compare(mixed, {"count": 2, "compute_capability": "9.0"}) == []


def test_uvm_nodes(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    state, problems = gpu.check_nodes(["/dev/null", str(plain), str(tmp_path / "gone")])
    assert state == {
        "/dev/null": "char device",
        str(plain): "not a character device",
        str(tmp_path / "gone"): "missing",
    }
    assert len(problems) == 2
    assert "gone missing" in problems[1]


def test_gpu_script_with_test_double(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    double = tmp_path / "nvidia-smi"
    double.write_text(f"#!/bin/sh\nprintf '{SMI.splitlines()[0]}\\n'\n")
    double.chmod(0o755)
    expect = json.dumps(EXPECT)
    assert (
        gpu.main(
            ["--smi-candidates", f"/nonexistent,{double}", "--expect", expect, "--uvm-nodes", "/dev/null"]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "failed"
    assert doc["reason"] == (
        "nvidia-smi reports 1 GPU(s), preflight_gpu_count=2; "
        "GPU names ['NVIDIA H200'] != preflight_gpu_names ['NVIDIA H200', 'NVIDIA H200']"
    )
    gpu.main(["--smi-candidates", "/nonexistent", "--expect", expect])
    assert json.loads(capsys.readouterr().out)["reason"] == "nvidia-smi not found in /nonexistent"


KERNEL_OK = (
    "GPU 0 name=NVIDIA H200 cc=9.0 result=ok mismatches=0 elements=4 checksum=30 expected=30 ms=0.0100\n"
    "GPU 1 name=NVIDIA H200 cc=9.0 result=ok mismatches=0 elements=4 checksum=34 expected=34 ms=0.0090\n"
)


def test_kernel_output_parsed() -> None:
    found = cuda.parse_output(KERNEL_OK)
    assert found[1]["name"] == "NVIDIA H200"
    assert found[1]["compute_capability"] == "9.0"
    assert found[1]["checksum"] == 34.0
    assert cuda.evaluate(found, [0, 1]) == []


def test_kernel_every_gpu_checked() -> None:
    wrong = KERNEL_OK.replace(
        "GPU 1 name=NVIDIA H200 cc=9.0 result=ok mismatches=0",
        "GPU 1 name=NVIDIA H200 cc=9.0 result=wrong mismatches=3",
    )
    assert cuda.evaluate(cuda.parse_output(wrong), [0, 1]) == [
        "GPU 1: kernel result mismatch (3 of 4 elements wrong)"
    ]
    only0 = KERNEL_OK.splitlines()[0]
    assert cuda.evaluate(cuda.parse_output(only0), [0, 1]) == [
        "GPU 1: no result (the kernel did not run there)"
    ]
    err = only0 + "\nGPU 1 CUDA_ERROR=out of memory at cudaMalloc(&a, n * sizeof(float))\n"
    assert cuda.evaluate(cuda.parse_output(err), [0, 1]) == [
        "GPU 1: CUDA error out of memory at cudaMalloc(&a, n * sizeof(float))"
    ]
    sums = KERNEL_OK.replace("checksum=30", "checksum=31")
    assert cuda.evaluate(cuda.parse_output(sums), [0]) == [
        "GPU 0: kernel result mismatch (checksum 31.0 != 30.0)"
    ]


def test_kernel_arch_flags() -> None:
    assert cuda.arch_flags("90") == ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    assert cuda.arch_flags("") == ["-arch=native"]
    with pytest.raises(ValueError, match="--arch"):
        cuda.arch_flags("sm_90")


def test_cuda_script_without_nvcc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cuda.main(["--home", str(tmp_path), "--gpus", "0,1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "status": "failed",
        "reason": f"no executable nvcc at {tmp_path}/bin/nvcc (cuda_toolkit_home)",
    }


def test_torch_versions() -> None:
    assert torch_layer.public_version("2.9.1+cu130") == "2.9.1"
    assert torch_layer.check_versions("2.9.1+cu130", "13.0", "2.9.1", "13.0") == []
    assert torch_layer.check_versions("2.11.0+cu130", "13.0", "", "") == []
    assert torch_layer.check_versions("2.11.0+cu130", "12.8", "2.9.1", "13.0") == [
        "torch 2.11.0+cu130 (public 2.11.0) != expected 2.9.1",
        "torch.version.cuda 12.8 != expected 13.0",
    ]
    assert torch_layer.check_versions("2.9.1", None, "", "13.0") == [
        "torch.version.cuda None != expected 13.0"
    ]


def test_torch_matmul_every_gpu() -> None:
    good = {0: {"rel_err": 2e-6}, 1: {"rel_err": 3e-6}}
    assert torch_layer.check_matmuls(good, [0, 1], 1e-4) == []
    assert torch_layer.check_matmuls({0: good[0]}, [0, 1], 1e-4) == ["GPU 1: no matmul result"]
    bad = {0: good[0], 1: {"rel_err": float("nan")}}
    assert torch_layer.check_matmuls(bad, [0, 1], 1e-4) == [
        "GPU 1: matmul differs from the CPU: relative error nan > 0.0001"
    ]
    assert torch_layer.check_matmuls({0: {"error": "boom"}}, [0], 1e-4) == ["GPU 0: matmul failed: boom"]


def test_recorded_device_run_passed_every_layer_on_both_gpus() -> None:
    results = json.loads(RESULTS.read_text())["results"]
    assert {k: v["status"] for k, v in results.items()} == {
        "gpu": "passed",
        "cuda": "passed",
        "torch": "passed",
        "nccl": "passed",
    }
    assert [g["index"] for g in results["cuda"]["gpus"]] == [0, 1]
    assert all(g["mismatches"] == 0 for g in results["cuda"]["gpus"])
    assert [g["index"] for g in results["torch"]["gpus"]] == [0, 1]
    assert results["nccl"]["env"]["NCCL_NVLS_ENABLE"] == "0"
