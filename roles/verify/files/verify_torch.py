"""verify layer 3 (torch): run with the deployed release venv's python. torch's version and
`torch.version.cuda` are the pinned ones, it sees the tp group's GPUs, and a matmul on EVERY one
of them agrees with the same matmul on the CPU.

usage: verify_torch.py --gpus 0,1 [--expect-version 2.9.1] [--expect-cuda 13.0] [--size 2048]
                       [--rtol 1e-4]
An empty --expect-* records the value without checking it. Prints one JSON document; exit 0
(the role decides), also when torch cannot be imported (status failed, reason says why).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any


def public_version(version: str) -> str:
    """'2.9.1+cu130' -> '2.9.1' (PEP 440 public part: the local tag after '+' dropped)."""
    return version.split("+", 1)[0].strip()


def check_versions(
    torch_version: str, torch_cuda: str | None, expect_version: str, expect_cuda: str
) -> list[str]:
    problems = []
    if expect_version and public_version(torch_version) != expect_version:
        problems.append(
            f"torch {torch_version} (public {public_version(torch_version)}) != expected {expect_version}"
        )
    if expect_cuda and (torch_cuda or "") != expect_cuda:
        problems.append(f"torch.version.cuda {torch_cuda} != expected {expect_cuda}")
    return problems


def check_matmuls(results: Mapping[int, Mapping[str, Any]], gpus: Sequence[int], rtol: float) -> list[str]:
    """Each GPU of the tp group needs a result whose relative error vs the CPU is <= rtol."""
    problems = []
    for gpu in gpus:
        r = results.get(gpu)
        if r is None:
            problems.append(f"GPU {gpu}: no matmul result")
        elif r.get("error"):
            problems.append(f"GPU {gpu}: matmul failed: {r['error']}")
        elif not r.get("rel_err", float("inf")) <= rtol:  # also catches NaN
            problems.append(
                f"GPU {gpu}: matmul differs from the CPU: relative error {r.get('rel_err')} > {rtol}"
            )
    return problems


def _matmul(torch: Any, gpu: int, size: int) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(1234 + gpu)
    a = torch.randn(size, size, generator=gen, dtype=torch.float32)
    b = torch.randn(size, size, generator=gen, dtype=torch.float32)
    ref = a @ b
    dev = torch.device("cuda", gpu)
    start = time.perf_counter()
    out = (a.to(dev) @ b.to(dev)).cpu()
    elapsed = time.perf_counter() - start
    rel = float((out - ref).abs().max() / ref.abs().max())
    return {
        "index": gpu,
        "name": torch.cuda.get_device_name(gpu),
        "shape": [size, size],
        "dtype": "float32 (TF32 off)",
        "rel_err": rel,
        "seconds": round(elapsed, 4),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    gpus = [int(g) for g in args.gpus.split(",") if g != ""]
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    except Exception as exc:
        return {"status": "failed", "reason": f"{sys.executable}: cannot import torch: {exc}"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problems = check_versions(torch.__version__, torch.version.cuda, args.expect_version, args.expect_cuda)
    doc: dict[str, Any] = {
        "python": sys.executable,
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "expected": {"version": args.expect_version, "cuda": args.expect_cuda},
        "cuda_available": bool(torch.cuda.is_available()),
        "device_count": int(torch.cuda.device_count()) if torch.cuda.is_available() else 0,
    }
    results: dict[int, dict[str, Any]] = {}
    if doc["device_count"] < len(gpus):
        problems.append(f"torch sees {doc['device_count']} GPU(s), the tp group needs {len(gpus)}")
    for gpu in gpus:
        if gpu >= doc["device_count"]:
            continue
        try:
            results[gpu] = _matmul(torch, gpu, args.size)
        except Exception as exc:
            results[gpu] = {
                "index": gpu,
                "error": traceback.format_exception_only(type(exc), exc)[-1].strip(),
            }
    problems += check_matmuls(results, gpus, args.rtol) if doc["device_count"] >= len(gpus) else []
    doc["gpus"] = [results[g] for g in gpus if g in results]
    doc["status"] = "failed" if problems else "passed"
    worst = max((r.get("rel_err", 0.0) for r in doc["gpus"]), default=0.0)
    doc["reason"] = (
        "; ".join(problems)
        if problems
        else f"torch {torch.__version__} (CUDA {torch.version.cuda}), {args.size}x{args.size} fp32 matmul on "
        f"GPU(s) {args.gpus} matches the CPU (max relative error {worst:.2e} <= {args.rtol:g})"
    )
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", required=True, help="comma list of device indices (the tp group)")
    p.add_argument(
        "--expect-version", default="", help="torch public version, e.g. 2.9.1; empty: not checked"
    )
    p.add_argument("--expect-cuda", default="", help="torch.version.cuda, e.g. 13.0; empty: not checked")
    p.add_argument("--size", type=int, default=2048, help="square matrix size")
    p.add_argument("--rtol", type=float, default=1e-4, help="max |gpu - cpu| / max |cpu|")
    args = p.parse_args(argv)
    try:
        doc = run(args)
    except Exception as exc:
        doc = {"status": "failed", "reason": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
