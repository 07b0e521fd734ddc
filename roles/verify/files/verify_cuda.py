"""verify layer 2 (CUDA): the toolkit of the cuda_toolkit role compiles a kernel, and it runs on
EVERY GPU of the tp group (the cuda_toolkit role's self-test runs on GPU 0 only), each result
checked element by element.

usage: verify_cuda.py --home CUDA_HOME --gpus 0,1 [--arch 90] [--elements 4194304]
Prints one JSON document {"status": ..., "reason": ..., "gpus": [{index, name, cc, result, ...}]};
exit 0 (the role decides). The kernel uses plain device memory (cudaMalloc + cudaMemcpy), never
managed memory. Standard library only: runs with the host's python; needs nvcc's host compiler.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# One line per device: GPU <index> name=<..> cc=<x.y> result=ok|wrong mismatches=<n> elements=<n>
# checksum=<sum of c> expected=<expected sum> ms=<kernel time>. CUDA_ERROR lines on failures.
KERNEL = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
__global__ void fma_kernel(const float *a, const float *b, float *c, float k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * k + b[i];
}
#define CK(dev, x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("GPU %d CUDA_ERROR=%s at %s\n", dev, cudaGetErrorString(e), #x); fflush(stdout); failed = 1; \
  goto next; } } while (0)
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int failed = 0;
  for (int arg = 2; arg < argc; ++arg) {
    int dev = atoi(argv[arg]);
    float *a = nullptr, *b = nullptr, *c = nullptr;
    std::vector<float> ha(n), hb(n), hc(n, -1.0f);
    cudaDeviceProp p;
    cudaEvent_t t0, t1;
    float ms = 0.0f, k = 3.0f;
    long long bad = 0;
    double sum = 0.0, expect = 0.0;
    // Exact in fp32: values < 2^24. The device index enters the data, so each GPU computes its own.
    for (int i = 0; i < n; ++i) { ha[i] = (float)(i % 4096); hb[i] = (float)(dev + 1); }
    CK(dev, cudaSetDevice(dev));
    CK(dev, cudaGetDeviceProperties(&p, dev));
    CK(dev, cudaMalloc(&a, n * sizeof(float)));
    CK(dev, cudaMalloc(&b, n * sizeof(float)));
    CK(dev, cudaMalloc(&c, n * sizeof(float)));
    CK(dev, cudaMemcpy(a, ha.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(dev, cudaMemcpy(b, hb.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(dev, cudaEventCreate(&t0));
    CK(dev, cudaEventCreate(&t1));
    CK(dev, cudaEventRecord(t0));
    fma_kernel<<<(n + 255) / 256, 256>>>(a, b, c, k, n);
    CK(dev, cudaGetLastError());
    CK(dev, cudaEventRecord(t1));
    CK(dev, cudaDeviceSynchronize());
    CK(dev, cudaEventElapsedTime(&ms, t0, t1));
    CK(dev, cudaMemcpy(hc.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      float want = ha[i] * k + hb[i];
      if (hc[i] != want) ++bad;
      sum += hc[i];
      expect += want;
    }
    printf("GPU %d name=%s cc=%d.%d result=%s mismatches=%lld elements=%d "
           "checksum=%.0f expected=%.0f ms=%.4f\n",
           dev, p.name, p.major, p.minor, bad ? "wrong" : "ok", bad, n, sum, expect, ms);
    fflush(stdout);
    if (bad) failed = 1;
  next:
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    if (c) cudaFree(c);
  }
  return failed;
}
"""

_LINE = re.compile(r"^GPU (?P<index>\d+) (?P<rest>.*)$")
_FIELD = re.compile(r"(\w+)=((?:(?! \w+=).)*)")


