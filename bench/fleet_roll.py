#!/usr/bin/env python3
"""Rolling upgrade behind the real router, measured in the lab (issue 23 item 4).

A fleet of 3 replicas (tests/e2e/test_roll_lab.py's helpers: 1 sglang-router 0.3.2 container and 3
replica containers running the named TEST DOUBLE behind the real sglang-kimi unit). Client threads
send /generate through the router while `sglang-deploy up --serial 1 --limit <first N replicas>`
upgrades N = 1, 2, 3 of them (each roll changes the double's flag, so every rolled unit restarts).
Per roll it prints the number of replicas rolled, the requests sent and failed, how long each replica
was out of the router (from polling the router's /workers every 0.5 s) and the roll's wall time. The
table is written to bench/results/fleet_roll-<date>.txt.

  .venv/bin/python bench/fleet_roll.py [--rolls 1 2 3] [--keep]

TEST NUMBERS: the replicas are a protocol double on a shared 2-CPU machine, not GPU servers. The
wall time is mostly the double's start (SGLang's modules are imported: 60-150 s) and verify's small
benchmark."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import test_roll_lab as lab  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rolls", type=int, nargs="+", default=[1, 2, 3], help="replicas per roll (1-3)")
    parser.add_argument("--keep", action="store_true", help="leave the containers in place")
    parser.add_argument(
        "--reuse",
        type=Path,
        help="a fleet made earlier (its fleet.json: router, replicas, network, inventory)",
    )
    args = parser.parse_args()
    if args.reuse:
        data = json.loads(args.reuse.read_text())
        fleet = lab.Fleet(data["router"], data["replicas"], data["network"], Path(data["inventory"]),
                          Path(data["tmp"]), data["router_ip"], data.get("created_s", 0.0))  # fmt: skip
        args.keep = True
    else:
        tmp = Path(tempfile.mkdtemp(prefix="fleet-roll-"))
        fleet = lab.make_fleet(tmp, prefix="sglang-lab-rollbench")
    rows = []
    try:
        for number, count in enumerate(args.rolls, start=1):
            rolled = fleet.replicas[:count]
            flag = str(30 + number)  # a new --double-ttft-ms per roll: each rolled unit restarts
            proc, traffic, wall = lab.roll(
                fleet,
                f"bench-{number}",
                lab.double_vars("--double-ttft-ms", flag),
                "--limit",
                ",".join(rolled),
            )
            out = {}
            for name in rolled:
                windows = traffic.out_windows(fleet.worker_url(name))
                out[name] = sum(back - left for left, _gone, back in windows)
            rows.append((count, proc.returncode, traffic.sent, len(traffic.failed), out, wall))
    finally:
        if not args.keep:
            lab.remove_fleet(fleet)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"# {stamp} bench/fleet_roll.py --rolls {' '.join(map(str, args.rolls))} (TEST NUMBERS: protocol "
        f"double, no GPU, shared {os.cpu_count()}-CPU machine; fleet of 3 set up in {fleet.created_s:.0f}s)",
        "replicas  rc  requests  failed  out of the router per replica (s)            roll wall (s)",
    ]
    for count, rc, sent, failed, out, wall in rows:
        times = ", ".join(f"{name.rsplit('-', 1)[-1]}: {secs:.1f}" for name, secs in out.items())
        lines.append(f"{count:>8}  {rc:>2}  {sent:>8}  {failed:>6}  {times:<45}  {wall:>12.0f}")
    text = "\n".join(lines) + "\n"
    print(text)
    results = REPO / "bench" / "results" / f"fleet_roll-{time.strftime('%Y-%m-%d')}.txt"
    with results.open("a", encoding="utf-8") as fh:
        fh.write(text)
    print(f"written to {results}")
    return 0 if all(rc == 0 and failed == 0 for _, rc, _, failed, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
