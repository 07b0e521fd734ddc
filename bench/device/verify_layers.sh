#!/usr/bin/env bash
# Layers 1-4 of roles/verify for real on a GPU host (no network, no systemd needed), through
# ansible-playbook with connection local: preflight (sglang_gpu_required=true, tp = all GPUs),
# cuda_toolkit with the existing toolkit, nccl_env rendering its file to a temp path, then
# playbooks/verify.yml with the host's own python3/torch standing in for the release venv.
# Then two runs that must FAIL naming their layer (a missing device node; an impossible busbw
# floor) and the benchmark wrapper bench/nccl_allreduce.py (it loads the role's implementation).
# Run 1 also writes the production document from those live facts (verify_doc_write=always; layer 5
# listed in verify_skip_layers: no SGLang server on such a host) to $OUT/production_v2.md.
# Output in $OUT (default /tmp/verify_layers_out): verify_layers.log, verify-results.json, production_v2.md.
# usage (repo root, ansible-core importable): bench/device/verify_layers.sh [CUDA_PATH] [TORCH_EXPECT]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
cuda="${1:-/usr/local/cuda-13.0}"
py="$(command -v python3)"
torch_expect="${2:-$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')}"
out="${OUT:-/tmp/verify_layers_out}"
mkdir -p "$out"
log="$out/verify_layers.log"
: >"$log"
n="$(nvidia-smi -L | grep -c '^GPU ')"
inv="$(mktemp -d)"
printf '[sglang_servers]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n' "$py" >"$inv/hosts"
ln -s "$PWD/group_vars" "$inv/group_vars"

say() { printf '\n===== %s =====\n' "$*" | tee -a "$log"; }
say "host"
{ nvidia-smi -L; nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader
  ls -l /dev/nvidia*; "$cuda/bin/nvcc" --version | tail -n 2
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} 2>&1 | tee -a "$log"

vars=("${device_vars[@]}" -e sglang_gpu_required=true -e "sglang_tp_size=$n" -e sglang_api_key_required=false
  -e "sglang_model_path=$device_model" -e "sglang_draft_model_path=$device_drafter"
  -e sglang_root=/tmp/sglang -e sglang_min_free_disk_gib=1
  -e cuda_toolkit_method=existing -e "cuda_toolkit_existing_path=$cuda" -e cuda_toolkit_gpu_check=required
  -e "cuda_toolkit_profile_path=$out/profile.d-cuda-toolkit.sh" -e sglang_nccl_env_file=/tmp/verify-nccl.env
  -e "verify_python=$py" -e "verify_torch_expect_version=$torch_expect")
rc=0
say "run 1: preflight + cuda_toolkit (existing) + nccl_env + verify layers 1-4, tp=$n"
ansible-playbook -i "$inv/hosts" bench/device/verify_layers.yml "${vars[@]}" \
  -e "verify_results_file=$out/verify-results.json" -e '{"verify_skip_layers": ["http"]}' \
  -e verify_doc_write=always -e "verify_doc_path=$out/production_v2.md" 2>&1 | tee -a "$log"
r=${PIPESTATUS[0]}; ((r)) && rc=$r
say "rendered NCCL env file"; cat /tmp/verify-nccl.env | tee -a "$log"
[[ -s "$out/production_v2.md" ]] || { echo "production_v2.md NOT written" | tee -a "$log"; rc=1; }

say "run 2: a missing device node must fail layer 1 (GPU)"
ansible-playbook -i "$inv/hosts" playbooks/verify.yml --tags verify_gpu "${vars[@]}" \
  -e '{"verify_gpu_uvm_nodes": ["/dev/nvidia-uvm", "/dev/nvidia-uvm-missing-on-purpose"]}' >"$out/neg_gpu.log" 2>&1
r=$?; grep -E 'verify layer|localhost +:' "$out/neg_gpu.log" | tee -a "$log"
((r == 0)) && { echo "missing node NOT detected" | tee -a "$log"; rc=1; }

if ((n >= 2)); then
  say "run 3: an impossible busbw floor must fail layer 4 (NCCL)"
  ansible-playbook -i "$inv/hosts" playbooks/verify.yml --tags verify_nccl "${vars[@]}" \
    -e verify_nccl_min_busbw_gbps_256m=100000 >"$out/neg_nccl.log" 2>&1
  r=$?; grep -E 'verify layer|localhost +:' "$out/neg_nccl.log" | tee -a "$log"
  ((r == 0)) && { echo "busbw floor NOT enforced" | tee -a "$log"; rc=1; }

  say "bench/nccl_allreduce.py (loads roles/verify/files/nccl_allreduce.py)"
  (set -a; . /tmp/verify-nccl.env; set +a
   timeout 120 "$py" bench/nccl_allreduce.py --ranks "$n" --sizes 8K,512K,256M --graph --label verify-env \
     --json "$out/bench.jsonl") 2>&1 | tee -a "$log"
  r=${PIPESTATUS[0]}; ((r)) && rc=$r
else
  # Layer 4 is an all-reduce between the tp GPUs: one GPU has none. The role reports the layer
  # skipped ('tp 1 (no all-reduce)'); that report is what run 3 checks here instead of its failure.
  say "run 3: layer 4 (NCCL) needs 2 GPUs; this host has $n: it must be reported skipped"
  ansible-playbook -i "$inv/hosts" playbooks/verify.yml --tags verify_nccl "${vars[@]}" \
    -e verify_nccl_min_busbw_gbps_256m=100000 >"$out/neg_nccl.log" 2>&1
  r=$?; grep -E 'verify layer|tp 1 \(no all-reduce\)|localhost +:' "$out/neg_nccl.log" | tee -a "$log"
  if ((r != 0)) || ! grep -q 'tp 1 (no all-reduce)' "$out/neg_nccl.log"; then
    echo "layer 4 NOT reported skipped on a 1-GPU host" | tee -a "$log"; rc=1
  else
    echo "layer 4 skipped: tp 1 (no all-reduce); the busbw floor and bench/nccl_allreduce.py need >= 2 GPUs" | tee -a "$log"
  fi
fi

say "summary"
grep -E '"msg": "(verify layer|preflight ok|CUDA toolkit)|localhost +:' "$log" | tee "$out/summary.txt"
rm -rf "$inv"
echo "exit $rc" | tee -a "$log"
exit "$rc"