def parse_output(text: str) -> dict[int, dict[str, Any]]:
    """The binary's stdout -> {device index: {name, cc, result, mismatches, ...} or {error}}."""
    found: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        index = int(m["index"])
        fields = {k: v.strip() for k, v in _FIELD.findall(m["rest"])}
        entry = found.setdefault(index, {"index": index})
        if "CUDA_ERROR" in fields:
            entry["error"] = fields["CUDA_ERROR"]
            entry["result"] = "error"
            continue
        entry.update(
            name=fields.get("name", ""),
            compute_capability=fields.get("cc", ""),
            result=fields.get("result", ""),
            mismatches=int(fields.get("mismatches", "-1")),
            elements=int(fields.get("elements", "0")),
            checksum=float(fields.get("checksum", "nan")),
            expected=float(fields.get("expected", "nan")),
            kernel_ms=float(fields.get("ms", "nan")),
        )
    return found


def evaluate(found: Mapping[int, Mapping[str, Any]], gpus: Sequence[int]) -> list[str]:
    """Per GPU of the tp group: a line must exist, result ok, 0 mismatches, checksum = expected."""
    problems = []
    for gpu in gpus:
        r = found.get(gpu)
        if r is None:
            problems.append(f"GPU {gpu}: no result (the kernel did not run there)")
        elif r.get("error"):
            problems.append(f"GPU {gpu}: CUDA error {r['error']}")
        elif r.get("result") != "ok" or r.get("mismatches") != 0:
            problems.append(
                f"GPU {gpu}: kernel result mismatch"
                f" ({r.get('mismatches')} of {r.get('elements')} elements wrong)"
            )
        elif r.get("checksum") != r.get("expected"):
            problems.append(
                f"GPU {gpu}: kernel result mismatch (checksum {r.get('checksum')} != {r.get('expected')})"
            )
    return problems


def arch_flags(arch: str) -> list[str]:
    """'90' -> SASS for sm_90 + PTX for compute_90; '' -> -arch=native (the GPUs present)."""
    if not arch:
        return ["-arch=native"]
    if not arch.isdigit():
        raise ValueError(f"--arch {arch!r}: use digits, e.g. 90")
    return ["-gencode", f"arch=compute_{arch},code=[sm_{arch},compute_{arch}]"]


def run(args: argparse.Namespace) -> dict[str, Any]:
    gpus = [int(g) for g in args.gpus.split(",") if g != ""]
    nvcc = Path(args.home) / "bin" / "nvcc"
    if not os.access(nvcc, os.X_OK):
        return {"status": "failed", "reason": f"no executable nvcc at {nvcc} (cuda_toolkit_home)"}
    with tempfile.TemporaryDirectory(prefix="verify-cuda.") as tmp:
        src, exe = Path(tmp) / "verify.cu", Path(tmp) / "verify"
        src.write_text(KERNEL, encoding="utf-8")
        cmd = [str(nvcc), *arch_flags(args.arch), f"-L{args.home}/lib64", "-o", str(exe), str(src)]
        build = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        if build.returncode != 0:
            log = (build.stdout + build.stderr).strip().splitlines()[-5:]
            return {"status": "failed", "reason": f"nvcc failed ({' '.join(cmd[1:-3])}): {' | '.join(log)}"}
        proc = subprocess.run(
            [str(exe), str(args.elements), *map(str, gpus)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    found = parse_output(proc.stdout)
    problems = evaluate(found, gpus)
    if proc.returncode != 0 and not problems:
        problems.append(f"kernel binary exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    results = [found.get(g, {"index": g, "result": "missing"}) for g in gpus]
    names = sorted({str(r.get("name")) for r in results})
    return {
        "status": "failed" if problems else "passed",
        "reason": "; ".join(problems)
        if problems
        else f"kernel compiled with {nvcc} ran on GPU(s) {args.gpus} ({'/'.join(names)}), "
        f"{args.elements} elements each, 0 mismatches",
        "nvcc": str(nvcc),
        "arch": args.arch or "native",
        "gpus": results,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--home", required=True, help="CUDA toolkit home (bin/nvcc)")
    p.add_argument("--gpus", required=True, help="comma list of device indices (the tp group)")
    p.add_argument("--arch", default="", help="SM target digits, e.g. 90; empty: -arch=native")
    p.add_argument("--elements", type=int, default=1 << 22)
    args = p.parse_args(argv)
    try:
        doc = run(args)
    except Exception as exc:
        doc = {"status": "failed", "reason": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
