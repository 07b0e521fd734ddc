#!/usr/bin/env bash
# A minute-long check of roles/autotune/files/autotune_nccl.py on a GPU host before the full runs:
# three candidates, 5 repetitions, progress on stderr, the choice printed.
# usage (repo root): bench/device/autotune_smoke.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source bench/device/env.sh
spec='{"candidates": [{"name": "defaults", "vars": {}}, {"name": "proto_ll", "vars": {"NCCL_PROTO": "LL"}},
  {"name": "pcie_seed", "vars": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
   "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512"}}],
  "ranks": 2, "decode_sizes": "8K,32K,128K,512K", "prefill_sizes": "32M,256M", "reps": 5, "iters": 100,
  "prefill_iters": 20, "warmup": 10, "force_env": {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
  "NVSHMEM_DISABLE_NVLS": "1"}, "start_timeout_s": 60, "init_timeout_s": 40, "rep_timeout_s": 30, "deadline_s": 70}'
python3 roles/autotune/files/autotune_nccl.py "$spec" >"${OUT:-/tmp}/smoke.json" || exit 1
python3 - "${OUT:-/tmp}/smoke.json" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("autotune_nccl", "plugins/module_utils/autotune_nccl.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
doc = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print({k: v for k, v in doc.items() if k != "candidates"})
for c in doc["candidates"]:
    print(c["name"], c["error"], c["sums_ok"], {k: len(v) for k, v in c["samples"].items()})
r = mod.choose(doc)
print(r["reason"]); print(mod.table(r))
ok = all(not c["error"] for c in doc["candidates"])
sys.exit(0 if ok else 1)
PY
