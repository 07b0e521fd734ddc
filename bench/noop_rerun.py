"""Benchmark: the no-op rerun of `sglang-deploy up` on converged lab hosts (prints figures; not a test).

In one run: N lab containers (prefix sglang-lab-cli-bench-, created in parallel) are converged once by
`sglang-deploy up`; then the no-op rerun is timed on 1 host (--limit) and on all N hosts, each with
the project's ansible.cfg and with Ansible's defaults (a config naming only what finds the code:
inventory, roles_path, collections_path; so forks 5, no pipelining, no callbacks).
Every timed run must change nothing (changed=0 on every host, rc 0), or the figures are void.

Targets (issue 11): one converged host <= 10 s on a quiet machine; N hosts <= 1.5x one host. Each
timed line prints the load average after it (figures taken on a busy machine say so) and where the
run's CPU went: the controller (the CLI, ansible-playbook, its forked workers, their docker CLI calls),
the hosts' containers (cgroup), the docker daemons. The lab hosts share the controller's CPUs, so
N hosts can take no less than their CPU seconds / CPUs: the summary prints that floor.

usage: bench/noop_rerun.py [--hosts N] [--repeat R] [--reuse] [--keep]
  --reuse  use existing containers of the prefix (skip create; still converges)
  --keep   leave the containers (default: removed at the end)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def host_cpu_s(hosts: list[str]) -> float:
    """CPU seconds the hosts' containers used so far (their cgroups: v1 cpuacct or v2 cpu.stat)."""
    total = 0.0
    for host in hosts:
        cid = subprocess.run(["docker", "inspect", "--format", "{{.Id}}", host],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        v1 = Path("/sys/fs/cgroup/cpuacct/docker") / cid / "cpuacct.usage"
        if v1.exists():
            total += int(v1.read_text()) / 1e9
            continue
        v2 = (
            Path("/sys/fs/cgroup/system.slice") / f"docker-{cid}.scope",
            Path("/sys/fs/cgroup/docker") / cid,
        )
        for base in v2:
            stat = base / "cpu.stat"
            if stat.exists():
                usage = dict(line.split() for line in stat.read_text().splitlines())
                total += int(usage["usage_usec"]) / 1e6
                break
    return total


def docker_cpu_s() -> float:
    """CPU seconds of the docker daemons (dockerd, containerd, the shims): the exec path of the connection."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            comm = (proc / "comm").read_text().strip()
            if comm in ("dockerd", "containerd") or comm.startswith("containerd-shim"):
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            continue
    return total


class Cpu:
    """Where the CPU of one timed run went: controller (the CLI, ansible-playbook, its workers and their
    docker CLI calls: waited-for children), the hosts' containers, the docker daemons."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.controller = self.hosts_s = self.docker = 0.0

    def __enter__(self) -> Cpu:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._c0, self._h0, self._d0 = ru.ru_utime + ru.ru_stime, host_cpu_s(self.hosts), docker_cpu_s()
        return self

    def __exit__(self, *exc: object) -> None:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.controller = ru.ru_utime + ru.ru_stime - self._c0
        self.hosts_s = host_cpu_s(self.hosts) - self._h0
        self.docker = docker_cpu_s() - self._d0

    @property
    def total(self) -> float:
        return self.controller + self.hosts_s + self.docker


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


Figures = dict[tuple[str, int], float]


def timed_runs(
    inv: Path, work: Path, hosts: list[str], cases: list[tuple[str, dict[str, str]]], repeat: int
) -> tuple[Figures, Figures]:
    """Median seconds and CPU seconds per (config, host count); a run that changed anything is void."""
    figures: Figures = {}
    cpus: Figures = {}
    ncpu = os.cpu_count() or 1
    for config, env in cases:
        for count, limit in ((1, hosts[0]), (len(hosts), None)):
            times, used = [], []
            for rep in range(repeat):
                with Cpu(hosts if limit is None else [limit]) as cpu:
                    took, summary = up(inv, work / f"noop-{len(figures)}-{rep}", limit, env)
                changed = {h: c["changed"] for h, c in summary["hosts"].items()}
                if any(changed.values()):
                    tasks = sorted({f"{t['role']} : {t['task']}" for t in summary.get("changed_tasks", [])})
                    print(
                        f"  VOID, NOT A NO-OP ({config}, {count} hosts): changed {changed}: {tasks}",
                        flush=True,
                    )
                slow = sorted(summary["roles"].items(), key=lambda kv: -kv[1]["elapsed_s"])[:4]
                roles = ", ".join(f"{name} {entry['elapsed_s']:.1f}s" for name, entry in slow)
                load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                print(
                    f"  {config:<20} {count} host(s): {took:6.1f}s  (load avg {load}; roles: {roles})\n"
                    f"  {'':<20} CPU {cpu.total:5.1f}s = controller {cpu.controller:.1f} + hosts "
                    f"{cpu.hosts_s:.1f} + docker daemons {cpu.docker:.1f}; {cpu.total / took:.2f} of {ncpu} "
                    f"CPUs busy",
                    flush=True,
                )
                times.append(took)
                used.append(cpu.total)
            figures[(config, count)] = statistics.median(times)
            cpus[(config, count)] = statistics.median(used)
    return figures, cpus


def report(figures: Figures, cpus: Figures, configs: list[str], fleet: int, repeat: int) -> None:
    ncpu = os.cpu_count() or 1
    print(f"\nNo-op rerun of `sglang-deploy up` on converged lab hosts, {ncpu} CPUs, median of {repeat}:")
    for config in configs:
        one, many = figures[(config, 1)], figures[(config, fleet)]
        print(f"  {config:<20} 1 host {one:6.1f}s (target <= {ONE_HOST_TARGET_S:g}s: "
              f"{'met' if one <= ONE_HOST_TARGET_S else 'NOT met'})   {fleet} hosts {many:6.1f}s "
              f"= {many / one:.2f}x one host (target <= {FLEET_RATIO_TARGET:g}x: "
              f"{'met' if many / one <= FLEET_RATIO_TARGET else 'NOT met'})")  # fmt: skip
    # The lab hosts share the controller's CPUs: N hosts need the CPU of N no-ops (the controller's
    # forked workers, the hosts' module runs, the docker exec path) on those same CPUs, so no
    # scheduling does better than CPU / CPUs. Remote hosts would bring their own CPUs.
    print(f"  CPU floor ({ncpu} CPUs shared by the controller and the lab hosts; median CPU seconds):")
    for config in configs:
        one, used, floor = figures[(config, 1)], cpus[(config, fleet)], cpus[(config, fleet)] / ncpu
        print(f"  {config:<20} 1 host {cpus[(config, 1)]:.1f} CPU-s, {fleet} hosts {used:.1f} CPU-s: "
              f"{fleet} hosts take at least {floor:.1f}s = {floor / one:.2f}x one host")  # fmt: skip
    project = [figures[("project ansible.cfg", n)] for n in (1, fleet)]
    defaults = [figures[("ansible defaults", n)] for n in (1, fleet)]
    ratios = [p / d for p, d in zip(project, defaults, strict=True)]
    print(f"  project cfg / defaults: 1 host {ratios[0]:.2f}x, {fleet} hosts {ratios[1]:.2f}x")


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
        figures, cpus = timed_runs(inv, work, hosts, cases, args.repeat)
        report(figures, cpus, [config for config, _env in cases], len(hosts), args.repeat)
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
