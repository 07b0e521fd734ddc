"""NCCL all-reduce through torch.distributed (bf16, one process per GPU): the one implementation.

Used by the verify role (layer 4, `--verify`: one JSON document on stdout) and by the benchmark
bench/nccl_allreduce.py (a thin wrapper that loads this file; bench/device/nccl_profiles.sh).

usage: nccl_allreduce.py [--ranks 2] [--sizes 8K,32K,...] [--warmup 20] [--iters 100] [--reps 5]
                         [--graph] [--label NAME] [--json FILE] [--env-file FILE]
       nccl_allreduce.py --verify [--ranks N] [--reps 5] [--env-file FILE] [--force-env K=V ...]
                         [--max-latency-us-8k US] [--max-latency-us-512k US] [--min-busbw-gbps-256m GBPS]
       nccl_allreduce.py --compare RUNS.jsonl ...
  multi-node (one replica of several hosts, docs/multinode.md): the same command on every node at the
  same time, with [--nnodes N --node-rank R --master-addr RANK0_ADDRESS --master-port PORT]; world size
  = N x --ranks, global rank = R x --ranks + local rank; every node's local rank 0 writes the document
  (the figures are the slowest rank's of the whole world). --backend gloo runs the same all-reduces
  on the CPU (no GPU, no CUDA graph: the rendezvous and sum check of the multi-node path, tested in CI).

Each size: `warmup` untimed all-reduces, then `reps` repetitions of `iters` back-to-back
all-reduces timed with CUDA events (per-op time = elapsed / iters); a repetition counts the
slowest rank; the figure is the median over repetitions (min/max kept: the spread). `graph`: the
same all-reduces captured once in a CUDA graph and replayed (how SGLang's decode launches them:
no host overhead). busbw = algbw * 2(n-1)/n with algbw = bytes / latency (NCCL-tests convention).
Before timing, every rank checks the sum of an all-reduce of known values.

The NCCL environment: what the caller exported, plus `--env-file` (KEY=VALUE lines, e.g. the
nccl_env role's /etc/sglang/nccl.env; parsed, never executed by a shell), plus `--force-env`
(applied last: the verify role forces NVLink multicast off).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import socket
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_SIZES = "8K,16K,32K,64K,128K,256K,512K,2M,8M,32M,128M,256M"
VERIFY_SIZES = "8K,512K,256M"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


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


def summarize(samples: Iterable[float]) -> dict[str, Any]:
    """Median, min, max and spread ((max - min) / median, %) of per-repetition samples."""
    values = [float(s) for s in samples]
    if not values:
        raise ValueError("no samples")
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {
        "median": round(med, 2),
        "min": round(lo, 2),
        "max": round(hi, 2),
        "spread_pct": round((hi - lo) / med * 100, 1) if med else 0.0,
        "reps": len(values),
        "samples": [round(v, 2) for v in values],
    }


def slowest_per_rep(per_rank: list[list[float]]) -> list[float]:
    """[[rank0 rep0, rep1, ...], [rank1 ...]] -> per repetition the slowest rank's time (what _timed
    computes on the GPUs with an element-wise all-reduce MAX)."""
    if not per_rank or len({len(r) for r in per_rank}) != 1:
        raise ValueError("every rank must report the same number of repetitions")
    return [max(col) for col in zip(*per_rank, strict=True)]


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines of an environment file (systemd EnvironmentFile / `set -a; . FILE` style).

    Comments and blank lines are skipped, an optional `export ` prefix and one level of matching
    single or double quotes are removed. Nothing is expanded or executed. Other lines are errors.
    """
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ENV_LINE.match(line)
        if not m:
            raise ValueError(f"line {number}: not KEY=VALUE: {raw!r}")
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[m.group(1)] = value
    return env


def parse_force_env(items: Iterable[str]) -> dict[str, str]:
    """['NCCL_NVLS_ENABLE=0', ...] -> dict (the --force-env arguments)."""
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"--force-env {item!r}: use NAME=VALUE")
        env[name] = value
    return env


