#!/usr/bin/env bash
# Measure NCCL all-reduce for each NCCL profile / candidate on this GPU host. Every env file is
# rendered by the nccl_env role (ansible-playbook, connection local), then sourced before the
# benchmark. NVLink multicast stays off in every run (shared hosts: it can take GPUs down).
# usage: bench/device/nccl_profiles.sh OUTDIR [RUN ...]    (default RUNs: all below)
# RUN: default pcie nvlink auto | c_<name> (candidates: see CANDIDATES)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
out="${1:?usage: $0 OUTDIR [RUN ...]}"; shift
mkdir -p "$out"
export ANSIBLE_PYTHON_INTERPRETER="${ANSIBLE_PYTHON_INTERPRETER:-$(command -v python3)}"

# name -> ansible extra vars (JSON). `default` renders profile none: only the safety vars.
declare -A CANDIDATES=(
  [default]='{"nccl_env_profile": "none"}'
  [pcie]='{"nccl_env_profile": "pcie"}'
  [nvlink]='{"nccl_env_profile": "nvlink"}'
  [auto]='{"nccl_env_profile": "auto"}'
  [c_ll]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_PROTO": "LL"}}'
  [c_ll_ll128]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_PROTO": "LL,LL128"}}'
  [c_ll_simple]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_PROTO": "LL,Simple"}}'
  [c_ring]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_ALGO": "Ring"}}'
  [c_ll_ring]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}}'
  [c_nch8]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_MAX_NCHANNELS": 8}}'
  [c_nch16]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_MAX_NCHANNELS": 16}}'
  [c_nthreads512]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_NTHREADS": 512}}'
  [c_buff16m]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_BUFFSIZE": 16777216}}'
  [c_p2p_sys]='{"nccl_env_profile": "none", "nccl_env_extra": {"NCCL_P2P_LEVEL": "SYS"}}'
)
runs=("$@")
[[ ${#runs[@]} -gt 0 ]] || runs=(default pcie nvlink auto c_ll c_ll_ll128 c_ll_simple c_ring c_ll_ring c_nch8 c_nch16
                               c_nthreads512 c_buff16m c_p2p_sys)
rc=0
for run in "${runs[@]}"; do
  label="${run%%@*}"            # RUN@2 repeats a run under the same label (drift check)
  extra="${CANDIDATES[$label]:-}"
  [[ -n "$extra" ]] || { echo "unknown run $run" >&2; rc=1; continue; }
  envfile="/tmp/nccl-$label.env"
  if ! ansible-playbook bench/device/render_nccl_env.yml -e "nccl_env_file=$envfile" -e "$extra" \
        >>"$out/ansible.log" 2>&1; then
    echo "render $run FAILED (see ansible.log)"; tail -20 "$out/ansible.log"; rc=1; continue
  fi
  { echo "===== $run: $envfile"; cat "$envfile"; } | tee -a "$out/envfiles.txt"
  (
    set -a; . "$envfile"; set +a
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    timeout 120 python3 bench/nccl_allreduce.py --label "$label" --json "$out/results.jsonl" ${NCCL_BENCH_ARGS:---graph}
  ) 2>&1 | tee -a "$out/bench.log" || rc=1
done
python3 bench/nccl_allreduce.py --compare "$out/results.jsonl" | tee "$out/compare.md"
exit $rc
