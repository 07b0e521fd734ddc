#!/usr/bin/env bash
# cuda_toolkit functional check (shipped by the role, run through ansible.builtin.script).
# Compiles a tiny vector-add kernel for every requested SM target, links it, and - when a GPU is
# there - runs it and checks the result. Works in a throw-away temp dir: no managed state changes.
# usage: cuda_selftest.sh --home CUDA_HOME --archs "90 120" --gpu auto|required|skip
# Output: KEY=VALUE lines (COMPILE_sm_90=ok, LINK=ok, GPU_RUN=ok|skipped:<why>, GPU_NAME=...).
set -euo pipefail
home="" archs="90 120" gpu=auto
while (($#)); do
  case "$1" in
    --home) home="$2"; shift 2 ;;
    --archs) archs="$2"; shift 2 ;;
    --gpu) gpu="$2"; shift 2 ;;
    *) echo "ERROR=unknown argument $1"; exit 2 ;;
  esac
done
nvcc="$home/bin/nvcc"
[[ -x "$nvcc" ]] || { echo "ERROR=no executable $nvcc"; exit 2; }
hostcxx="${CUDAHOSTCXX:-g++}"
command -v "$hostcxx" >/dev/null || {
  echo "ERROR=nvcc needs a host C++ compiler but '$hostcxx' is not on PATH (install g++ or set cuda_toolkit_install_host_compiler)"
  exit 3
}
work="$(mktemp -d "${TMPDIR:-/tmp}/cuda-toolkit-selftest.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat >"$work/selftest.cu" <<'CU'
#include <cstdio>
__global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA_ERROR=%s at %s\n", cudaGetErrorString(e), #x); return 2; } } while (0)
int main() {
  const int n = 1 << 20;
  float *a, *b, *c;
  CK(cudaMallocManaged(&a, n * sizeof(float)));
  CK(cudaMallocManaged(&b, n * sizeof(float)));
  CK(cudaMallocManaged(&c, n * sizeof(float)));
  for (int i = 0; i < n; ++i) { a[i] = (float)i; b[i] = 2.0f * (float)i; c[i] = -1.0f; }
  vadd<<<(n + 255) / 256, 256>>>(a, b, c, n);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  int bad = 0;
  for (int i = 0; i < n; ++i) if (c[i] != 3.0f * (float)i) ++bad;
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("GPU_RESULT=%s\nGPU_MISMATCHES=%d\nGPU_ELEMENTS=%d\nGPU_DEVICE_CC=%d.%d\n",
         bad ? "wrong" : "ok", bad, n, p.major, p.minor);
  return bad ? 1 : 0;
}
CU
gencode=()
for a in $archs; do
  # Device-only compile per target: proves cicc/ptxas of this toolkit support sm_$a.
  if "$nvcc" -arch="sm_$a" -cubin -o "$work/selftest_sm$a.cubin" "$work/selftest.cu" >"$work/sm$a.log" 2>&1; then
    echo "COMPILE_sm_$a=ok"
  else
    echo "COMPILE_sm_$a=failed"; sed 's/^/NVCC_LOG=/' "$work/sm$a.log" | tail -n 20; exit 4
  fi
  gencode+=(-gencode "arch=compute_$a,code=sm_$a")
done

gpu_cc=""
if [[ "$gpu" != skip ]] && command -v nvidia-smi >/dev/null && nvidia-smi -L >"$work/smi.txt" 2>&1 && grep -q '^GPU ' "$work/smi.txt"; then
  gpu_cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | tr -d ' .' || true)"
  echo "GPU_NAME=$(head -n1 "$work/smi.txt")"
  # Also build for the GPU actually present when it is not among the requested targets.
  if [[ -n "$gpu_cc" && " $archs " != *" $gpu_cc "* ]]; then gencode+=(-gencode "arch=compute_$gpu_cc,code=sm_$gpu_cc"); fi
fi
if "$nvcc" "${gencode[@]}" -L"$home/lib64" -o "$work/selftest" "$work/selftest.cu" >"$work/link.log" 2>&1; then
  echo "LINK=ok"
else
  echo "LINK=failed"; sed 's/^/NVCC_LOG=/' "$work/link.log" | tail -n 20; exit 5
fi

if [[ "$gpu" == skip ]]; then
  echo "GPU_RUN=skipped:disabled"
elif [[ -z "$(grep -s '^GPU ' "$work/smi.txt" || true)" ]]; then
  if [[ "$gpu" == required ]]; then echo "GPU_RUN=failed:no GPU visible to nvidia-smi"; exit 6; fi
  echo "GPU_RUN=skipped:no GPU"
elif "$work/selftest" >"$work/run.txt" 2>&1; then
  cat "$work/run.txt"; echo "GPU_RUN=ok"
else
  cat "$work/run.txt"; echo "GPU_RUN=failed"; exit 7
fi
