"""Benchmark: how steady the protocol test double's pace stays when the machine's CPUs are busy, for
the two ways a stream can be paced. Prints a table; not a test.

The double (playbooks/lab/sglang_protocol_double.py) streams a request's tokens at ``tokens_per_s``
after ``ttft``. Paced with a RELATIVE sleep per step, every late wake-up adds to the stream's length,
so the measured output tok/s drops with the host's load; paced by DEADLINE (step i due at
start + i / rate, what the double does), a late wake-up is caught up by the next steps. On the 2-CPU
CI machine the e2e runs beside molecule, so the load changes between the run that records a baseline
and the run the gate judges: this is the drift the gate saw as a regression.

The loop is the double's (asyncio, one coroutine per stream, ``--concurrency`` streams pulling from
``--prompts`` requests, as bench_serving does at one level); the load is ``--busy`` processes spinning
on the CPUs. Without the double's imports (SGLang, its tokenizer) only the pacing is measured.

usage: .venv/bin/python bench/double_pace.py [--busy 0,6] [--runs 15] [--concurrency 4] [--prompts 12]
                            [--output-len 48] [--tokens-per-s 100] [--ttft-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time


async def stream(mode: str, output_len: int, rate: float, ttft: float) -> None:
    await asyncio.sleep(ttft)
    start = time.monotonic()
    due = 0.0
    for _token in range(1, output_len):
        if mode == "relative":
            await asyncio.sleep(1.0 / rate)
        else:
            due += 1.0 / rate
            await asyncio.sleep(max(0.0, start + due - time.monotonic()))


async def level(mode: str, args: argparse.Namespace) -> float:
    """One benchmark level: output tok/s over the level's wall time."""
    queue = list(range(args.prompts))
    began = time.monotonic()

    async def worker() -> None:
        while queue:
            queue.pop()
            await stream(mode, args.output_len, args.tokens_per_s, args.ttft_ms / 1000.0)

    await asyncio.gather(*(worker() for _worker in range(args.concurrency)))
    return float(args.prompts * args.output_len / (time.monotonic() - began))


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--busy", default="0,6", help="spinning processes per row, comma-separated")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--output-len", type=int, default=48)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    args = parser.parse_args()
    ideal = args.concurrency * args.tokens_per_s
    print(
        f"C={args.concurrency}, {args.prompts} prompts x {args.output_len} tokens at "
        f"{args.tokens_per_s:g} tok/s, {args.runs} runs per row, {multiprocessing.cpu_count()} CPUs"
    )
    print(f"output tok/s per run (ceiling {ideal:g})")
    print(f"{'busy':>4} {'pacing':>9} {'mean':>7} {'min':>7} {'max':>7} {'cv %':>6} {'vs idle':>8}")
    idle: dict[str, float] = {}
    for busy in (int(b) for b in args.busy.split(",")):
        spinners = [
            multiprocessing.Process(target=spin, args=(3600.0,), daemon=True) for _spinner in range(busy)
        ]
        for p in spinners:
            p.start()
        try:
            for mode in ("relative", "deadline"):
                xs = [asyncio.run(level(mode, args)) for _run in range(args.runs)]
                mean = statistics.mean(xs)
                idle.setdefault(mode, mean)
                cv = 100.0 * statistics.stdev(xs) / mean if len(xs) > 1 else 0.0
                print(
                    f"{busy:>4} {mode:>9} {mean:7.1f} {min(xs):7.1f} {max(xs):7.1f} {cv:6.2f} "
                    f"{100.0 * (mean / idle[mode] - 1):+7.1f}%"
                )
        finally:
            for p in spinners:
                p.terminate()


if __name__ == "__main__":
    main()
