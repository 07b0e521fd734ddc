"""Benchmark: fresh install of the SAME lock three ways, in one run (prints figures; not a test).

  1. role      a play running roles/sglang_stack with that lock (no compile) - includes creating the
               release, patching, the release checks (imports + SGLang's parser), receipt, link switch
  2. raw uv    uv venv + uv pip sync --require-hashes LOCK
  3. pip mod.  ansible.builtin.pip requirements=LOCK (pip install --require-hashes --no-deps into a
               venv: the lock is complete, and pip's resolver would reject the flashinfer override)

All three run inside one fresh Debian 12 test container (python3.11), each into a fresh venv,
UV_LINK_MODE=copy for both uv paths (the role's default). SGLang from the PyPI wheel.

Cache modes:
  warm (default)  every artefact already in the download caches (uv's shared cache; pip's cache is
                  filled by an untimed warm-up). The page cache is made fair first: an untimed raw-uv
                  install reads the uv cache into memory, then role and raw uv ALTERNATE --repeat
                  times and the medians are compared (the first install after pip's 11 GB run was
                  measured 51 s vs 28-31 s for the same command: order alone skews a single run).
  cold            a fresh, empty cache per path: each one downloads everything from the index, as on
                  a new host.

usage: bench/stack_install.py [--cache warm|cold] [--repeat N] [--keep-container]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("SGLANG_TEST_IMAGE", "sglang-deploy/debian12:latest")
CACHE = os.environ.get("SGLANG_DEPLOY_CACHE", "/var/cache/sglang-deploy")
NAME = "sgd-bench-stack"
ENV = {
    "SSL_CERT_FILE": "/etc/ssl/host-ca-bundle.crt",
    "PIP_CERT": "/etc/ssl/host-ca-bundle.crt",
    "UV_CACHE_DIR": "/var/cache/sglang-deploy/uv",
    "PIP_CACHE_DIR": "/var/cache/sglang-deploy/pip",
    "UV_LINK_MODE": "copy",
    "UV_PYTHON_DOWNLOADS": "never",
    "LC_ALL": "C.UTF-8",
}
UV = "/bench/role/tools/uv/bin/uv"
COLD = "/bench/cold-cache"
SYNC_TASK = "Build the release (lock, venv synced from it"
CHECK_TASK = "Check versions, imports and SGLang's argument parser"
ROLE_PLAY = (
    "- hosts: all\n  gather_facts: true\n"
    "  vars_files: [../group_vars/all/versions.yml, ../group_vars/all/sglang.yml]\n"
    "  roles: [sglang_stack]\n"
)


def sh(*cmd: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def dexec(script: str) -> None:
    sh("docker", "exec", NAME, "sh", "-ec", script)


def playbook(
    inventory: Path, play: str, extra: dict[str, object], tags: str = "", log: Path | None = None
) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".yml", dir=REPO / "playbooks", delete=False) as f:
        f.write(play)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_FORCE_COLOR="false")
    env["LC_ALL"] = "C.UTF-8"
    cmd = ["ansible-playbook", "-i", str(inventory), f.name, "-e", json.dumps(extra)]
    if tags:
        cmd += ["--tags", tags]
    t0 = time.monotonic()
    try:
        proc = sh(*cmd, env=env, check=False, capture_output=True, cwd=REPO)  # REPO's ansible.cfg
    finally:
        os.unlink(f.name)
    took = time.monotonic() - t0
    if log is not None:
        log.write_text(proc.stdout)
    if proc.returncode:
        sys.exit(f"playbook failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return took


def task_times(log: str) -> dict[str, float]:
    """profile_tasks' recap lines (`role : task name ---- 12.34s`) -> {task name: seconds}."""
    times: dict[str, float] = {}
    for line in log.splitlines():
        m = re.match(r"^(?:[\w.]+ : )?(.+?) -+ (\d+\.\d+)s$", line)
        if m:
            name = m.group(1)
            key = next((k for k in (SYNC_TASK, CHECK_TASK) if name.startswith(k)), name)
            times[key] = float(m.group(2))
    return times


