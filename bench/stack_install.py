#!/usr/bin/env python3
"""Benchmark: fresh install of the SAME lock three ways, in one run (prints figures; not a test).

  1. role      ansible-playbook playbooks-equivalent play running roles/sglang_stack (given lock,
               so no compile) - includes patching, the release checks, receipt and the link switch
  2. raw uv    uv venv + uv pip sync --require-hashes LOCK
  3. pip mod.  ansible.builtin.pip requirements=LOCK (pip install --require-hashes --no-deps into a
               venv: the lock is complete, and pip's resolver would reject the flashinfer override)

All three run inside one fresh Debian 12 test container (python3.11), each into a fresh venv.
Cache policy (the same for all): WARM download caches, cold venvs - uv's cache
/var/cache/sglang-deploy/uv and pip's /var/cache/sglang-deploy/pip already hold every artefact
of the lock (an untimed warm-up install is done for pip when --warm-pip), UV_LINK_MODE=copy for
both uv paths (the role's default). SGLang from the PyPI wheel (source=wheel) so no path builds.

usage: bench/stack_install.py [--no-warm-pip] [--keep-container]
"""

from __future__ import annotations

import argparse
import json
import os
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


def sh(*cmd: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), check=check, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def dexec(script: str) -> None:
    sh("docker", "exec", NAME, "sh", "-ec", script)


def playbook(inventory: Path, play: str, extra: dict[str, object], tags: str = "") -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".yml", dir=REPO / "playbooks", delete=False) as f:
        f.write(play)
    env = dict(
        os.environ,
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_FORCE_COLOR="false",
        LC_ALL="C.UTF-8",
    )
    cmd = ["ansible-playbook", "-i", str(inventory), f.name, "-e", json.dumps(extra)]
    if tags:
        cmd += ["--tags", tags]
    t0 = time.monotonic()
    try:
        proc = sh(*cmd, env=env, check=False, capture_output=True)
    finally:
        os.unlink(f.name)
    took = time.monotonic() - t0
    if proc.returncode:
        sys.exit(f"playbook failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--no-warm-pip", action="store_true", help="skip pip's untimed warm-up (pip then downloads)"
    )
    ap.add_argument("--keep-container", action="store_true")
    args = ap.parse_args()

    pins = yaml.safe_load((REPO / "group_vars/all/versions.yml").read_text())
    uv_version = pins["sglang_uv_version"]
    work = Path(tempfile.mkdtemp(prefix="sgl-bench-"))
    req_in = work / "requirements.in"
    req_in.write_text(
        "\n".join(
            [
                f"torch=={pins['sglang_torch_version']}",
                f"sgl-kernel=={pins['sglang_sgl_kernel_version']}",
                f"flashinfer-python=={pins['sglang_flashinfer_version']}",
                f"flashinfer-cubin=={pins['sglang_flashinfer_version']}",
                f"transformers=={pins['sglang_transformers_version']}",
                f"sglang=={pins['sglang_version']}",
            ]
        )
        + "\n"
    )
    (work / "overrides.txt").write_text(
        f"flashinfer-python=={pins['sglang_flashinfer_version']}\nflashinfer-cubin=={pins['sglang_flashinfer_version']}\n"
    )
    lock = work / "requirements.lock"
    sh(
        "uv",
        "pip",
        "compile",
        "-q",
        str(req_in),
        "--override",
        str(work / "overrides.txt"),
        "--generate-hashes",
        "--python-version",
        "3.11",
        "--python-platform",
        "x86_64-manylinux_2_28",
        "-o",
        str(lock),
        env=dict(os.environ, UV_CACHE_DIR=f"{CACHE}/uv"),
    )

    sh("docker", "rm", "-f", NAME, check=False, capture_output=True)
    sh(
        "docker",
        "run",
        "-d",
        "--name",
        NAME,
        "--cgroupns=host",
        "-v",
        "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/run/lock",
        "-v",
        "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca-bundle.crt:ro",
        "-v",
        f"{CACHE}:/var/cache/sglang-deploy:rw",
        "-v",
        f"{work}:/bench-in:ro",
        *[a for k, v in ENV.items() for a in ("-e", f"{k}={v}")],
        IMAGE,
        "/lib/systemd/systemd",
        capture_output=True,
    )
    inventory = work / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        NAME: {
                            "ansible_connection": "community.docker.docker",
                            "ansible_python_interpreter": "/usr/bin/python3",
                        }
                    }
                }
            }
        )
    )
    base = {
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
    role_play = (
        "- hosts: all\n  gather_facts: true\n"
        "  vars_files: [../group_vars/all/versions.yml, ../group_vars/all/sglang.yml]\n"
        "  roles: [sglang_stack]\n"
    )
    results: dict[str, float] = {}
    try:
        # Untimed setup: system packages + uv (the same uv binary serves the raw-uv path).
        playbook(inventory, role_play, base, tags="stack_validate,stack_facts,stack_tools")
        results["role"] = playbook(inventory, role_play, base)
        print(f"role: {results['role']:.1f} s", flush=True)
        dexec("rm -rf /bench/role/releases")

        uv = "/bench/role/tools/uv/bin/uv"
        t0 = time.monotonic()
        dexec(
            f"{uv} venv -q --python python3.11 /bench/raw && {uv} pip sync -q --python /bench/raw/bin/python "
            "--require-hashes /bench-in/requirements.lock"
        )
        results["raw uv"] = time.monotonic() - t0
        print(f"raw uv: {results['raw uv']:.1f} s", flush=True)
        dexec("rm -rf /bench/raw")

        pip_play = (
            "- hosts: all\n  gather_facts: false\n  tasks:\n"
            "    - name: Install the lock with the pip module\n"
            "      ansible.builtin.pip:\n        requirements: /bench-in/requirements.lock\n"
            "        virtualenv: /bench/pip\n        virtualenv_command: python3.11 -m venv\n"
            "        extra_args: --require-hashes --no-deps\n"
        )
        if not args.no_warm_pip:
            playbook(inventory, pip_play, {})
            dexec("rm -rf /bench/pip")
        results["pip module"] = playbook(inventory, pip_play, {})
        dexec("rm -rf /bench/pip")
    finally:
        if not args.keep_container:
            sh("docker", "rm", "-f", NAME, check=False, capture_output=True)

    raw = results["raw uv"]
    print(
        f"\nFresh install of one lock ({sum(1 for ln in lock.read_text().splitlines() if ln[:1].isalnum())} "
        f"distributions), warm caches, cold venvs, uv {uv_version}, UV_LINK_MODE=copy, in {IMAGE}:"
    )
    for name, took in results.items():
        print(f"  {name:<11} {took:7.1f} s   {took / raw:5.2f}x raw uv")
    print(f"  role / raw uv      = {results['role'] / raw:.2f}  (target <= 1.3)")
    print(f"  pip module / role  = {results['pip module'] / results['role']:.2f}  (target >= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
