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

A trial: record a baseline (``--baseline-reps`` repetitions of every level, healthy pace), then gate a
run of ``--gate-reps`` repetitions at the regressed pace; "caught" = the gate failed the run (for
regression 0 % that is a false failure).

Run it with a python that has SGLang and its bench_serving. The patch tests' venv (tests/patches_fixtures.py)
has them, but its pyarrow is too new for its datasets (bench_serving imports datasets); a small venv in
front of it with an older pyarrow works, and gives the double its own release dir for the knob file:
  python3 -m venv .cache/gate-power-live/venv
  .cache/gate-power-live/venv/bin/pip install pyarrow==20.0.0
  echo "$PWD/.cache/patch-venv/venv/lib/python3.11/site-packages" \
      > .cache/gate-power-live/venv/lib/python3.11/site-packages/zz-patch-venv.pth
  .cache/gate-power-live/venv/bin/python bench/gate_power_live.py --trials 10 --cv 3 --regressions 0,10
"""

from __future__ import annotations

import argparse
import json
import os
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
from gate_power import G  # noqa: E402  (the real gate code, loaded as the role's module_utils)

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


def measure(spec: dict[str, Any], dataset: Path, logdir: Path, reps: int) -> list[dict[str, Any]]:
    """``reps`` rounds of every level through the role's runner -> the role's per-level summaries."""
    rows = []
    logdir.mkdir(parents=True, exist_ok=True)
    for rep in range(reps):
        for level in spec["levels"]:
            item = verify_bench.run_level({**spec, "repetitions": reps}, level, dataset, logdir, "", rep=rep)
            rows.append(G.summarize_level(level, item.get("result"), int(spec["num_prompts"])))
    combined: list[dict[str, Any]] = G.combine_repetitions(rows)
    return combined


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10, help="trials per regression")
    parser.add_argument("--cv", type=float, default=3.0, help="the double's jitter_cv knob, in %%")
    parser.add_argument("--jitter-period-s", type=float, default=5.0)
    parser.add_argument("--regressions", default="0,10")
    parser.add_argument("--levels", default="1,4")
    parser.add_argument("--num-prompts", type=int, default=12)
    parser.add_argument("--output-len", type=int, default=48)
    parser.add_argument("--tokens-per-s", type=float, default=100.0, help="the double's pace per request")
    parser.add_argument("--tolerance", type=float, default=5.0, help="verify_gate_tolerance_pct")
    parser.add_argument("--k", type=float, default=3.0, help="verify_gate_noise_k")
    parser.add_argument("--gate-reps", type=int, default=3)
    parser.add_argument("--baseline-reps", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the table and the trials (JSON) here")
    args = parser.parse_args()
    args.levels = [int(x) for x in args.levels.split(",")]
    args.regressions = [float(x) for x in args.regressions.split(",")]
    return args


class Knob:
    """The double's release file protocol-double.json (read at every request): pace and jitter."""

    def __init__(self, args: argparse.Namespace) -> None:
        # the double reads <release>/protocol-double.json, <release> = the parent of the venv running it
        self.path = Path(os.path.realpath(sys.prefix)).parent / "protocol-double.json"
        self.args = args

    def set(self, regression: float) -> None:
        data = {
            "tokens_per_s": self.args.tokens_per_s * (1.0 - regression / 100.0),
            "jitter_cv": self.args.cv / 100.0,
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


def one_trial(
    args: argparse.Namespace, spec: dict[str, Any], knob: Knob, reg: float, logdir: Path
) -> dict[str, Any]:
    """Record a baseline at the healthy pace, gate a run at the regressed pace (the role's functions)."""
    dataset = Path(spec["workdir"]) / "coding-sharegpt.json"
    fp = G.fingerprint({"model_path": spec["model"], "preset": "production", "levels": args.levels})
    knob.set(0.0)
    base = measure(spec, dataset, logdir / "base", args.baseline_reps)
    record = G.baseline_record(base, fp, recorded_at="live", release_id="r1")
    baseline = G.select_baseline(fp, records=G.records_with({}, record), seed_table={}, seed_match={})
    knob.set(reg)
    run = measure(spec, dataset, logdir / "gate", args.gate_reps)
    outcome = G.gate_outcome(
        G.gate(run, baseline, args.tolerance, args.k), baseline, record="auto", layers_ok=True
    )
    return {
        "regression_pct": reg,
        "failed": outcome["status"] == "failed",
        "baseline_cv_pct": {str(r["level"]): (r.get("output_tps_spread") or {}).get("cv_pct") for r in base},
        "baseline_tps": {str(r["level"]): r.get("output_tps") for r in base},
        "gated_tps": {str(r["level"]): r.get("output_tps") for r in run},
    }


def table(args: argparse.Namespace, trials: list[dict[str, Any]], seconds: float) -> list[str]:
    lines = [
        f"verify gate power, LIVE: bench_serving against the protocol double (jitter knob {args.cv:g} %,"
        f" period {args.jitter_period_s:g} s, {args.tokens_per_s:g} tok/s per request),",
        f"levels {args.levels}, {args.num_prompts} prompts x {args.output_len} tokens, gate floor"
        f" {args.tolerance:g} %, k {args.k:g}, {args.baseline_reps} baseline / {args.gate_reps} gate"
        f" repetitions; {seconds:.0f} s",
        f"{'regression':>10} | {'trials':>6} | {'gate failed':>11} | {'rate':>11} |"
        " baseline CV measured (median over the trials)",
    ]
    for reg in args.regressions:
        rows = [t for t in trials if t["regression_pct"] == reg]
        failed = sum(t["failed"] for t in rows)
        cvs = {}
        for level in args.levels:
            values = sorted(v for t in rows if (v := t["baseline_cv_pct"].get(str(level))) is not None)
            cvs[level] = values[len(values) // 2] if values else None
        rate = f"{'false' if reg == 0 else 'caught'} {failed / max(len(rows), 1) * 100:.0f}%"
        cv_text = ", ".join(f"C={lv}: {cv} %" for lv, cv in cvs.items())
        lines.append(
            f"{'-' + format(reg, 'g') + '%':>10} | {len(rows):>6} | {failed:>11} | {rate:>11} | {cv_text}"
        )
    return lines


def main() -> int:
    args = parse_args()
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    os.environ.pop("OPENAI_API_KEY", None)
    knob = Knob(args)
    work = Path(tempfile.mkdtemp(prefix="gate-power-live-"))
    tok = work / "tokenizer"
    subprocess.run([sys.executable, str(TOKENIZER), str(tok), str(PROMPTS)], check=True, capture_output=True)
    port = free_port()
    knob.set(0.0)
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
        for reg in args.regressions:
            for n in range(args.trials):
                trials.append(one_trial(args, spec, knob, reg, work / f"r{reg:g}-t{n}"))
                print(json.dumps(trials[-1]), flush=True)
    finally:
        double.terminate()
        double.wait(timeout=30)
        knob.path.unlink(missing_ok=True)
    lines = table(args, trials, time.monotonic() - started)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n\n" + "\n".join(json.dumps(t) for t in trials) + "\n")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip the teardown of SGLang/transformers (minutes of CPU on a busy 2-core host)
