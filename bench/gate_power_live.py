"""Benchmark: the verify gate's power from LIVE runs - sglang.bench_serving against the running protocol
test double - beside bench/gate_power.py's table (which draws the double's jitter model thousands of
times). Prints a table; not a test.

What is live here: the named test double (playbooks/lab/sglang_protocol_double.py, SGLang 0.5.9's own
protocol models) runs as a server on 127.0.0.1; every measurement is SGLang's real ``bench_serving``
run through the verify role's own runner (roles/verify/files/verify_bench.py ``run_level``, the code
layer 6 runs on a host), its results summarised and gated by the role's real functions
(plugins/module_utils/verify_gate.py: summarize_level, combine_repetitions, baseline_record,
select_baseline, gate, gate_outcome). The double's pace per request is set at every trial through its
release file ``protocol-double.json`` (read at every request): ``tokens_per_s`` x (1 - regression) and
its ``jitter_cv`` knob (one normal draw per ``jitter_period_s`` window). The machine's own scheduling
noise (a busy 2-CPU host) comes on top of the knob, as it does in the lab.

A trial (issue 34 item 7: today's gate and the same-window rule side by side, with a drift knob):
1. window 1, the baseline: ``--baseline-reps`` repetitions of every level at the healthy pace P;
2. window 2, the host has drifted by ``d`` (``--drifts``): arm A (the serving release) at P x (1 - d)
   and arm B (the new release) at P x (1 - d) x (1 - a) x (1 - r), where ``r`` is the regression and
   ``a`` (``--arm-drifts``) the drift between arm A and arm B themselves; each pair runs A then B or B
   then A at random (seeded by ``--seed`` and the trial, as the role orders its runs; until 2026-12-05
   always A then B), ``same_window.MIN_PAIRS`` pairs first, then one more pair at a time while
   ``same_window.decide`` says ``more``, up to ``--max-pairs``.
Today's gate judges the first ``--gate-reps`` repetitions of arm B (the new release in window 2, the
run it gates today) against window 1's baseline with the role's real code; the same-window rule judges
the A/B pairs (plugins/plugin_utils/same_window.py ``decide``, allowed shortfall ``--tolerance``).
"caught" = the verdict failed the release (for regression 0 % that is a false alarm); the same-window
rule's ``inconclusive`` is counted apart (neither caught nor passed). The table gives, per cell, the
pairs the same-window rule needed and the seconds its window took (arm A + arm B: the benchmark's
share of a verify), beside the seconds of today's gate run.

Run it with a python that has SGLang and its bench_serving. The patch tests' venv (tests/patches_fixtures.py)
has them, but its pyarrow is too new for its datasets (bench_serving imports datasets); a small venv in
front of it with an older pyarrow works, and gives the double its own release dir for the knob file:
  python3 -m venv .cache/gate-power-live/venv
  .cache/gate-power-live/venv/bin/pip install pyarrow==20.0.0
  echo "$PWD/.cache/patch-venv/venv/lib/python3.11/site-packages" \
      > .cache/gate-power-live/venv/lib/python3.11/site-packages/zz-patch-venv.pth
  PYTHONPATH=.collections .cache/gate-power-live/venv/bin/python bench/gate_power_live.py --trials 10 \
      --cvs 1,3,5 --drifts 0,5,10 --regressions 0,10,20
(.collections: the checkout as the collection sglang.deploy, which pytest sets up; verify_gate imports
its module_utils by that name). Several runs at once (one cell each, say) need one venv each: the knob
file lies beside the venv that runs the script and its double. ``--stop-after-s`` starts no trial after
that many seconds, so a run under a time limit ends with whole trials.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "roles" / "verify" / "files"))
# verify_scrub, which the role copies beside verify_bench.py
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))
import verify_bench  # type: ignore[import-not-found]  # noqa: E402
from gate_power import G, _load  # noqa: E402  (the real gate code, loaded as the role's module_utils)

SW = _load("same_window", REPO / "plugins" / "plugin_utils" / "same_window.py")

DOUBLE = REPO / "playbooks" / "lab" / "sglang_protocol_double.py"
TOKENIZER = REPO / "playbooks" / "lab" / "make_lab_tokenizer.py"
PROMPTS = REPO / "roles" / "verify" / "files" / "prompts" / "coding.jsonl"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_health(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"the double did not answer {url} within {timeout_s:.0f} s")


def measure_rows(
    spec: dict[str, Any], dataset: Path, logdir: Path, reps: int, first: int = 0
) -> list[dict[str, Any]]:
    """``reps`` rounds of every level through the role's runner -> the role's per-level summaries
    (one row per level and repetition)."""
    rows = []
    logdir.mkdir(parents=True, exist_ok=True)
    for rep in range(first, first + reps):
        for level in spec["levels"]:
            item = verify_bench.run_level({**spec, "repetitions": 2}, level, dataset, logdir, "", rep=rep)
            rows.append(G.summarize_level(level, item.get("result"), int(spec["num_prompts"])))
    return rows


def measure(spec: dict[str, Any], dataset: Path, logdir: Path, reps: int) -> list[dict[str, Any]]:
    """``reps`` rounds of every level -> the role's combined per-level summaries."""
    combined: list[dict[str, Any]] = G.combine_repetitions(measure_rows(spec, dataset, logdir, reps))
    return combined


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10, help="trials per cell (cv, drift, regression)")
    parser.add_argument("--cvs", default="3", help="the double's jitter_cv knob, in %%, a list")
    parser.add_argument("--jitter-period-s", type=float, default=5.0)
    parser.add_argument("--regressions", default="0,10")
    parser.add_argument("--drifts", default="0", help="pace change between the windows, in %%, a list")
    parser.add_argument("--arm-drifts", default="0", help="pace change between arm A and arm B, %%, a list")
    parser.add_argument("--max-pairs", type=int, default=8, help="the same-window rule's cap on pairs")
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--num-prompts", type=int, default=12)
    parser.add_argument("--output-len", type=int, default=48)
    parser.add_argument("--tokens-per-s", type=float, default=100.0, help="the double's pace per request")
    parser.add_argument("--tolerance", type=float, default=5.0, help="verify_gate_tolerance_pct")
    parser.add_argument("--k", type=float, default=3.0, help="verify_gate_noise_k")
    parser.add_argument("--gate-reps", type=int, default=3)
    parser.add_argument("--baseline-reps", type=int, default=3)
    parser.add_argument(
        "--stop-after-s", type=float, default=0.0, help="start no trial after this many seconds (0: no limit)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seeds each trial's AB/BA order of the pairs")
    parser.add_argument("--out", type=Path, help="also write the table and the trials (JSON) here")
    parser.add_argument(
        "--table-from",
        type=Path,
        help="print the table of the trials in this JSONL (an --out run's .jsonl, one cut short) and exit",
    )
    args = parser.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    args.regressions = [float(x) for x in args.regressions.split(",")]
    args.cvs = [float(x) for x in args.cvs.split(",")]
    args.drifts = [float(x) for x in args.drifts.split(",")]
    args.arm_drifts = [float(x) for x in args.arm_drifts.split(",")]
    return args


