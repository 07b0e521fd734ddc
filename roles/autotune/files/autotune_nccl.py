"""NCCL part of the autotune role: all-reduce latency/busbw of candidate NCCL environments, interleaved.

Run on the GPU host with the release venv's python, next to the verify role's nccl_allreduce.py (the
one all-reduce implementation: its check sum, CUDA-graph capture and timing are used here, not copied):

    python autotune_nccl.py '<spec JSON>'        -> one JSON document (the measurements) on stdout

spec: {"candidates": [{"name": "defaults", "vars": {}}, ...], "ranks": 2,
       "decode_sizes": "8K,32K,128K,512K", "prefill_sizes": "32M,256M", "reps": 7, "iters": 100,
       "prefill_iters": 20, "warmup": 10, "force_env": {"NCCL_NVLS_ENABLE": "0", ...},
       "start_timeout_s": 300, "rep_timeout_s": 120}

NCCL reads its environment once per process, so every candidate gets its own processes (one per tp
GPU, environment = this process's without NCCL_* variables, + the candidate's variables, + force_env
last). All candidates start together and stay alive (one process group each, every size captured
once in a CUDA graph); then repetition r runs every candidate in turn, the order rotated by one each
repetition (interleaved: drift hits all alike). One repetition of a candidate = for every size, one
untimed replay, then one timed replay of `iters` all-reduces (per-op time of the slowest rank).
A candidate that fails to start or stops answering is recorded with its error; the others go on.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MARK = "@@autotune "


def _impl_path() -> None:
    """nccl_allreduce.py beside this file (the role copies it there), else the verify role's in a checkout."""
    for folder in (HERE, HERE.parents[1] / "verify" / "files"):
        if (folder / "nccl_allreduce.py").is_file():
            sys.path.insert(0, str(folder))
            return


