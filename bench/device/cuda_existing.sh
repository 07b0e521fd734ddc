#!/usr/bin/env bash
# Device check of roles/cuda_toolkit on a real GPU host (no network, no systemd needed):
# the `existing` method against the toolkit already at /usr/local/cuda-13.0, through ansible with
# connection=local. The role checks nvcc's build against the manifest, compiles the self-test
# kernel for sm_90 + sm_120 (+ the GPU's own arch) and RUNS it on the GPU (gpu_check=required).
# Run 1: no preflight facts (the script asks nvidia-smi). Run 2: with preflight-style facts taken
# from nvidia-smi (driver gate + GPU count). Run 3: --check must report 0 changed.
# Logs go to $OUT (default /tmp/cuda_existing_out).
# usage (repo root, ansible-core importable): bench/device/cuda_existing.sh [CUDA_PATH]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
cuda="${1:-/usr/local/cuda-13.0}"
out="${OUT:-/tmp/cuda_existing_out}"
mkdir -p "$out"
log="$out/cuda_existing.log"
: >"$log"
inv="$(mktemp)"
printf '[sglang_servers]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >"$inv"

say() { printf '\n===== %s =====\n' "$*" | tee -a "$log"; }
say "host"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  "$cuda/bin/nvcc" --version; echo "version.json:"; cat "$cuda/version.json" 2>&1 | head -n 4; } 2>&1 | tee -a "$log"

common=("${device_vars[@]}" -i "$inv" playbooks/cuda.yml -e cuda_toolkit_method=existing -e "cuda_toolkit_existing_path=$cuda"
  -e cuda_toolkit_gpu_check=required -e "cuda_toolkit_profile_path=$out/profile.d-cuda-toolkit.sh")
branch="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null | cut -d. -f1)"
count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"

rc=0
say "run 1: existing method, no preflight facts"
ansible-playbook "${common[@]}" 2>&1 | tee -a "$log"; r=${PIPESTATUS[0]}; ((r)) && rc=$r
say "run 2: with preflight facts driver_branch=$branch gpu_count=$count"
ansible-playbook "${common[@]}" -e "preflight_driver_branch=$branch" -e "preflight_gpu_count=$count" \
  -e preflight_cuda_driver_ok=true 2>&1 | tee -a "$log"; r=${PIPESTATUS[0]}; ((r)) && rc=$r
say "run 3: --check (must report changed=0)"
ansible-playbook "${common[@]}" --check 2>&1 | tee -a "$log"; r=${PIPESTATUS[0]}; ((r)) && rc=$r
say "summary"
grep -E '"msg": "(CUDA toolkit|concluded|nvcc release|driver gate)|GPU_|COMPILE_|LINK=|localhost +:' "$log" | tee "$out/summary.txt"
rm -f "$inv"
echo "exit $rc" | tee -a "$log"
exit "$rc"