class Knob:
    """The double's release file protocol-double.json (read at every request): pace and jitter."""

    def __init__(self, args: argparse.Namespace) -> None:
        # the double reads <release>/protocol-double.json, <release> = the parent of the venv running it
        self.path = Path(os.path.realpath(sys.prefix)).parent / "protocol-double.json"
        self.args = args

    def set(self, *slowdowns_pct: float, cv: float) -> None:
        """The pace P x product(1 - s / 100) and the jitter knob ``cv`` (in %)."""
        pace = self.args.tokens_per_s
        for slowdown in slowdowns_pct:
            pace *= 1.0 - slowdown / 100.0
        data = {
            "tokens_per_s": pace,
            "jitter_cv": cv / 100.0,
            "jitter_period_s": self.args.jitter_period_s,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)


def bench_spec(args: argparse.Namespace, port: int, tok: Path, work: Path) -> dict[str, Any]:
    """The layer-6 runner's spec (roles/verify/files/verify_bench.py's SPEC)."""
    return {
        "base_url": f"http://127.0.0.1:{port}",
        "levels": args.levels,
        "num_prompts": args.num_prompts,
        "warmup": 1,
        "output_len": args.output_len,
        "input_len": 256,
        "dataset": "coding",
        "prompts": str(PROMPTS),
        "model": str(tok),
        "tokenizer": str(tok),
        "served_name": str(tok),
        "workdir": str(work),
        "timeout_s": 600,
        "seed": 1,
    }