def evaluate_floors(
    figures: Mapping[str, float | None], floors: Mapping[str, float | None]
) -> tuple[str, list[str]]:
    """Compare measured figures with optional floors; returns (status, reasons).

    floors: latency_us_8k / latency_us_512k are maxima (us), busbw_gbps_256m a minimum (GB/s);
    None = record only. A missing figure with a floor set fails.
    """
    reasons: list[str] = []
    checks = (
        ("latency_us_8k", "max", "us", "8 KiB graph latency"),
        ("latency_us_512k", "max", "us", "512 KiB graph latency"),
        ("busbw_gbps_256m", "min", "GB/s", "256 MiB busbw"),
    )
    for key, kind, unit, what in checks:
        floor = floors.get(key)
        if floor is None:
            continue
        value = figures.get(key)
        if value is None:
            reasons.append(f"{what} not measured (floor {floor} {unit})")
        elif kind == "max" and value > floor:
            reasons.append(f"{what} {value:.1f} {unit} > allowed max {floor:g} {unit}")
        elif kind == "min" and value < floor:
            reasons.append(f"{what} {value:.1f} {unit} < required min {floor:g} {unit}")
    return ("failed" if reasons else "passed"), reasons


def verify_summary(
    rows: list[dict[str, Any]], floors: Mapping[str, float | None], sums_ok: bool, ranks: int
) -> dict[str, Any]:
    """The verify layer's JSON document from the measured rows (one per size)."""
    by_size = {r["bytes"]: r for r in rows}

    def graph_median(nbytes: int, key: str) -> float | None:
        row = by_size.get(nbytes)
        if row is None or key not in row:
            return None
        return float(row[key]["median"])

    big = by_size.get(256 << 20)
    figures: dict[str, float | None] = {
        "latency_us_8k": graph_median(8 << 10, "graph_stats"),
        "latency_us_512k": graph_median(512 << 10, "graph_stats"),
        "busbw_gbps_256m": (
            round(bus_bandwidth_gbps(256 << 20, big["graph_stats"]["median"], ranks), 2)
            if big and "graph_stats" in big
            else None
        ),
    }
    status, reasons = evaluate_floors(figures, floors)
    if not sums_ok:
        status, reasons = "failed", ["all-reduce returned a wrong sum", *reasons]
    reason = (
        "; ".join(reasons)
        if reasons
        else (
            f"{ranks} ranks: 8 KiB {figures['latency_us_8k']} us, 512 KiB {figures['latency_us_512k']} us"
            f" (graph replay), 256 MiB busbw {figures['busbw_gbps_256m']} GB/s"
        )
    )
    return {"status": status, "reason": reason, **figures, "floors": dict(floors), "sizes": rows}


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


def world_layout(ranks: int, nnodes: int, node_rank: int) -> tuple[int, int]:
    """(world size, global rank of this node's local rank 0): nodes x ranks, node_rank x ranks."""
    if ranks < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(
            f"--ranks {ranks} --nnodes {nnodes} --node-rank {node_rank}: need 0 <= node-rank < nnodes"
        )
    return ranks * nnodes, node_rank * ranks


def init_method(args: argparse.Namespace, port: int) -> str:
    """tcp:// rendezvous: the replica's rank 0 (--master-addr, --master-port) or this host's loopback."""
    if args.nnodes > 1:
        host = args.master_addr
        return f"tcp://[{host}]:{args.master_port}" if ":" in host else f"tcp://{host}:{args.master_port}"
    return f"tcp://127.0.0.1:{port}"


def nccl_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM_"))}


