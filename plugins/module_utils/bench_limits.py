"""The bounds of the benchmark's sizes, defined once (issue 32 item 8): concurrency levels and prompts.

Pure Python (no Ansible import). The Jinja tests ``sglang.deploy.bench_levels`` and
``sglang.deploy.bench_prompts`` (plugins/test/bench.py) apply them in the verify and autotune roles'
validate.yml, which preflight runs before any host is changed.

Why these bounds:

* a concurrency level is at most :data:`LEVEL_MAX` = 4096: SGLang's running batch is bounded by the
  CUDA graphs the launch spec captures (``sglang_cuda_graph_max_bs`` is 1-4096), so a level above it
  measures only the queue; and the benchmark client holds that many HTTP connections open at once
  (a level of 10^6 is a typo that would exhaust the client's file descriptors and the server's memory);
* prompts per level are at most :data:`PROMPTS_MAX` = 100000: ``auto`` sends max(30, 2 x level), at
  most 8192 at the largest level; 100000 prompts of the default output length are already hours of
  one level, and every prompt is a line of the benchmark's JSONL output kept on the host.
"""

from __future__ import annotations

from typing import Any

LEVEL_MAX = 4096
PROMPTS_MAX = 100000
LEVELS_ALLOWED = f"a non-empty list of integers 1-{LEVEL_MAX} (concurrency levels)"
PROMPTS_ALLOWED = f"auto (max(30, 2 x concurrency) per level) or an integer 1-{PROMPTS_MAX}"


def _count(value: Any, top: int) -> bool:
    text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
    return text.isascii() and text.isdigit() and not text.startswith("0") and 1 <= int(text) <= top


def valid_levels(levels: Any) -> bool:
    """A non-empty list of integers 1-LEVEL_MAX (strings of digits too, as -e passes them)."""
    return isinstance(levels, list) and len(levels) > 0 and all(_count(v, LEVEL_MAX) for v in levels)


def valid_prompts(prompts: Any) -> bool:
    """``auto`` or an integer 1-PROMPTS_MAX (prompts per benchmark level)."""
    return prompts == "auto" or _count(prompts, PROMPTS_MAX)
