#!/usr/bin/env bash
# The autotune role's NCCL part for real on a GPU host, through ansible-playbook with connection local:
# playbooks/autotune.yml --tags autotune_nccl (preflight with sglang_gpu_required=true, tp = all GPUs,
# then every candidate of autotune_nccl_candidates, interleaved repetitions, the choice, the record),
# TWICE, with the host's own python3/torch standing in for the release venv. Run 1 records into the
# inventory's host_vars (so run 2's preflight validates sglang_nccl_profile: tuned against it), run 2
# into its own directory. Then the nccl_env role renders the recorded result (profile tuned), and the
# two choices are compared.
# Output in $OUT (default /tmp/autotune_out): autotune.log, run{1,2}.md, run{1,2}.json (measurements),
# nccl_tuned-run{1,2}.yml (the records), tuned.env.
# usage (repo root, ansible-core importable): bench/device/autotune_nccl.sh [EXTRA-VARS ...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
py="$(command -v python3)"
out="${OUT:-/tmp/autotune_out}"
mkdir -p "$out"
log="$out/autotune.log"
: >"$log"
n="$(nvidia-smi -L | grep -c '^GPU ')"
work="$device_work"
inv="$work/inventory"
mkdir -p "$inv"
printf '[sglang_servers]\nlocalhost ansible_connection=local ansible_python_interpreter=%s\n' "$py" >"$inv/hosts"
ln -s "$PWD/group_vars" "$inv/group_vars"

say() { printf '\n===== %s =====\n' "$*" | tee -a "$log"; }
say "host"
{ nvidia-smi -L; nvidia-smi topo -m
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
} 2>&1 | tee -a "$log"

vars=("${device_vars[@]}" -e sglang_gpu_required=true -e "sglang_tp_size=$n" -e sglang_api_key_required=false
  -e "sglang_model_path=$device_model" -e "sglang_draft_model_path=$device_drafter"
  -e sglang_root=/tmp/sglang -e sglang_min_free_disk_gib=1 -e "autotune_python=$py" "$@")
rc=0
# One GPU: no all-reduce to tune. The role must say so (its NCCL part skipped, tp 1) and record nothing;
# the second run and the render of a record have nothing to work on.
if ((n < 2)); then
  say "one GPU: playbooks/autotune.yml --tags autotune_nccl must report its NCCL part skipped"
  ansible-playbook -i "$inv/hosts" playbooks/autotune.yml --tags autotune_nccl "${vars[@]}" \
    -e "autotune_report_dir=$work/run1" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  if ((rc == 0)) && grep -q 'autotune NCCL part skipped: tp 1' "$log" && [[ ! -e "$inv/host_vars/localhost/nccl_tuned.yml" ]]; then
    echo "autotune NCCL skipped: $n GPU (tp 1, no all-reduce); no record written; runs 2 and the render need >= 2 GPUs" | tee -a "$log"
  else
    echo "one GPU: expected the NCCL part reported skipped and no record (rc=$rc)" | tee -a "$log"
    ((rc)) || rc=1
  fi
  echo "exit $rc" | tee -a "$log"
  exit "$rc"
fi
for run in 1 2; do
  rdir="$work/run$run"
  mkdir -p "$rdir"
  record=()
  ((run == 2)) && record=(-e "autotune_record_dir=$rdir")
  say "run $run: playbooks/autotune.yml --tags autotune_nccl, tp=$n"
  t0=$SECONDS
  ansible-playbook -i "$inv/hosts" playbooks/autotune.yml --tags autotune_nccl "${vars[@]}" \
    -e "autotune_report_dir=$rdir" "${record[@]}" 2>&1 | tee -a "$log"
  r=${PIPESTATUS[0]}; ((r)) && rc=$r
  echo "run $run: rc=$r, $((SECONDS - t0)) s" | tee -a "$log"
  cp "$rdir/autotune-nccl.md" "$out/run$run.md" 2>/dev/null
  cp "$rdir/autotune-nccl.json" "$out/run$run.json" 2>/dev/null
done
cp "$inv/host_vars/localhost/nccl_tuned.yml" "$out/nccl_tuned-run1.yml" 2>/dev/null
cp "$work/run2/nccl_tuned.yml" "$out/nccl_tuned-run2.yml" 2>/dev/null

say "the nccl_env role renders the recorded result (profile tuned, run 1's record)"
ansible-playbook bench/device/render_nccl_env.yml \
  -e nccl_env_file=/tmp/autotune-tuned.env -e nccl_env_profile=tuned -e "@$out/nccl_tuned-run1.yml" 2>&1 \
  | grep -E 'why|tuned|ok=|failed' | tee -a "$log"
cp /tmp/autotune-tuned.env "$out/tuned.env" 2>/dev/null && tee -a "$log" <"$out/tuned.env"

say "summary: the choice of each run"
for run in 1 2; do
  grep -E '^\*\*' "$out/run$run.md" 2>/dev/null | head -1 | sed "s/^/run $run: /" | tee -a "$log"
done
c1="$(grep -E '^  choice:' "$out/nccl_tuned-run1.yml" 2>/dev/null)"
c2="$(grep -E '^  choice:' "$out/nccl_tuned-run2.yml" 2>/dev/null)"
if [[ -n "$c1" && "$c1" == "$c2" ]]; then echo "same choice both runs:$c1" | tee -a "$log"
else echo "choices differ: run 1 [$c1] run 2 [$c2]" | tee -a "$log"; fi
echo "exit $rc" | tee -a "$log"
exit "$rc"