def compile_lock(work: Path, pins: dict[str, str]) -> Path:
    fi = pins["sglang_flashinfer_version"]
    req_in = work / "requirements.in"
    req_in.write_text(
        f"torch=={pins['sglang_torch_version']}\nsgl-kernel=={pins['sglang_sgl_kernel_version']}\n"
        f"flashinfer-python=={fi}\nflashinfer-cubin=={fi}\n"
        f"transformers=={pins['sglang_transformers_version']}\nsglang=={pins['sglang_version']}\n"
    )
    (work / "overrides.txt").write_text(f"flashinfer-python=={fi}\nflashinfer-cubin=={fi}\n")
    lock = work / "requirements.lock"
    sh(
        *("uv", "pip", "compile", "-q", str(req_in), "--override", str(work / "overrides.txt")),
        *("--generate-hashes", "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"),
        *("-o", str(lock)),
        env=dict(os.environ, UV_CACHE_DIR=f"{CACHE}/uv"),
    )
    return lock


def start_container(work: Path) -> Path:
    sh("docker", "rm", "-f", NAME, check=False, capture_output=True)
    sh(
        *("docker", "run", "-d", "--name", NAME, "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"),
        *("--tmpfs", "/run", "--tmpfs", "/run/lock"),
        *("-v", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca-bundle.crt:ro"),
        *("-v", f"{CACHE}:/var/cache/sglang-deploy:rw", "-v", f"{work}:/bench-in:ro"),
        *[a for k, v in ENV.items() for a in ("-e", f"{k}={v}")],
        *(IMAGE, "/lib/systemd/systemd"),
        capture_output=True,
    )
    inventory = work / "inventory.yml"
    host = {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {NAME: host}}}))
    return inventory


