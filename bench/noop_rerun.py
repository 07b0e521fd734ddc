#!/usr/bin/env python3
"""Benchmark: the no-op rerun of `sglang-deploy up` on converged lab hosts (prints figures; not a test).

In one run: N lab containers (prefix sglang-lab-cli-bench-, created in parallel) are converged once by
`sglang-deploy up`; then the no-op rerun is timed on 1 host (--limit) and on all N hosts, each with
the project's ansible.cfg and with Ansible's defaults (a config naming only what finds the code:
inventory, roles_path, collections_path; so forks 5, no pipelining, no callbacks).
Every timed run must change nothing (changed=0 on every host, rc 0), or the figures are void.

Targets (issue 11): one converged host <= 10 s on a quiet machine; N hosts <= 1.5x one host. Each
timed line prints the load average after it: figures taken on a busy machine say so.

usage: bench/noop_rerun.py [--hosts N] [--repeat R] [--reuse] [--keep]
  --reuse  use existing containers of the prefix (skip create; still converges)
  --keep   leave the containers (default: removed at the end)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PREFIX = "sglang-lab-cli-bench-"
ONE_HOST_TARGET_S = 10.0
FLEET_RATIO_TARGET = 1.5
DEFAULTS_CFG = """[defaults]
# Ansible's defaults, except what finds the code of this checkout
inventory = inventory/lab.yml
roles_path = {repo}/roles
collections_path = {repo}/.collections
"""


def cli_exe() -> Path:
    exe = REPO / ".venv" / "bin" / "sglang-deploy"
    return exe if exe.exists() else Path(sys.executable).parent / "sglang-deploy"


def inventory(dest: Path, hosts: list[str]) -> Path:
    """An inventory of the lab containers (group_vars as inventory/lab.yml's)."""
    (dest / "group_vars").mkdir(parents=True, exist_ok=True)
    lines = [
        "all:",
        "  children:",
        "    sglang_servers:",
        "      children:",
        "        lab:",
        "          hosts:",
    ]
    for host in hosts:
        lines += [
            f"            {host}:",
            "              ansible_connection: community.docker.docker",
            f"              ansible_host: {host}",
            "              ansible_python_interpreter: /usr/bin/python3",
        ]
    (dest / "lab.yml").write_text("\n".join(lines) + "\n")
    shutil.copy(REPO / "inventory" / "group_vars" / "lab.yml", dest / "group_vars" / "lab.yml")
    link = dest / "group_vars" / "all"
    if not link.exists():
        link.symlink_to(REPO / "group_vars" / "all")
    return dest / "lab.yml"


def create(hosts: list[str]) -> None:
    def one(name: str) -> str:
        proc = subprocess.run([str(cli_exe()), "lab", "create", "--name", name],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"lab create {name}: {proc.stdout}{proc.stderr}")
        return proc.stdout.strip().splitlines()[-1]

    with ThreadPoolExecutor(len(hosts)) as pool:
        for line in pool.map(one, hosts):
            print(f"  {line}", flush=True)


def up(
    inv: Path, artifacts: Path, limit: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, dict[str, Any]]:
    cmd = [str(cli_exe()), "up", "-i", str(inv), "--artifacts", str(artifacts), "--progress", "plain"]
    if limit:
        cmd += ["--limit", limit]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          check=False)  # fmt: skip
    took = time.monotonic() - started
    summary = json.loads((artifacts / "summary.json").read_text())
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
        raise RuntimeError(f"up failed (rc {proc.returncode})")
    return took, summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per case (median)")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--no-converge", action="store_true", help="with --reuse: hosts already converged")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    hosts = [f"{PREFIX}{i}" for i in range(1, args.hosts + 1)]
    work = Path(tempfile.mkdtemp(prefix="sglang-noop-bench-"))
    inv = inventory(work / "inventory", hosts)
    defaults_cfg = work / "defaults.cfg"
    defaults_cfg.write_text(DEFAULTS_CFG.format(repo=REPO))
    try:
        t0 = time.monotonic()
        if not args.reuse:
            print(f"creating {len(hosts)} lab containers in parallel", flush=True)
            create(hosts)
        print(f"  ready after {time.monotonic() - t0:.1f}s", flush=True)
        took, summary = (0.0, {"hosts": {}}) if args.no_converge else up(inv, work / "converge")
        print(f"converge (all {len(hosts)} hosts): {took:.1f}s, changed per host "
              f"{ {h: c['changed'] for h, c in summary['hosts'].items()} }", flush=True)  # fmt: skip
        cases = [("project ansible.cfg", {}), ("ansible defaults", {"ANSIBLE_CONFIG": str(defaults_cfg)})]
        figures: dict[tuple[str, int], float] = {}
        void: list[str] = []
        for config, env in cases:
            for count, limit in ((1, hosts[0]), (len(hosts), None)):
                times = []
                for rep in range(args.repeat):
                    took, summary = up(inv, work / f"noop-{len(figures)}-{rep}", limit, env)
                    changed = {h: c["changed"] for h, c in summary["hosts"].items()}
                    if any(changed.values()):
                        void.append(f"{config}, {count} host(s)")
                        tasks = sorted(
                            {f"{t['role']} : {t['task']}" for t in summary.get("changed_tasks", [])}
                        )
                        print(
                            f"  NOT A NO-OP ({config}, {count} hosts): changed {changed}: {tasks}", flush=True
                        )
                    slow = sorted(summary["roles"].items(), key=lambda kv: -kv[1]["elapsed_s"])[:4]
                    roles = ", ".join(f"{name} {entry['elapsed_s']:.1f}s" for name, entry in slow)
                    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                    print(
                        f"  {config:<20} {count} host(s): {took:6.1f}s  (load avg {load}; roles: {roles})",
                        flush=True,
                    )
                    times.append(took)
                figures[(config, count)] = statistics.median(times)
        print(f"\nNo-op rerun of `sglang-deploy up` on converged lab hosts, {os.cpu_count()} CPUs, "
              f"median of {args.repeat}:")  # fmt: skip
        for config, _ in cases:
            one, fleet = figures[(config, 1)], figures[(config, len(hosts))]
            print(f"  {config:<20} 1 host {one:6.1f}s (target <= {ONE_HOST_TARGET_S:g}s: "
                  f"{'met' if one <= ONE_HOST_TARGET_S else 'NOT met'})   {len(hosts)} hosts {fleet:6.1f}s "
                  f"= {fleet / one:.2f}x one host (target <= {FLEET_RATIO_TARGET:g}x: "
                  f"{'met' if fleet / one <= FLEET_RATIO_TARGET else 'NOT met'})")  # fmt: skip
        if void:
            print(f"  VOID (a run changed something, so it was no no-op): {'; '.join(void)}")
        project = [figures[("project ansible.cfg", n)] for n in (1, len(hosts))]
        defaults = [figures[("ansible defaults", n)] for n in (1, len(hosts))]
        print(
            f"  project cfg / defaults: 1 host {project[0] / defaults[0]:.2f}x, "
            f"{len(hosts)} hosts {project[1] / defaults[1]:.2f}x"
        )
    finally:
        if not args.keep:
            for host in hosts:
                subprocess.run(
                    [str(cli_exe()), "lab", "destroy", "--name", host], capture_output=True, check=False
                )
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
