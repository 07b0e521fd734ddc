#!/usr/bin/env bash
# Benchmark (prints figures; not a test): the no-op `sglang-deploy up` of an older commit and of this
# checkout, alternately, plus this checkout's `ansible-playbook site.yml` without ansible-runner and
# the CLI. Alternating runs make the ratio trustworthy on a machine whose speed drifts (a shared
# 2-CPU VM). Each commit reruns on a lab host that commit converged itself: two lab containers made
# here from the lab image, sglang-lab-ab-new (this checkout) and sglang-lab-ab-old (the old commit),
# converged once, then timed, and removed at the end; the README's sglang-lab is never touched (a
# test run may be using it). One host for both would not be a no-op for either once the two commits
# write different files: each run would put back what the other changed.
#   bench/noop_ab.sh [OLD_COMMIT [RUNS]]     default: c582e8b (start of the 2026-12-01 session), 3 runs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
old_commit="${1:-c582e8b}"
runs="${2:-3}"
repo="$PWD"
cli="$repo/.venv/bin/sglang-deploy"
work="$(mktemp -d)"
new_host=sglang-lab-ab-new old_host=sglang-lab-ab-old
trap '"$cli" lab --name "$old_host" destroy >/dev/null 2>&1 || true
      "$cli" lab --name "$new_host" destroy >/dev/null 2>&1 || true
      git -C "$repo" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# the old commit: a worktree (its own collection link), its lab inventory renamed to its host
git worktree add -q "$work/old" "$old_commit"
mkdir -p "$work/old/.collections/ansible_collections/sglang"
ln -sfn ../../.. "$work/old/.collections/ansible_collections/sglang/deploy"
sed "s/sglang-lab\b/$old_host/g" "$work/old/inventory/lab.yml" > "$work/old/inventory/ab-old.yml"
# this checkout: its lab inventory renamed, beside the checkout's inventory group_vars
mkdir -p "$work/new-inventory"
sed "s/sglang-lab\b/$new_host/g" inventory/lab.yml > "$work/new-inventory/lab.yml"
ln -s "$repo/inventory/group_vars" "$work/new-inventory/group_vars"

old_up() { env PYTHONPATH="$work/old/src" "$repo/.venv/bin/python" -m sglang_deploy.cli up -i inventory/ab-old.yml; }
new_up() { "$cli" up -i "$work/new-inventory/lab.yml"; }
new_direct() { "$repo/.venv/bin/ansible-playbook" -i "$work/new-inventory/lab.yml" site.yml; }
converge() {  # name, dir, command: the first (changing) run of a fresh lab host
  (cd "$2" && "$3" >"$work/converge-$1.log" 2>&1) || { tail -n 40 "$work/converge-$1.log" >&2; exit 1; }
}
"$cli" lab --name "$old_host" create >/dev/null
"$cli" lab --name "$new_host" create >/dev/null
converge old "$work/old" old_up
converge new "$repo" new_up

time_it() {  # name, dir, command...: one timed no-op, its recap and the load average
  local name="$1" dir="$2"; shift 2
  local start end
  start=$(date +%s.%N)
  (cd "$dir" && "$@" >"$work/out.log" 2>&1) || { tail -n 40 "$work/out.log" >&2; return 1; }
  end=$(date +%s.%N)
  printf '%-10s %6.2f s  %s  load %s\n' "$name" "$(echo "$end - $start" | bc)" \
    "$(grep -o 'ok=[0-9]* *changed=[0-9]* .*skipped=[0-9]*' "$work/out.log" | tail -1 | tr -s ' ')" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
}
for i in $(seq "$runs"); do
  time_it old "$work/old" old_up
  time_it new "$repo" new_up
  time_it direct "$repo" new_direct
done
