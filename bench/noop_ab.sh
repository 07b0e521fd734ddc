#!/usr/bin/env bash
# Benchmark (prints figures; not a test): the no-op `sglang-deploy up` of an older commit and of this
# checkout, alternately on the same converged lab host (run `make up` first), plus this checkout's
# `ansible-playbook site.yml` without ansible-runner and the CLI. Alternating runs make the ratio
# trustworthy on a machine whose speed drifts (a shared 2-CPU VM).
#   bench/noop_ab.sh [OLD_COMMIT [RUNS]]     default: c582e8b (start of the 2026-12-01 session), 3 runs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
old_commit="${1:-c582e8b}"
runs="${2:-3}"
repo="$PWD"
work="$(mktemp -d)"
trap 'git -C "$repo" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q "$work/old" "$old_commit"
mkdir -p "$work/old/.collections/ansible_collections/sglang"
ln -sfn ../../.. "$work/old/.collections/ansible_collections/sglang/deploy"

time_it() {  # name, dir, command...: one timed no-op, its recap and the load average
  local name="$1" dir="$2"; shift 2
  local start end
  start=$(date +%s.%N)
  (cd "$dir" && "$@" >"$work/out.log" 2>&1)
  end=$(date +%s.%N)
  printf '%-10s %6.2f s  %s  load %s\n' "$name" "$(echo "$end - $start" | bc)" \
    "$(grep -o 'ok=[0-9]* *changed=[0-9]* .*skipped=[0-9]*' "$work/out.log" | tail -1 | tr -s ' ')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
}
for i in $(seq "$runs"); do
  time_it old "$work/old" env PYTHONPATH="$work/old/src" "$repo/.venv/bin/python" -m sglang_deploy.cli up
  time_it new "$repo" "$repo/.venv/bin/sglang-deploy" up
  time_it direct "$repo" "$repo/.venv/bin/ansible-playbook" site.yml
done
