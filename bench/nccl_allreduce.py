"""NCCL all-reduce micro-benchmark through torch.distributed (bf16, one process per GPU).

usage: python3 bench/nccl_allreduce.py [--ranks 2] [--sizes 8K,32K,...] [--warmup 20] [--iters 100]
                                       [--label NAME] [--json FILE]

Each size: `warmup` untimed all-reduces, then `iters` back-to-back all-reduces timed with CUDA
events on rank 0's stream; avg latency = elapsed / iters. busbw = algbw * 2(n-1)/n with
algbw = bytes / latency (NCCL-tests convention). The NCCL environment is whatever the caller
exported (bench/device/nccl_profiles.sh sources the role's rendered file first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_SIZES = "8K,16K,32K,64K,128K,256K,512K,2M,8M,32M,128M,256M"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """'8K' -> 8192, '256M' -> 268435456, '4096' -> 4096 (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:IB|B)?\s*", text.upper())
    if not m:
        raise ValueError(f"bad size {text!r}: use an integer with an optional K/M/G suffix")
    return int(m.group(1)) * _UNITS[m.group(2)]


def human(nbytes: int) -> str:
    for unit in ("G", "M", "K"):
        if nbytes >= _UNITS[unit] and nbytes % _UNITS[unit] == 0:
            return f"{nbytes // _UNITS[unit]} {unit}iB"
    return f"{nbytes} B"


def bus_bandwidth_gbps(nbytes: int, latency_us: float, ranks: int) -> float:
    """busbw in GB/s (1e9 bytes/s) for an all-reduce of nbytes taking latency_us."""
    algbw = nbytes / (latency_us * 1e-6) / 1e9
    return algbw * 2 * (ranks - 1) / ranks


def format_table(rows: list[dict[str, Any]], label: str) -> str:
    head = f"{'size':>10} {'avg_us':>10} {'busbw_GBps':>11} {'graph_us':>10} {'graph_busbw':>11}"
    lines = [f"# all-reduce bf16 [{label}] (median of reps; graph = CUDA-graph replay)", head]
    for r in rows:
        line = f"{human(r['bytes']):>10} {r['avg_us']:>10.1f} {r['busbw_gbps']:>11.1f}"
        if "graph_us" in r:
            line += f" {r['graph_us']:>10.1f} {r['graph_busbw_gbps']:>11.1f}"
        lines.append(line)
    return "\n".join(lines)


def compare_table(runs: list[dict[str, Any]], baseline: str = "default", graph: bool = False) -> str:
    """Markdown table: avg latency (us) per size and run; busbw (GB/s) for sizes >= 2 MiB;
    (+x%) = change vs the first run labelled `baseline` (negative latency change = faster).
    graph: the CUDA-graph columns (graph_us / graph_busbw_gbps) instead of the eager ones."""
    prefix = "graph_" if graph else ""
    sizes = sorted({r["bytes"] for run in runs for r in run["results"]})
    base = next((run for run in runs if run["label"] == baseline), None)
    base_rows = {r["bytes"]: r for r in base["results"]} if base else {}
    head = "| run | " + " | ".join(human(s) for s in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 1)]
    for run in runs:
        cells = []
        rows = {r["bytes"]: r for r in run["results"]}
        for s in sizes:
            r = rows.get(s)
            if r is None:
                cells.append("-")
                continue
            key, unit = ("avg_us", "us") if s < (2 << 20) else ("busbw_gbps", "GB/s")
            key = prefix + key.replace("avg_", "") if graph else key
            cell = f"{r[key]:.1f} {unit}"
            b = base_rows.get(s)
            if b and run is not base and b[key]:
                cell += f" ({(r[key] / b[key] - 1) * 100:+.0f}%)"
            cells.append(cell)
        lines.append(f"| {run['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def nccl_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))}


def _timed(torch: Any, dist: Any, launch: Callable[[], None], n: int, reps: int) -> float:
    """Median over reps of the per-op time (us) of `launch` (n ops), the slowest rank's."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        launch()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / n)
    t = torch.tensor([statistics.median(samples)], dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _capture(torch: Any, dist: Any, x: Any, iters: int) -> Any:
    """CUDA graph of `iters` all-reduces (how SGLang's decode launches them): no host overhead."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            dist.all_reduce(x)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _worker(rank: int, ranks: int, port: int, args: argparse.Namespace) -> None:
    # torch exists on GPU hosts only: imported where needed (noqa: the tests import this file)
    import torch  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=ranks,
        device_id=torch.device("cuda", rank),
    )
    rows: list[dict[str, Any]] = []
    for nbytes in [parse_size(s) for s in args.sizes.split(",")]:
        x = torch.zeros(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        iters = args.iters if nbytes <= (8 << 20) else max(args.iters // 4, 10)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()

        def eager(x: Any = x, iters: int = iters) -> None:
            for _ in range(iters):
                dist.all_reduce(x)

        row: dict[str, Any] = {"bytes": nbytes, "iters": iters, "reps": args.reps}
        us = _timed(torch, dist, eager, iters, args.reps)
        row.update(avg_us=round(us, 2), busbw_gbps=round(bus_bandwidth_gbps(nbytes, us, ranks), 2))
        if args.graph:
            graph = _capture(torch, dist, x, iters)
            us = _timed(torch, dist, graph.replay, iters, args.reps)
            row.update(
                graph_us=round(us, 2), graph_busbw_gbps=round(bus_bandwidth_gbps(nbytes, us, ranks), 2)
            )
            del graph
        rows.append(row)
        del x
    if rank == 0:
        print(format_table(rows, args.label), flush=True)
        if args.json:
            result = {
                "label": args.label,
                "ranks": ranks,
                "dtype": "bfloat16",
                "warmup": args.warmup,
                "torch": torch.__version__,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                "gpu": torch.cuda.get_device_name(0),
                "env": nccl_env(),
                "results": rows,
            }
            with open(args.json, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(result) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2, help="processes / GPUs (default 2)")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma list (default {DEFAULT_SIZES})")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--iters", type=int, default=100, help="timed iterations (sizes > 8 MiB: iters/4)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per size; the median counts")
    p.add_argument("--graph", action="store_true", help="also time all-reduces replayed from a CUDA graph")
    p.add_argument("--label", default=os.environ.get("NCCL_BENCH_LABEL", "current env"))
    p.add_argument("--json", default="", help="append results + NCCL env as one JSON line to this file")
    p.add_argument("--compare", nargs="+", metavar="JSONL", help="print a comparison of recorded runs, exit")
    args = p.parse_args(argv)
    if args.compare:
        runs = [
            json.loads(line)
            for f in args.compare
            for line in Path(f).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        print("eager (host-launched) all-reduce:\n" + compare_table(runs))
        if all("graph_us" in r for run in runs for r in run["results"]):
            print("\nCUDA-graph replay:\n" + compare_table(runs, graph=True))
        return 0
    for s in args.sizes.split(","):
        parse_size(s)
    import torch.multiprocessing as mp  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    print(f"# NCCL env: {nccl_env() or '(none)'}", flush=True)
    for attempt in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            mp.spawn(_worker, args=(args.ranks, port, args), nprocs=args.ranks, join=True)
            return 0
        except Exception as exc:  # rendezvous port taken between bind and listen: retry
            if "EADDRINUSE" not in str(exc) or attempt == 2:
                raise
    return 1


if __name__ == "__main__":
    sys.exit(main())
