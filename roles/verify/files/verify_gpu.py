"""verify layer 1 (GPU): what nvidia-smi reports now agrees with preflight's facts, and the
nvidia-uvm device nodes exist (CUDA cannot start without them; a GPU Operator validator once
reported Ready while they were missing).

usage: verify_gpu.py --smi-candidates /usr/bin/nvidia-smi,... --expect '{"count": 2, "names": [...],
                     "compute_capability": "9.0", "driver_version": "580.159.04"}'
                     [--uvm-nodes /dev/nvidia-uvm,/dev/nvidia-uvm-tools]
Prints one JSON document {"status": "passed"|"failed", "reason": ..., "gpus": [...], ...}; exit 0
(the role decides), also when something unexpected breaks (status failed, reason says what).
Standard library only: runs with the host's python.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

QUERY = "index,name,compute_cap,driver_version,memory.total,pci.bus_id"


def parse_query(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` -> one dict per GPU."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4 or not cells[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        gpu: dict[str, Any] = {
            "index": int(cells[0]),
            "name": cells[1],
            "compute_capability": cells[2],
            "driver_version": cells[3],
        }
        if len(cells) > 4 and cells[4].isdigit():
            gpu["memory_mib"] = int(cells[4])
        if len(cells) > 5:
            gpu["pci_bus_id"] = cells[5]
        gpus.append(gpu)
    return gpus


def _cc_key(cc: str) -> tuple[int, ...]:
    return tuple(int(p) for p in cc.split(".") if p.isdigit())


def compare(gpus: Sequence[Mapping[str, Any]], expect: Mapping[str, Any]) -> list[str]:
    """Mismatches between the GPUs found now and preflight's facts (empty = they agree)."""
    problems = []
    count = int(expect.get("count", 0))
    if len(gpus) != count:
        problems.append(f"nvidia-smi reports {len(gpus)} GPU(s), preflight_gpu_count={count}")
    names = list(expect.get("names") or [])
    found_names = [g["name"] for g in gpus]
    if names and found_names != names:
        problems.append(f"GPU names {found_names} != preflight_gpu_names {names}")
    cc = str(expect.get("compute_capability") or "")
    if cc and gpus:
        lowest = min((g["compute_capability"] for g in gpus), key=_cc_key)
        if lowest != cc:
            problems.append(f"compute capability {lowest} != preflight_gpu_compute_capability {cc}")
    driver = str(expect.get("driver_version") or "")
    if driver:
        bad = sorted({g["driver_version"] for g in gpus if g["driver_version"] != driver})
        if bad:
            problems.append(f"driver {', '.join(bad)} != preflight_driver_version {driver}")
    return problems


def check_nodes(paths: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Each path must exist as a character device: ({path: 'char device'|'missing'|...}, problems)."""
    state: dict[str, str] = {}
    problems = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            state[path] = "missing"
        else:
            state[path] = "char device" if stat.S_ISCHR(mode) else "not a character device"
        if state[path] != "char device":
            problems.append(f"{path} {state[path]} (nvidia-uvm not loaded? `nvidia-modprobe -u -c=0`)")
    return state, problems


def run(args: argparse.Namespace) -> dict[str, Any]:
    expect = json.loads(args.expect)
    smi = next((p for p in args.smi_candidates.split(",") if p and os.access(p, os.X_OK)), "")
    if not smi:
        return {"status": "failed", "reason": f"nvidia-smi not found in {args.smi_candidates}"}
    proc = subprocess.run(
        [smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if proc.returncode != 0:
        out = (proc.stdout + " " + proc.stderr).strip()
        return {"status": "failed", "reason": f"`{smi}` exited {proc.returncode}: {out}", "nvidia_smi": smi}
    gpus = parse_query(proc.stdout)
    problems = compare(gpus, expect)
    nodes, node_problems = check_nodes(p for p in args.uvm_nodes.split(",") if p)
    problems += node_problems
    names = sorted({g["name"] for g in gpus})
    ccs = ", ".join(sorted({g["compute_capability"] for g in gpus}))
    drivers = ", ".join(sorted({g["driver_version"] for g in gpus}))
    summary = f"{len(gpus)}x {'/'.join(names)} (CC {ccs}), driver {drivers}"
    summary += f", {len(nodes)} nvidia-uvm node(s) present"
    return {
        "status": "failed" if problems else "passed",
        "reason": "; ".join(problems) if problems else summary,
        "nvidia_smi": smi,
        "gpu_count": len(gpus),
        "gpus": gpus,
        "uvm_nodes": nodes,
        "expected": expect,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--smi-candidates", required=True, help="comma list of nvidia-smi paths, first executable wins"
    )
    p.add_argument("--expect", required=True, help="JSON: count, names, compute_capability, driver_version")
    p.add_argument("--uvm-nodes", default="/dev/nvidia-uvm,/dev/nvidia-uvm-tools")
    args = p.parse_args(argv)
    try:
        doc = run(args)
    except Exception as exc:
        doc = {"status": "failed", "reason": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
