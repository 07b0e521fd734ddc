"""NCCL all-reduce micro-benchmark through torch.distributed (bf16, one process per GPU).

usage: python3 bench/nccl_allreduce.py [--ranks 2] [--sizes 8K,32K,...] [--warmup 20] [--iters 100]
                                       [--reps 5] [--graph] [--label NAME] [--json FILE] [--env-file FILE]
       python3 bench/nccl_allreduce.py --compare RUNS.jsonl ...

The implementation lives in ONE place, roles/verify/files/nccl_allreduce.py (the verify role ships
it to the hosts for its NCCL layer); this file loads it and runs its main(), so the benchmark and
the verification measure the same way (eager + CUDA-graph replay, median of reps, slowest rank,
busbw = algbw * 2(n-1)/n). The NCCL environment is whatever the caller exported
(bench/device/nccl_profiles.sh sources the role's rendered file first) plus `--env-file`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

IMPL = Path(__file__).resolve().parents[1] / "roles" / "verify" / "files" / "nccl_allreduce.py"
# The name the implementation is registered under: torch.multiprocessing's spawned children
# re-run this file first (as __mp_main__), which registers it again before they unpickle _worker.
MODULE = "sglang_verify_nccl_allreduce"


def _load() -> ModuleType:
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    spec = importlib.util.spec_from_file_location(MODULE, IMPL)
    assert spec is not None, IMPL
    assert spec.loader is not None, IMPL
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    return module


_impl = _load()
# The helpers callers and tests use (tests/test_nccl_env_filters.py, tests/test_verify_nccl.py).
DEFAULT_SIZES = _impl.DEFAULT_SIZES
parse_size = _impl.parse_size
human = _impl.human
bus_bandwidth_gbps = _impl.bus_bandwidth_gbps
summarize = _impl.summarize
format_table = _impl.format_table
compare_table = _impl.compare_table
parse_env_file = _impl.parse_env_file
main = _impl.main


if __name__ == "__main__":
    sys.exit(main())
