"""Rolling upgrade behind the real router, measured in the lab (issue 23 item 4).

A fleet of 3 replicas (tests/e2e/fleet_lab.py, as test_roll_lab.py makes it: 1 router container
converged by the sglang_router role, with its client key and --disable-retries, and 3 replica
containers from the converged replica image running the named TEST DOUBLE behind the real
sglang-kimi unit; SGLANG_E2E_FLEET_IMAGE names a prebuilt image, else one is built and removed).
Client threads send /generate through the router while
`sglang-deploy up --serial 1 --limit <first N replicas>` upgrades N = 1, 2, 3 of them (each roll
changes the double's flag, so every rolled unit restarts).
Per roll it prints the number of replicas rolled, the requests sent and failed, how long each replica
was out of the router (from polling the router's /workers every 0.5 s) and the roll's wall time. The
table is written to bench/results/fleet_roll-<date>.txt.

  .venv/bin/python bench/fleet_roll.py [--rolls 1 2 3] [--keep]
  SGLANG_E2E_FLEET_IMAGE=sglang-deploy/fleet-replica:e2e .venv/bin/python bench/fleet_roll.py

TEST NUMBERS: the replicas are a protocol double on a shared 2-CPU machine, not GPU servers. The
wall time is mostly the double's start (SGLang's modules are imported: 60-150 s) and verify's small
benchmark."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import fleet_lab  # noqa: E402
import test_roll_lab as lab  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rolls", type=int, nargs="+", default=[1, 2, 3], help="replicas per roll (1-3)")
    parser.add_argument("--keep", action="store_true", help="leave the containers in place")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fleet-roll-"))
    given = fleet_lab.replica_image_from_env()
    image = given or fleet_lab.build_replica_image(tmp / "seed")
    fleet = fleet_lab.make_fleet(
        tmp, "sglang-lab-rollbench", 3, image, lab.SERVER_VARS, router_vars=lab.ROUTER_VARS
    )
    rows = []
    try:
        for number, count in enumerate(args.rolls, start=1):
            rolled = fleet.replicas[:count]
            flag = str(30 + number)  # a new --double-ttft-ms per roll: each rolled unit restarts
            proc, traffic, wall = lab.roll(
                fleet,
                f"bench-{number}",
                fleet_lab.double_vars("--double-ttft-ms", flag),
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
            fleet_lab.remove_fleet(fleet)
            if given is None:
                fleet_lab.remove_replica_image(image)
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
    return 0 if all(rc == 0 and failed == 0 for _count, rc, _sent, failed, _out, _wall in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
