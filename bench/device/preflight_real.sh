#!/usr/bin/env bash
# Device check on a real GPU host (no network, no systemd): capture nvidia-smi's real output with
# the exact commands the preflight role runs (so tests/data/nvidia-smi can hold real samples), then
# run site.yml's first two stages for real: `--tags cuda` runs preflight (its tasks are tagged
# `always`) with sglang_gpu_required=true, then cuda_toolkit with the existing toolkit — so
# preflight's live facts (GPU count, driver branch) feed the CUDA stage's driver gate.
# Logs and samples go to $OUT (default /tmp/preflight_real_out).
# usage (repo root, ansible-core importable): bench/device/preflight_real.sh [TP_SIZE] [CUDA_PATH]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
tp="${1:-$(nvidia-smi -L | grep -c '^GPU ')}"
cuda="${2:-/usr/local/cuda-13.0}"
out="${OUT:-/tmp/preflight_real_out}"
mkdir -p "$out"
log="$out/preflight_real.log"
: >"$log"
n="$(nvidia-smi -L | grep -c '^GPU ')"
fields="$(awk -F': ' '/^__preflight_smi_query_fields:/{print $2}' roles/preflight/vars/main.yml)"
# the samples named by the card that made them (h100, h200, ...; "gpu" when the name says none)
card="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | grep -oiE '\b[a-z]?[0-9]{3,4}\b' | head -n 1 | tr 'A-Z' 'a-z')"
nvidia-smi --query-gpu="$fields" --format=csv,nounits >"$out/real-${card:-gpu}x$n.query-gpu.csv"
nvidia-smi topo -m >"$out/real-${card:-gpu}x$n.topo-m.txt"
inv="$(mktemp)"
printf '[sglang_servers]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >"$inv"
vars=("${device_vars[@]}" -e sglang_gpu_required=true -e "sglang_tp_size=$tp" -e sglang_api_key_required=false
  -e "sglang_model_path=$device_model" -e "sglang_draft_model_path=$device_drafter"
  -e sglang_root=/tmp/sglang -e sglang_min_free_disk_gib=1
  -e cuda_toolkit_method=existing -e "cuda_toolkit_existing_path=$cuda" -e cuda_toolkit_gpu_check=required
  -e "cuda_toolkit_profile_path=$out/profile.d-cuda-toolkit.sh")
rc=0
printf '\n===== site.yml --tags cuda (preflight + cuda_toolkit), tp=%s on %s GPUs =====\n' "$tp" "$n" | tee -a "$log"
ansible-playbook -i "$inv" site.yml --tags cuda "${vars[@]}" 2>&1 | tee -a "$log"; r=${PIPESTATUS[0]}; ((r)) && rc=$r
printf '\n===== same, --check =====\n' | tee -a "$log"
ansible-playbook -i "$inv" site.yml --tags cuda --check "${vars[@]}" 2>&1 | tee -a "$log"; r=${PIPESTATUS[0]}; ((r)) && rc=$r
printf '\n===== bad input: tp_size=%s on %s GPUs must fail in preflight =====\n' "$((n * 4))" "$n" | tee -a "$log"
ansible-playbook -i "$inv" site.yml --tags cuda "${vars[@]}" -e "sglang_tp_size=$((n * 4))" >"$out/bad_tp.log" 2>&1
bad=$?
grep -E 'sglang_tp_size|localhost +:' "$out/bad_tp.log" | tee -a "$log"
((bad == 0)) && { echo "bad tp size was NOT rejected" | tee -a "$log"; rc=1; }
printf '\n===== bad input: a model under /tmp (the unit has PrivateTmp=yes) must fail in preflight =====\n' | tee -a "$log"
mkdir -p /tmp/sglang-device-model && cp -r "$device_model/." /tmp/sglang-device-model/
ansible-playbook -i "$inv" site.yml --tags cuda "${vars[@]}" -e sglang_model_path=/tmp/sglang-device-model \
  >"$out/bad_model.log" 2>&1
bad=$?
grep -E 'PrivateTmp|localhost +:' "$out/bad_model.log" | head -n 3 | tee -a "$log"
((bad == 0)) && { echo "a model under /tmp was NOT rejected" | tee -a "$log"; rc=1; }
rm -rf /tmp/sglang-device-model
grep -E '"msg": "preflight ok|localhost +:' "$log" >"$out/summary.txt"
rm -f "$inv"
echo "exit $rc" | tee -a "$log"
exit "$rc"
