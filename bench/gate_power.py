"""Benchmark: the power of the verify gate (layer 7) - how often it catches a regression and how often
it fails a healthy run - for run-to-run jitter of 1, 3 and 5 % (CV of output tok/s). Prints a table;
not a test.

The gate is the REAL code: plugins/module_utils/verify_gate.py's ``combine_repetitions``,
``fingerprint``, ``baseline_record``, ``select_baseline``, ``gate`` and ``gate_outcome`` run exactly
as the role calls them (a baseline recorded from ``--baseline-reps`` repetitions of every level, then a
gated run of ``--gate-reps`` repetitions). What is SIMULATED is the measurement: the protocol test
double (playbooks/lab/sglang_protocol_double.py) paces every request at ``tokens_per_s`` x
``(1 - slowdown)`` and, with its ``jitter_cv`` knob, multiplies that pace by ``1 + jitter_cv * z``
(z standard normal, one draw per time window, so a whole benchmark run sees one draw). This script
draws the same factor per (level, repetition) instead of running bench_serving against the double:
one live run of four levels takes minutes on the 2-CPU lab machine, and the table needs thousands.
The per-level pace of the healthy release is the double's lab setting scaled by concurrency.

A trial: record a baseline (healthy release), then gate a run of the release slowed by the given
regression. "caught" = the gate failed; for regression 0 % that rate is the false-failure rate. All
levels are gated (a run fails when any level fails), as in the role. With the confirmation
(verify_gate_confirm, the role's default) a run that fell short on throughput only is measured again
(--gate-reps more) and the gate judges the pooled repetitions of both (``pool_levels``, then ``gate``
with ``first=``), as tasks/gate_confirm.yml does; the table also says how often that second
measurement ran (its cost in benchmark time).

usage: bench/gate_power.py [--trials N] [--cvs 1,3,5] [--regressions 0,5,10,20] [--levels 1,30,100,250]
                           [--tolerance 5] [--k 3] [--gate-reps 3] [--baseline-reps 3] [--seed 1]
                           [--confirm both|on|off]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


G = _load("verify_gate", REPO / "plugins" / "module_utils" / "verify_gate.py")

# The double's healthy pace per level (output tok/s): 100 tok/s per request, as the e2e lab sets it.
PACE_PER_REQUEST = 100.0


def measure(levels: list[int], slowdown: float, cv: float, reps: int, rng: random.Random) -> list[Any]:
    """``reps`` simulated bench_serving runs of every level -> the role's per-level rows."""
    rows = []
    for _rep in range(reps):
        for level in levels:
            factor = max(0.05, 1.0 + cv * rng.gauss(0.0, 1.0))
            tps = PACE_PER_REQUEST * level * (1.0 - slowdown) * factor
            rows.append(
                {"level": level, "output_tps": round(tps, 3), "errors": 0, "ok": True, "accept_length": None}
            )
    combined: list[Any] = G.combine_repetitions(rows)
    return combined


def trial(
    args: argparse.Namespace, cv: float, slowdown: float, rng: random.Random, confirm: bool
) -> tuple[bool, bool]:
    """One recorded baseline + one gated run: (the gate failed the run, a confirmation was measured)."""
    fp = G.fingerprint({"model_path": "/m", "preset": "production", "levels": args.levels})
    base_levels = measure(args.levels, 0.0, cv, args.baseline_reps, rng)
    record = G.baseline_record(base_levels, fp, recorded_at="sim", release_id="r1")
    records = G.records_with({}, record)
    baseline = G.select_baseline(fp, records=records, seed_table={}, seed_match={})
    assert baseline["source"] == "recorded"
    run = measure(args.levels, slowdown, cv, args.gate_reps, rng)
    gated = G.gate(run, baseline, args.tolerance, args.k)
    confirmed = confirm and bool(gated["confirmable"])
    if confirmed:
        again = measure(args.levels, slowdown, cv, args.gate_reps, rng)
        gated = G.gate(G.pool_levels(run, again), baseline, args.tolerance, args.k, first=gated)
    outcome = G.gate_outcome(gated, baseline, record="auto", layers_ok=True)
    return bool(outcome["status"] == "failed"), confirmed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--cvs", default="1,3,5")
    parser.add_argument("--regressions", default="0,5,10,20")
    parser.add_argument("--levels", default="1,30,100,250")
    parser.add_argument("--tolerance", type=float, default=5.0, help="verify_gate_tolerance_pct")
    parser.add_argument("--k", type=float, default=3.0, help="verify_gate_noise_k")
    parser.add_argument("--gate-reps", type=int, default=3, help="verify_gate_repetitions")
    parser.add_argument("--baseline-reps", type=int, default=3, help="verify_baseline_repetitions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--confirm", choices=["both", "on", "off"], default="both")
    args = parser.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    cvs = [float(x) for x in args.cvs.split(",")]
    regressions = [float(x) for x in args.regressions.split(",")]
    rng = random.Random(args.seed)
    print(
        f"verify gate power: tolerance floor {args.tolerance:g}%, k {args.k:g}, gate repetitions "
        f"{args.gate_reps}, baseline repetitions {args.baseline_reps}, levels {args.levels}, "
        f"{args.trials} trials per cell (simulated measurements, real gate code)"
    )
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.confirm]
    for confirm in modes:
        print()
        print(
            "verify_gate_confirm: true (a throughput-only shortfall measured again, both judged)"
            if confirm
            else "verify_gate_confirm: false (one gated measurement)"
        )
        header = f"{'jitter CV':>9} | " + " | ".join(f"{'-' + format(r, 'g') + '%':>24}" for r in regressions)
        print(header)
        print("-" * len(header))
        for cv in cvs:
            cells = []
            for reg in regressions:
                results = [
                    trial(args, cv / 100.0, reg / 100.0, rng, confirm) for _trial in range(args.trials)
                ]
                rate = sum(f for f, _confirmed in results) / args.trials * 100.0
                again = sum(c for _failed, c in results) / args.trials * 100.0
                cell = ("false " if reg == 0 else "caught ") + format(rate, ".1f") + "%"
                if confirm:
                    cell += f" (2nd {again:.0f}%)"
                cells.append(f"{cell:>24}")
            print(f"{format(cv, 'g') + '%':>9} | " + " | ".join(cells))
    print(
        "(column -0%: a healthy release, its rate the false-failure rate; other columns: regression caught;"
        " 2nd: share of runs measured a second time)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