def _timed(
    torch: Any, dist: Any, launch: Callable[[], None], n: int, reps: int, *, device: str = "cuda"
) -> list[float]:
    """Per repetition the per-op time (us) of `launch` (n ops), the slowest rank's."""
    samples = []
    if device == "cpu":  # gloo: the host clock (all-reduces are synchronous there)
        for _rep in range(reps):
            dist.barrier()
            begin = time.perf_counter()
            launch()
            samples.append((time.perf_counter() - begin) * 1e6 / n)
    else:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _rep in range(reps):
            dist.barrier()
            torch.cuda.synchronize()
            start.record()
            launch()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) * 1000.0 / n)
    t = torch.tensor(samples, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def _capture(torch: Any, dist: Any, x: Any, iters: int) -> Any:
    """CUDA graph of `iters` all-reduces (how SGLang's decode launches them): no host overhead."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _warmup in range(3):
            dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _iter in range(iters):
            dist.all_reduce(x)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _check_sum(torch: Any, dist: Any, rank: int, ranks: int, device: str = "cuda") -> bool:
    """All-reduce of rank+1 (fp32, 1 Mi elements) must equal n(n+1)/2 everywhere, on every rank."""
    x = torch.full((1 << 20,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(x)
    ok = torch.tensor([1 if bool((x == ranks * (ranks + 1) / 2).all()) else 0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    return bool(ok.item())


def _worker(local: int, local_ranks: int, port: int, args: argparse.Namespace) -> None:
    # torch exists on GPU hosts only: imported where needed (noqa: the tests import this file)
    import torch  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    ranks, first = world_layout(local_ranks, args.nnodes, args.node_rank)
    rank = first + local
    device = "cpu" if args.backend == "gloo" else "cuda"
    extra: dict[str, Any] = {}
    if device == "cuda":
        torch.cuda.set_device(local)
        extra["device_id"] = torch.device("cuda", local)
    dist.init_process_group(
        args.backend,
        init_method=init_method(args, port),
        rank=rank,
        world_size=ranks,
        timeout=datetime.timedelta(seconds=args.init_timeout_s),
        **extra,
    )
    sums_ok = _check_sum(torch, dist, rank, ranks, device)
    rows: list[dict[str, Any]] = []
    for nbytes in [parse_size(s) for s in args.sizes.split(",")]:
        x = torch.zeros(nbytes // 2, dtype=torch.bfloat16, device=device)
        iters = args.iters if nbytes <= (8 << 20) else max(args.iters // 4, 10)
        for _warmup in range(args.warmup):
            dist.all_reduce(x)
        if device == "cuda":
            torch.cuda.synchronize()

        def eager(x: Any = x, iters: int = iters) -> None:
            for _iter in range(iters):
                dist.all_reduce(x)

        row: dict[str, Any] = {"bytes": nbytes, "iters": iters, "reps": args.reps}
        stats = summarize(_timed(torch, dist, eager, iters, args.reps, device=device))
        us = stats["median"]
        row.update(avg_us=us, busbw_gbps=round(bus_bandwidth_gbps(nbytes, us, ranks), 2), eager_stats=stats)
        if args.graph and device == "cuda":
            graph = _capture(torch, dist, x, iters)
            stats = summarize(_timed(torch, dist, graph.replay, iters, args.reps))
            us = stats["median"]
            row.update(
                graph_us=us,
                graph_busbw_gbps=round(bus_bandwidth_gbps(nbytes, us, ranks), 2),
                graph_stats=stats,
            )
            del graph
        rows.append(row)
        del x
    if local == 0:  # every node's local rank 0: the figures are the whole world's slowest rank's
        meta = {
            "label": args.label,
            "ranks": ranks,
            "nnodes": args.nnodes,
            "node_rank": args.node_rank,
            "backend": args.backend,
            "dtype": "bfloat16",
            "warmup": args.warmup,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if device == "cuda" else None,
            "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
            "env": nccl_env(),
        }
        if args.verify:
            doc = verify_summary(rows, _floors(args) if device == "cuda" else {}, sums_ok, ranks)
            doc.update(meta, env_file=args.env_file)
            Path(args.result_file).write_text(json.dumps(doc), encoding="utf-8")
        else:
            print(format_table(rows, args.label), flush=True)
            if not sums_ok:
                print("# WARNING: the all-reduce returned a wrong sum", flush=True)
            if args.json:
                with open(args.json, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({**meta, "sums_ok": sums_ok, "results": rows}) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def _floors(args: argparse.Namespace) -> dict[str, float | None]:
    return {
        "latency_us_8k": args.max_latency_us_8k,
        "latency_us_512k": args.max_latency_us_512k,
        "busbw_gbps_256m": args.min_busbw_gbps_256m,
    }


def apply_env(env_file: str, force: Mapping[str, str]) -> dict[str, str]:
    """Load the env file and the forced values into os.environ (children inherit it)."""
    loaded = parse_env_file(Path(env_file).read_text(encoding="utf-8")) if env_file else {}
    os.environ.update(loaded)
    os.environ.update(force)
    return loaded


def _spawn(args: argparse.Namespace) -> None:
    world_layout(args.ranks, args.nnodes, args.node_rank)  # refuses a node rank outside the replica
    if args.nnodes > 1 and not 0 < args.master_port < 65536:
        raise ValueError(
            f"--master-port {args.master_port}: the rank-0 node's port is needed with --nnodes > 1"
        )
    import torch.multiprocessing as mp  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415

    if args.nnodes > 1:  # the replica's rank 0 listens on the given port: no retry with another one
        mp.spawn(_worker, args=(args.ranks, args.master_port, args), nprocs=args.ranks, join=True)
        return
    for attempt in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            mp.spawn(_worker, args=(args.ranks, port, args), nprocs=args.ranks, join=True)
            return
        except Exception as exc:  # rendezvous port taken between bind and listen: retry
            if "EADDRINUSE" not in str(exc) or attempt == 2:
                raise


def run_verify(args: argparse.Namespace) -> dict[str, Any]:
    """Layer 4 of the verify role: never raises; returns the JSON document."""
    import tempfile  # noqa: PLC0415

    try:
        loaded = apply_env(args.env_file, parse_force_env(args.force_env))
        if args.reps < 5:
            raise ValueError(f"--reps {args.reps}: at least 5 repetitions are needed for a median")
        with tempfile.TemporaryDirectory(prefix="verify-nccl.") as tmp:
            args.result_file = str(Path(tmp) / "result.json")
            _spawn(args)
            doc: dict[str, Any] = json.loads(Path(args.result_file).read_text(encoding="utf-8"))
        doc["env_file_vars"] = loaded
        return doc
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"status": "failed", "reason": f"all-reduce benchmark did not run: {last}"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2, help="processes / GPUs (default 2)")
    p.add_argument(
        "--sizes", default=None, help=f"comma list (default {DEFAULT_SIZES}; --verify: {VERIFY_SIZES})"
    )
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--iters", type=int, default=100, help="timed iterations (sizes > 8 MiB: iters/4)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions per size; the median counts")
    p.add_argument("--graph", action="store_true", help="also time all-reduces replayed from a CUDA graph")
    p.add_argument("--label", default=os.environ.get("NCCL_BENCH_LABEL", "current env"))
    p.add_argument("--json", default="", help="append results + NCCL env as one JSON line to this file")
    p.add_argument("--compare", nargs="+", metavar="JSONL", help="print a comparison of recorded runs, exit")
    p.add_argument("--env-file", default="", help="load KEY=VALUE lines of this file (parsed, not sourced)")
    p.add_argument("--force-env", action="append", default=[], metavar="K=V", help="set last (repeatable)")
    p.add_argument("--verify", action="store_true", help="verify layer: graph timing, one JSON document")
    p.add_argument("--nnodes", type=int, default=1, help="nodes of the replica (the same command on each)")
    p.add_argument("--node-rank", type=int, default=0, help="this node's rank in the replica (0 = master)")
    p.add_argument("--master-addr", default="127.0.0.1", help="the replica's rank-0 address (--nnodes > 1)")
    p.add_argument("--master-port", type=int, default=0, help="the rendezvous port on the rank-0 node")
    p.add_argument("--init-timeout-s", type=int, default=300, help="how long the nodes wait for each other")
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl", help="gloo: CPU, no GPU needed")
    p.add_argument("--max-latency-us-8k", type=float, default=None)
    p.add_argument("--max-latency-us-512k", type=float, default=None)
    p.add_argument("--min-busbw-gbps-256m", type=float, default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    if args.verify:
        args.sizes = args.sizes or VERIFY_SIZES
        args.graph = True
        print(json.dumps(run_verify(args)), flush=True)
        return 0
    args.sizes = args.sizes or DEFAULT_SIZES
    for s in args.sizes.split(","):
        parse_size(s)
    apply_env(args.env_file, parse_force_env(args.force_env))
    print(f"# NCCL env: {nccl_env() or '(none)'}", flush=True)
    _spawn(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
