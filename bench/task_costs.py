"""Benchmark: what one task, one fork and one `docker exec` cost the machine that runs the test suite,
and what a no-op site.yml of a converged lab host costs with and without sglang.deploy.prefork.
Prints a table; not a test.

Why: `make test` on 2 CPUs is CPU-bound (bench/results/2026-12-02-make-test-cpu.txt), and nearly all
of its CPU is Ansible's per-task machinery. This says which part of a task costs what, so a cut can
be aimed (fewer task executions, skipped ones included; fewer docker execs; a smaller controller heap).

Rows (CPU = user + system seconds of this process's children, from /proc and wait4 rusage):
* ``controller task``: a play of N ``set_fact`` tasks minus a play of none, per task (against
  localhost, connection local: no remote call; each task is still a fork of ansible-playbook);
* ``skipped task``: the same N tasks with ``when: false`` (the condition is evaluated in the fork);
* ``docker exec (CLI)`` / ``docker exec (API)`` / ``docker CLI alone``: ``docker exec C true`` through
  the CLI, the same exec through the Engine API on the socket (no CLI process), and ``docker version``
  (CPU of the whole machine, /proc/stat: dockerd, containerd and runc count);
* ``fork of a N MB python``: fork + exit of a child that does nothing, for a small and a large heap;
* with ``--lab NAME`` (a converged lab host of the inventory): a no-op site.yml with the checkout's
  callbacks and with them minus sglang.deploy.prefork, alternating, ``--runs`` times each.

usage: .venv/bin/python bench/task_costs.py [--tasks 100] [--execs 20] [--lab sglang-lab --runs 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = REPO / ".venv" / "bin" / "ansible-playbook"
IMAGE = "sglang-deploy/debian12:latest"  # molecule/images/build.sh


def machine_cpu() -> float:
    """user + nice + system seconds of the whole machine (/proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:4]
    return sum(int(f) for f in fields) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU of the command and its children) of one run; the run must succeed."""
    before, started = children_cpu(), time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return time.monotonic() - started, children_cpu() - before


def play(path: Path, tasks: int, when: str | None) -> Path:
    body = []
    for i in range(tasks):
        task: dict[str, object] = {
            "name": f"t{i}",
            "ansible.builtin.set_fact": {f"x{i}": f"{{{{ {i} + 1 }}}}"},
        }
        if when is not None:
            task["when"] = when
        body.append(task)
    doc = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": body}]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def per_task(tmp: Path, tasks: int, when: str | None) -> tuple[float, float]:
    """(wall, CPU) per task: a play of ``tasks`` tasks minus an empty play, best of two."""
    empty, full = play(tmp / "empty.yml", 0, None), play(tmp / f"full-{when}.yml", tasks, when)
    cmd = [str(PLAYBOOK), "-i", "localhost,"]
    base = min((run_cpu([*cmd, str(empty)]) for _run in range(2)), key=lambda r: r[1])
    many = min((run_cpu([*cmd, str(full)]) for _run in range(2)), key=lambda r: r[1])
    return (many[0] - base[0]) / tasks, (many[1] - base[1]) / tasks


class _Unix(http.client.HTTPConnection):
    def __init__(self) -> None:
        super().__init__("localhost")

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/var/run/docker.sock")


def api_exec(container: str) -> None:
    """One `true` in the container through the Engine API (create + start, attached)."""
    conn = _Unix()
    body = json.dumps({"Cmd": ["true"], "AttachStdout": True, "AttachStderr": True})
    conn.request("POST", f"/containers/{container}/exec", body, {"Content-Type": "application/json"})
    exec_id = json.loads(conn.getresponse().read())["Id"]
    conn = _Unix()
    conn.request("POST", f"/exec/{exec_id}/start", json.dumps({"Detach": False, "Tty": False}),
                 {"Content-Type": "application/json"})  # fmt: skip
    conn.getresponse().read()


def machine_per_call(call: Callable[[], None], count: int) -> tuple[float, float]:
    """(wall, whole-machine CPU) per call of ``call``."""
    cpu, started = machine_cpu(), time.monotonic()
    for _call in range(count):
        call()
    return (time.monotonic() - started) / count, (machine_cpu() - cpu) / count


def docker_rows(execs: int) -> list[tuple[str, float, float]]:
    name = "sgd-bench-task-costs"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(
        ["docker", "run", "-d", "--name", name, "--entrypoint", "sleep", IMAGE, "600"],
        capture_output=True, check=True,
    )  # fmt: skip

    def cli_exec() -> None:
        subprocess.run(["docker", "exec", name, "true"], capture_output=True, check=True)

    def cli_alone() -> None:
        subprocess.run(["docker", "version"], capture_output=True, check=True)

    try:
        return [
            ("docker exec (CLI)", *machine_per_call(cli_exec, execs)),
            ("docker exec (API)", *machine_per_call(lambda: api_exec(name), execs)),
            ("docker CLI alone (docker version)", *machine_per_call(cli_alone, execs)),
        ]
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


FORK = r"""
import os, resource, sys, time
heap = [dict(a=i, b=str(i)) for i in range(int(sys.argv[1]))]
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(50):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (r1.ru_stime - r0.ru_stime) + (c1.ru_stime - c0.ru_stime) + (c1.ru_utime - c0.ru_utime)
print(rss, cpu / 50)
"""


def fork_rows() -> list[tuple[str, float, float]]:
    rows = []
    for objects in (0, 300_000, 1_000_000):
        out = subprocess.run(
            [sys.executable, "-c", FORK, str(objects)], capture_output=True, text=True, check=True
        )
        rss, cpu = (float(v) for v in out.stdout.split())
        rows.append((f"fork + exit of a {rss:.0f} MB python", float("nan"), cpu))
    return rows


def site_rows(lab: str, runs: int) -> list[tuple[str, float, float]]:
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from e2e_lab import INSTALLED_CALLBACKS  # noqa: PLC0415

    cmd = [str(PLAYBOOK), "site.yml", "--limit", lab]
    without = {**os.environ, "ANSIBLE_CALLBACKS_ENABLED": INSTALLED_CALLBACKS}
    results: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for _run in range(runs):
        results["with"].append(run_cpu(cmd))
        results["without"].append(run_cpu(cmd, without))
    rows = []
    for label, values in results.items():
        wall = sum(v[0] for v in values) / len(values)
        cpu = sum(v[1] for v in values) / len(values)
        rows.append((f"no-op site.yml of {lab}, {label} prefork (mean of {runs})", wall, cpu))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--execs", type=int, default=20)
    parser.add_argument("--lab", help="a converged lab host of the inventory: also time a no-op site.yml")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="sgd-task-costs-") as tmp:
        rows.append(("controller task (set_fact)", *per_task(Path(tmp), args.tasks, None)))
        rows.append(("skipped task (when: false)", *per_task(Path(tmp), args.tasks, "false")))
    rows += docker_rows(args.execs)
    rows += fork_rows()
    if args.lab:
        rows += site_rows(args.lab, args.runs)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end")
    print(f"{'what':64s} {'wall s':>9s} {'CPU s':>9s}")
    for label, wall, cpu in rows:
        print(f"{label:64s} {wall:9.4f} {cpu:9.4f}")


if __name__ == "__main__":
    main()