Cell = tuple[float, float, float, float]  # (cv, drift, arm drift, regression), in %


def one_trial(
    args: argparse.Namespace, spec: dict[str, Any], knob: Knob, cell: Cell, logdir: Path
) -> dict[str, Any]:
    """Window 1: a baseline at the healthy pace; window 2: A/B pairs at the drifted pace. Today's gate
    and the same-window rule judge them (the role's and the plugin's real functions)."""
    cv, drift, arm_drift, reg = cell
    dataset = Path(spec["workdir"]) / "coding-sharegpt.json"
    fp = G.fingerprint({"model_path": spec["model"], "preset": "production", "levels": args.levels})
    knob.set(cv=cv)
    base = measure(spec, dataset, logdir / "base", args.baseline_reps)
    record = G.baseline_record(base, fp, recorded_at="live", release_id="r1")
    baseline = G.select_baseline(fp, records=G.records_with({}, record), seed_table={}, seed_match={})
    pairs: dict[int, list[tuple[float, float]]] = {level: [] for level in args.levels}
    order = random.Random(f"{args.seed}-{logdir.name}")  # the pairs' AB/BA order, seeded per trial
    b_rows: list[dict[str, Any]] = []
    window_s = 0.0
    gate_s = 0.0
    verdict = None
    while True:
        rep = len(pairs[args.levels[0]])
        started = time.monotonic()
        b_first = order.random() < 0.5  # AB or BA, as the role's seeded random order does
        if not b_first:
            knob.set(drift, cv=cv)
            a_rows = measure_rows(spec, dataset, logdir / "a", 1, first=rep)
        knob.set(drift, arm_drift, reg, cv=cv)
        b_started = time.monotonic()
        b_new = measure_rows(spec, dataset, logdir / "b", 1, first=rep)
        b_took = time.monotonic() - b_started
        if b_first:
            knob.set(drift, cv=cv)
            a_rows = measure_rows(spec, dataset, logdir / "a", 1, first=rep)
        window_s += time.monotonic() - started
        if len(b_rows) < args.gate_reps * len(args.levels):
            gate_s += b_took
        b_rows += b_new
        for a_row, b_row in zip(a_rows, b_new, strict=True):
            a_tps, b_tps = a_row.get("output_tps"), b_row.get("output_tps")
            if a_tps and b_tps:
                pairs[int(a_row["level"])].append((float(a_tps), float(b_tps)))
        counts = [len(level_pairs) for level_pairs in pairs.values()]
        if min(counts) >= SW.MIN_PAIRS:
            verdict = SW.decide(pairs, args.tolerance / 100.0, max_pairs=args.max_pairs)
            if verdict.decision != "more":
                break
        if rep + 1 >= args.max_pairs:
            break
    run = G.combine_repetitions(b_rows[: args.gate_reps * len(args.levels)])
    outcome = G.gate_outcome(
        G.gate(run, baseline, args.tolerance, args.k), baseline, record="auto", layers_ok=True
    )
    return {
        "cv_pct": cv,
        "drift_pct": drift,
        "arm_drift_pct": arm_drift,
        "regression_pct": reg,
        "today_failed": outcome["status"] == "failed",
        "today_gate_s": round(gate_s, 1),
        "same_window": verdict.decision if verdict is not None else "no pairs",
        "pairs": min(len(level_pairs) for level_pairs in pairs.values()),
        "same_window_s": round(window_s, 1),
        "ratios": {str(lv.level): round(lv.ratio, 4) for lv in verdict.levels} if verdict else {},
        "baseline_cv_pct": {str(r["level"]): (r.get("output_tps_spread") or {}).get("cv_pct") for r in base},
        "baseline_tps": {str(r["level"]): r.get("output_tps") for r in base},
        "gated_tps": {str(r["level"]): r.get("output_tps") for r in run},
    }


def _rate(count: int, total: int) -> str:
    return f"{count}/{total}" if total else "-"


def cells(args: argparse.Namespace) -> list[Cell]:
    return [
        (cv, drift, arm, reg)
        for cv in args.cvs
        for drift in args.drifts
        for arm in args.arm_drifts
        for reg in args.regressions
    ]