def _log(text: str) -> None:
    print(f"[autotune_nccl {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _say(obj: dict[str, Any]) -> None:
    print(MARK + json.dumps(obj), flush=True)


def worker(cfg: dict[str, Any]) -> None:
    """One rank of one candidate: init, capture every size, then answer `rep` / `quit` on stdin."""
    _impl_path()
    import nccl_allreduce as impl  # type: ignore[import-not-found]  # noqa: PLC0415
    import torch  # type: ignore[import-not-found]  # noqa: PLC0415
    import torch.distributed as dist  # type: ignore[import-not-found]  # noqa: PLC0415

    rank, ranks = int(cfg["rank"]), int(cfg["ranks"])
    torch.cuda.set_device(rank)
    _say({"imported": rank})
    if sys.stdin.readline().strip() != "init":  # the controller starts the candidates' NCCL one at a time
        return
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{cfg['port']}",
        rank=rank,
        world_size=ranks,
        device_id=torch.device("cuda", rank),
    )
    sums_ok = impl._check_sum(torch, dist, rank, ranks)
    graphs: list[tuple[int, Any, int, Any]] = []
    for nbytes in [impl.parse_size(s) for s in cfg["sizes"]]:
        x = torch.zeros(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        iters = int(cfg["iters"]) if nbytes <= (8 << 20) else int(cfg["prefill_iters"])
        for _warmup in range(int(cfg["warmup"])):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        graphs.append((nbytes, impl._capture(torch, dist, x, iters), iters, x))
    _say(
        {
            "ready": rank,
            "sums_ok": sums_ok,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpu": torch.cuda.get_device_name(rank),
            "env": impl.nccl_env(),
        }
    )
    for line in sys.stdin:
        if line.strip() != "rep":
            break
        out: dict[str, float] = {}
        for nbytes, graph, iters, _x in graphs:
            graph.replay()  # untimed: wakes the communicator after the other candidates' turns
            torch.cuda.synchronize()
            out[str(nbytes)] = round(impl._timed(torch, dist, graph.replay, iters, 1)[0], 3)
        _say({"rep": rank, "samples": out})
    # No destroy_process_group(): with the captured graphs alive it can hang; the process exit frees
    # the communicator (the controller does not wait for a clean NCCL shutdown).
    sys.stdout.flush()
    os._exit(0)


class Candidate:
    """The processes of one candidate (one per rank) and what they said."""

    def __init__(self, spec: dict[str, Any], cand: dict[str, Any], env: dict[str, str]) -> None:
        self.name = str(cand["name"])
        self.vars = {str(k): str(v) for k, v in (cand.get("vars") or {}).items()}
        self.spec = spec
        self.env = env
        self.procs: list[subprocess.Popen[str]] = []
        self.queues: list[queue.Queue[dict[str, Any]]] = []
        self.tails: list[deque[str]] = []
        self.error = ""
        self.info: dict[str, Any] = {}
        self.samples: dict[str, list[float]] = {}

    def start(self) -> None:
        port = _free_port()
        ranks = int(self.spec["ranks"])
        for rank in range(ranks):
            cfg = {**self.spec, "rank": rank, "port": port, "candidates": None}
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=self.env, bufsize=1,
            )  # fmt: skip
            q: queue.Queue[dict[str, Any]] = queue.Queue()
            tail: deque[str] = deque(maxlen=8)
            threading.Thread(target=_read, args=(proc, q, tail), daemon=True).start()
            self.procs.append(proc)
            self.queues.append(q)
            self.tails.append(tail)

    def collect(self, key: str, timeout_s: float) -> list[dict[str, Any]] | None:
        """One message with `key` from every rank, or None (then self.error says why)."""
        got: list[dict[str, Any]] = []
        if timeout_s <= 0:
            self.fail(f"no time left for '{key}' (deadline_s)", 0)
            return None
        deadline = time.monotonic() + timeout_s
        for rank, q in enumerate(self.queues):
            while True:
                left = deadline - time.monotonic()
                try:
                    msg = q.get(timeout=max(left, 0.01))
                except queue.Empty:
                    self.fail(f"rank {rank} gave no '{key}' within {timeout_s:g}s", rank)
                    return None
                if msg.get("eof"):
                    self.fail(f"rank {rank} exited (rc {self.procs[rank].poll()})", rank)
                    return None
                if key in msg:
                    got.append(msg)
                    break
        return got

    def fail(self, why: str, rank: int) -> None:
        tail = " | ".join(line for line in self.tails[rank] if line.strip())[-600:]
        self.error = f"{why}: {tail}" if tail else why
        self.stop(kill=True)

    def send(self, text: str) -> bool:
        try:
            for proc in self.procs:
                assert proc.stdin is not None
                proc.stdin.write(text + "\n")
                proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self.fail(f"could not reach a rank: {exc}", 0)
            return False
        return True

    def quit(self) -> None:
        """Ask every rank to exit (one that is gone already is fine: the measurements are in)."""
        for proc in self.procs:
            try:
                assert proc.stdin is not None
                proc.stdin.write("quit\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def stop(self, kill: bool = False, grace_s: float = 0.1) -> None:
        """Reap the processes: each gets grace_s to exit (kill=False: after a `quit`), then SIGKILL."""
        if not kill:
            self.quit()
        end = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(end - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _read(proc: subprocess.Popen[str], q: queue.Queue[dict[str, Any]], tail: deque[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(MARK):
            q.put(json.loads(line[len(MARK) :]))
        else:
            tail.append(line.rstrip())
    q.put({"eof": True})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _sizes(text: str) -> list[str]:
    return [s.strip() for s in str(text).split(",") if s.strip()]


def _start(cands: list[Candidate], spec: dict[str, Any], deadline: float) -> None:
    """Imports in parallel (the slow part of a start), then NCCL init + capture one candidate at a time."""
    for c in cands:
        c.start()
    for c in cands:
        c.collect("imported", min(float(spec.get("start_timeout_s", 300)), deadline - time.monotonic()))
    for c in cands:
        if c.error or not c.send("init"):
            continue
        t0 = time.monotonic()
        ready = c.collect("ready", min(float(spec.get("init_timeout_s", 90)), deadline - time.monotonic()))
        if ready is not None:
            c.info = ready[0]
            c.info["sums_ok"] = all(m["sums_ok"] for m in ready)
        _log(f"{c.name}: {'ready' if ready else 'FAILED: ' + c.error[:300]} ({time.monotonic() - t0:.1f} s)")


def _one_rep(c: Candidate, timeout_s: float) -> None:
    """One repetition of one candidate: every size once; rank 0's per-op times (the slowest rank's)."""
    if c.error or not c.send("rep"):
        return
    answers = c.collect("rep", timeout_s)
    if answers is None:
        return
    for size, us in next(m for m in answers if m["rep"] == 0)["samples"].items():
        c.samples.setdefault(size, []).append(float(us))


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    _impl_path()
    import nccl_allreduce as impl  # noqa: PLC0415

    decode, prefill = _sizes(spec["decode_sizes"]), _sizes(spec["prefill_sizes"])
    spec = {**spec, "sizes": decode + prefill}
    force = {str(k): str(v) for k, v in (spec.get("force_env") or {}).items()}
    base = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    started = time.time()
    cands = []
    for cand in spec["candidates"]:
        env = {**base, **{str(k): str(v) for k, v in (cand.get("vars") or {}).items()}, **force}
        cands.append(Candidate(spec, cand, env))
    deadline = time.monotonic() + float(spec.get("deadline_s", 1500))
    _start(cands, spec, deadline)
    reps = int(spec["reps"])
    for rep in range(reps):
        k = rep % len(cands)
        for c in cands[k:] + cands[:k]:
            _one_rep(c, min(float(spec.get("rep_timeout_s", 120)), deadline - time.monotonic()))
        _log(f"repetition {rep + 1}/{reps} done")
    for c in cands:  # quit every candidate first, then reap (kill what does not exit within seconds)
        if not c.error:
            c.quit()
    for c in cands:
        c.stop(kill=True, grace_s=10)
    first = next((c.info for c in cands if c.info), {})
    return {
        "kind": "sglang-deploy autotune NCCL measurements",
        "ranks": int(spec["ranks"]),
        "reps": reps,
        "iters": int(spec["iters"]),
        "prefill_iters": int(spec["prefill_iters"]),
        "warmup": int(spec["warmup"]),
        "dtype": "bfloat16",
        "method": "CUDA-graph replay, per-op time of the slowest rank; repetitions interleaved across "
        "candidates (order rotated each repetition); one process group per candidate kept alive",
        "decode_sizes": [impl.parse_size(s) for s in decode],
        "prefill_sizes": [impl.parse_size(s) for s in prefill],
        "force_env": force,
        "torch": first.get("torch"),
        "nccl": first.get("nccl"),
        "gpu": first.get("gpu"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.time() - started, 1),
        "candidates": [
            {
                "name": c.name,
                "vars": c.vars,
                "error": c.error or None,
                "sums_ok": bool(c.info.get("sums_ok")),
                "env_seen": c.info.get("env", {}),
                "samples": c.samples,
            }
            for c in cands
        ],
    }


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--worker":
        worker(json.loads(argv[1]))
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    if int(spec.get("reps", 0)) < 5:
        raise SystemExit("reps must be >= 5 (a median and a spread need repetitions)")
    print(json.dumps(measure(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