class Bench:
    def __init__(self, work: Path, inventory: Path, pins: dict[str, str], lock: Path, cold: bool) -> None:
        self.work, self.inventory, self.cold = work, inventory, cold
        self.samples: dict[str, list[float]] = {"role": [], "raw uv": [], "pip module": []}
        self.profiles: list[dict[str, float]] = []
        self.base: dict[str, object] = {
            "sglang_gpu_required": False,
            "sglang_tp_size": 1,
            "sglang_model_path": "/opt/models/x",
            "sglang_draft_model_path": "/opt/models/y",
            "sglang_stack_python": "python3.11",
            "sglang_stack_source": "wheel",
            "sglang_stack_extra_index_urls": [],
            "sglang_stack_torch_requirement": f"torch=={pins['sglang_torch_version']}",
            "sglang_stack_sgl_kernel_requirement": f"sgl-kernel=={pins['sglang_sgl_kernel_version']}",
            "sglang_stack_uv_cache_dir": "/var/cache/sglang-deploy/uv",
            "sglang_stack_root": "/bench/role",
            "sglang_stack_lock": str(lock),
        }

    def cache(self, path: str) -> str:
        """Cold: a fresh, empty cache per path (removed after each install)."""
        return f"{COLD}/{path}" if self.cold else "/var/cache/sglang-deploy/uv"

    def setup(self) -> None:
        """Untimed: system packages + uv (the same uv binary serves the raw-uv path)."""
        playbook(self.inventory, ROLE_PLAY, self.base, tags="stack_validate,stack_facts,stack_tools")

    def role(self) -> None:
        log = self.work / f"role-{len(self.samples['role'])}.log"
        extra = {**self.base, "sglang_stack_uv_cache_dir": self.cache("role")}
        took = playbook(self.inventory, ROLE_PLAY, extra, log=log)
        dexec(f"rm -rf /bench/role/releases /bench/role/current {COLD}")
        self.samples["role"].append(took)
        self.profiles.append(task_times(log.read_text()))
        top = sorted(self.profiles[-1].items(), key=lambda kv: -kv[1])[:3]
        slowest = ", ".join(f"{k[:40]} {v:.1f}s" for k, v in top)
        print(f"role: {took:.1f} s (log {log}; slowest: {slowest})", flush=True)

    def raw_uv(self, timed: bool = True) -> None:
        t0 = time.monotonic()
        dexec(
            f"export UV_CACHE_DIR={self.cache('raw')}; {UV} venv -q --python python3.11 /bench/raw && "
            f"{UV} pip sync -q --python /bench/raw/bin/python --require-hashes /bench-in/requirements.lock"
        )
        took = time.monotonic() - t0
        dexec(f"rm -rf /bench/raw {COLD}")
        if timed:
            self.samples["raw uv"].append(took)
            print(f"raw uv: {took:.1f} s", flush=True)

    def pip(self, timed: bool = True) -> None:
        pip_cache = f"{COLD}/pip" if self.cold else "/var/cache/sglang-deploy/pip"
        play = (
            "- hosts: all\n  gather_facts: false\n  tasks:\n"
            "    - name: Install the lock with the pip module\n"
            "      ansible.builtin.pip:\n        requirements: /bench-in/requirements.lock\n"
            "        virtualenv: /bench/pip\n        virtualenv_command: python3.11 -m venv\n"
            "        extra_args: --require-hashes --no-deps\n"
            f"      environment: {{PIP_CACHE_DIR: {pip_cache}}}\n"
        )
        took = playbook(self.inventory, play, {})
        pip_cache_dir = Path(CACHE, "pip")
        if not self.cold and not timed and not (pip_cache_dir.is_dir() and any(pip_cache_dir.iterdir())):
            print(
                "note: pip's cache stayed empty after its warm-up (the index sent no cache headers): "
                "the timed pip run downloads everything again"
            )
        dexec(f"rm -rf /bench/pip {COLD}")
        if timed:
            self.samples["pip module"].append(took)
            print(f"pip module: {took:.1f} s", flush=True)

    def report(self, header: str) -> None:
        med = {k: statistics.median(v) for k, v in self.samples.items()}
        sync = statistics.median(p.get(SYNC_TASK, 0.0) for p in self.profiles)
        check = statistics.median(p.get(CHECK_TASK, 0.0) for p in self.profiles)
        runs = "; ".join(f"{k} {' / '.join(f'{x:.1f}' for x in v)} s" for k, v in self.samples.items())
        print(f"\n{header}\n  runs: {runs}\n  medians:")
        for name, took in med.items():
            print(f"  {name:<11} {took:7.1f} s   {took / med['raw uv']:5.2f}x raw uv")
        rest = med["role"] - sync - check
        print(f"  role = uv sync {sync:.1f} s + release checks {check:.1f} s + everything else {rest:.1f} s")
        print(f"  role / raw uv      = {med['role'] / med['raw uv']:.2f}  (target <= 1.3)")
        print(f"  pip module / role  = {med['pip module'] / med['role']:.2f}  (target >= 3)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", choices=["warm", "cold"], default="warm")
    ap.add_argument("--repeat", type=int, default=2, help="warm mode: role/raw-uv alternations")
    ap.add_argument(
        "--no-pip-warmup",
        action="store_true",
        help="warm mode: skip pip's untimed warm-up (useless where the index sends no cache headers)",
    )
    ap.add_argument("--keep-container", action="store_true")
    args = ap.parse_args()

    pins = yaml.safe_load((REPO / "group_vars/all/versions.yml").read_text())
    work = Path(tempfile.mkdtemp(prefix="sgl-bench-"))
    lock = compile_lock(work, pins)
    bench = Bench(work, start_container(work), pins, lock, cold=args.cache == "cold")
    try:
        bench.setup()
        if bench.cold:
            bench.role()
            bench.raw_uv()
            bench.pip()
        else:
            if not args.no_pip_warmup:
                bench.pip(timed=False)  # fills pip's cache
            bench.pip()
            bench.raw_uv(timed=False)  # reads the uv cache into the page cache
            for _run in range(args.repeat):
                bench.role()
                bench.raw_uv()
    finally:
        if not args.keep_container:
            sh("docker", "rm", "-f", NAME, check=False, capture_output=True)
    dists = sum(1 for ln in lock.read_text().splitlines() if ln[:1].isalnum())
    bench.report(
        f"Fresh install of one lock ({dists} distributions), {args.cache} caches, cold venvs, "
        f"uv {pins['sglang_uv_version']}, UV_LINK_MODE=copy, {IMAGE}, {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