def table(args: argparse.Namespace, trials: list[dict[str, Any]], seconds: float, load: str) -> list[str]:
    lines = [
        f"verify gate power, LIVE: bench_serving against the protocol double ({args.tokens_per_s:g} tok/s per"
        f" request, jitter period {args.jitter_period_s:g} s), levels {args.levels},"
        f" {args.num_prompts} prompts x {args.output_len} tokens;"
        f" allowed shortfall {args.tolerance:g} %, today's gate: k {args.k:g},"
        f" {args.baseline_reps} baseline / {args.gate_reps} gate repetitions; same-window: pairs from"
        f" {SW.MIN_PAIRS} up to {args.max_pairs}, alpha {SW.ALPHA:g} (Holm over levels)",
        f"{len(trials)} trials in {seconds:.0f} s ({args.trials} per cell); load average at the end: {load}",
        "drift: the pace change between the baseline's window and the gate's; arm drift: between arm A and"
        " arm B. 'caught' counts failed verdicts (at regression 0: false alarms); 'inconcl.' the same-window"
        " rule's inconclusive verdicts",
        f"{'CV':>4} {'drift':>5} {'arm':>4} {'slower':>6} | {'today caught':>12} {'gate s':>6} |"
        f" {'same-window caught':>18} {'inconcl.':>8} {'pairs':>9} {'window s':>8}",
    ]
    for cv, drift, arm, reg in cells(args):
        rows = [
            t
            for t in trials
            if (t["cv_pct"], t["drift_pct"], t["arm_drift_pct"], t["regression_pct"]) == (cv, drift, arm, reg)
        ]
        if not rows:
            continue
        today = sum(t["today_failed"] for t in rows)
        same = sum(t["same_window"] == "fail" for t in rows)
        inconclusive = sum(t["same_window"] == "inconclusive" for t in rows)
        pairs = sorted(t["pairs"] for t in rows)
        gate_s = sum(t["today_gate_s"] for t in rows) / len(rows)
        window_s = sum(t["same_window_s"] for t in rows) / len(rows)
        lines.append(
            f"{cv:>3g}% {drift:>4g}% {arm:>3g}% {reg:>5g}% | {_rate(today, len(rows)):>12} {gate_s:>6.0f} |"
            f" {_rate(same, len(rows)):>18} {inconclusive:>8} {f'{pairs[0]}-{pairs[-1]}':>9} {window_s:>8.0f}"
        )
    return lines


def main() -> int:
    args = parse_args()
    if args.table_from:
        saved = [json.loads(line) for line in args.table_from.read_text().splitlines() if line.strip()]
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print("\n".join(table(args, saved, 0.0, load)))
        return 0
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    os.environ.pop("OPENAI_API_KEY", None)
    knob = Knob(args)
    work = Path(tempfile.mkdtemp(prefix="gate-power-live-"))
    tok = work / "tokenizer"
    subprocess.run([sys.executable, str(TOKENIZER), str(tok), str(PROMPTS)], check=True, capture_output=True)
    port = free_port()
    knob.set(cv=args.cvs[0])
    double = subprocess.Popen(
        [sys.executable, str(DOUBLE), "--model-path", str(tok), "--host", "127.0.0.1", "--port", str(port)],
        cwd=work,
        stdout=(work / "double.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    trials: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        wait_health(f"http://127.0.0.1:{port}/health", 600)
        spec = bench_spec(args, port, tok, work)
        verify_bench.sharegpt_dataset(PROMPTS, work / "coding-sharegpt.json", args.num_prompts)
        for n in range(args.trials):  # trial by trial over all cells: a slow change of the host's load
            for cell in cells(args):  # spreads over every cell, and a cut-short run still covers them
                if args.stop_after_s and time.monotonic() - started >= args.stop_after_s:
                    break
                name = "-".join(f"{value:g}" for value in cell)
                trials.append(one_trial(args, spec, knob, cell, work / f"{name}-t{n}"))
                print(json.dumps(trials[-1]), flush=True)
                if args.out:
                    with args.out.with_suffix(".jsonl").open("a") as partial:
                        partial.write(json.dumps(trials[-1]) + "\n")
    finally:
        double.terminate()
        double.wait(timeout=30)
        knob.path.unlink(missing_ok=True)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    lines = table(args, trials, time.monotonic() - started, load)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n\n" + "\n".join(json.dumps(t) for t in trials) + "\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip the teardown of SGLang/transformers (minutes of CPU on a busy 2-core host)
