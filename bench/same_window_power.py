"""Benchmark: today's gate (a stored baseline, the noise band, one confirmation) against the same-window
rule (plugins/plugin_utils/same_window.py: arm A = the serving release, arm B = the new one, paired
repetitions in randomised order, scipy's one-sided t-tests of log(B/A), Holm across levels, more
pairs up to a cap) when the host's speed drifts. Prints, per jitter CV and drift, how often each
catches a 10 % and a 20 % regression, how often it fails a healthy release (false alarm), how often
the new rule ends inconclusive and how many pairs per level it needed. Not a test.

Both decisions are the REAL code; the measurement is SIMULATED as bench/gate_power.py does (the
protocol double's pace times ``1 + cv * z`` per run, one draw per level and repetition):
- today's gate: a baseline recorded at host speed 1, the gated run at host speed ``1 - drift``
  (the drift between two windows), through bench/gate_power.py's ``trial`` with the confirmation on;
- same window: the 2n runs of a level are one window over which the host's speed falls linearly by
  ``drift`` from its first run to its last (the worst case inside one window: today's "between the
  windows" drift squeezed into it); each pair runs AB or BA at random, so a linear trend costs a
  pair only the step between its two runs, with a random sign. More pairs continue the trend.

usage: .venv/bin/python bench/same_window_power.py [--trials 400] [--cvs 1,3,5] [--drifts 0,5,10]
       [--regressions 0,10,20] [--levels 1,30,100,250] [--shortfall 5] [--start-pairs 3]
       [--max-pairs 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import gate_power  # noqa: E402  (bench/gate_power.py: today's gate, simulated the same way)

SW = gate_power._load("same_window", REPO / "plugins" / "plugin_utils" / "same_window.py")


@dataclass(frozen=True)
class Cell:
    """One cell of the table: jitter CV, drift over the window and the regression, as fractions."""

    cv: float
    drift: float
    reg: float


def window(
    rng: random.Random, cell: Cell, *, n_pairs: int, start: int, total: int
) -> list[tuple[float, float]]:
    """Pairs ``start``..``start + n_pairs - 1`` of a level's window of ``total`` pairs (2 runs each)."""
    pairs = []
    runs = max(1, 2 * total - 1)
    for index in range(start, start + n_pairs):
        order = ("A", "B") if rng.random() < 0.5 else ("B", "A")
        got: dict[str, float] = {}
        for offset, arm in enumerate(order):
            host = 1.0 - cell.drift * (2 * index + offset) / runs
            noise = max(0.05, 1.0 + cell.cv * rng.gauss(0.0, 1.0))
            slower = (1.0 - cell.reg) if arm == "B" else 1.0
            got[arm] = gate_power.PACE_PER_REQUEST * host * noise * slower
        pairs.append((got["A"], got["B"]))
    return pairs


def same_window_trial(
    rng: random.Random, cell: Cell, levels: list[int], args: argparse.Namespace
) -> tuple[str, int]:
    """(decision, pairs per level at the end)."""
    total = args.max_pairs
    pairs = {level: window(rng, cell, n_pairs=args.start_pairs, start=0, total=total) for level in levels}
    while True:
        verdict = SW.decide(pairs, args.shortfall / 100.0, max_pairs=args.max_pairs)
        if verdict.decision != "more":
            return str(verdict.decision), max(len(p) for p in pairs.values())
        for level in verdict.more:
            pairs[level] += window(rng, cell, n_pairs=1, start=len(pairs[level]), total=total)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--cvs", default="1,3,5")
    parser.add_argument("--drifts", default="0,5,10")
    parser.add_argument("--regressions", default="0,10,20")
    parser.add_argument("--levels", default="1,30,100,250")
    parser.add_argument("--shortfall", type=float, default=5.0, help="allowed shortfall, percent")
    parser.add_argument("--start-pairs", type=int, default=3)
    parser.add_argument("--max-pairs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    old_args = argparse.Namespace(
        levels=levels, tolerance=args.shortfall, k=3.0, gate_reps=3, baseline_reps=3
    )
    rng = random.Random(args.seed)
    print(f"{args.trials} trials per cell, levels {levels}, allowed shortfall {args.shortfall:g} %, "
          f"same window: {args.start_pairs}..{args.max_pairs} pairs per level; today's gate: tolerance "
          f"{args.shortfall:g} %, k 3, 3+3 repetitions, confirmation on")  # fmt: skip
    print(
        "cv%  drift%  regression%  | today: failed  | same window: failed  inconclusive  passed  pairs(mean)"
    )
    started = time.monotonic()
    for cv in (float(x) for x in args.cvs.split(",")):
        for drift in (float(x) for x in args.drifts.split(",")):
            for reg in (float(x) for x in args.regressions.split(",")):
                slowdown = 1.0 - (1.0 - reg / 100) * (1.0 - drift / 100)
                old = sum(
                    gate_power.trial(old_args, cv / 100, slowdown, rng, True)[0]
                    for _trial in range(args.trials)
                )
                counts = {"fail": 0, "inconclusive": 0, "pass": 0}
                used = 0
                for _trial in range(args.trials):
                    cell = Cell(cv / 100, drift / 100, reg / 100)
                    decision, pairs = same_window_trial(rng, cell, levels, args)
                    counts[decision] += 1
                    used += pairs
                pct = {key: 100.0 * value / args.trials for key, value in counts.items()}
                print(f"{cv:3g}  {drift:5g}  {reg:10g}   | {100.0 * old / args.trials:12.1f}  | "
                      f"{pct['fail']:18.1f}  {pct['inconclusive']:12.1f}  {pct['pass']:6.1f}  "
                      f"{used / args.trials:8.1f}", flush=True)  # fmt: skip
    print(f"took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
