"""The repository is an installable collection: `ansible-galaxy collection build`, install the tarball
into a temporary collections path, then run the collection's site playbook by its FQCN
(`sglang.deploy.site`) from outside the checkout against a fresh lab host: `--check` on the fresh
host writes nothing, the converge succeeds, a rerun changes nothing."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_lab import REPO, cli, docker_host, lab_exec, login_shell_env, snapshot, venv_bin, write_yaml

pytestmark = pytest.mark.e2e

HOST = "sglang-lab-col"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    build = subprocess.run(
        [str(venv_bin() / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(REPO)],
        capture_output=True, text=True, check=False, cwd=out, env=login_shell_env(),
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    [tarball] = out.glob("sglang-deploy-*.tar.gz")
    dest = tmp_path_factory.mktemp("collections")
    galaxy = str(venv_bin() / "ansible-galaxy")
    install = subprocess.run(
        [galaxy, "collection", "install", "--force", "--no-deps", "-p", str(dest), str(tarball)],
        capture_output=True, text=True, check=False, cwd=out, env=login_shell_env(),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    root = dest / "ansible_collections" / "sglang" / "deploy"
    assert (root / "playbooks" / "site.yml").is_file()
    assert (root / "plugins" / "module_utils" / "launch_spec.py").is_file()
    assert not (root / "molecule").exists()
    return dest


@pytest.fixture(scope="module")
def fresh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new lab container and an inventory for it outside the checkout (the lab's group vars)."""
    created = cli("lab", "create", "--name", HOST)
    assert created.returncode == 0, created.stderr
    inv = tmp_path_factory.mktemp("inventory")
    (inv / "group_vars").mkdir()
    (inv / "group_vars" / "lab.yml").write_text((REPO / "inventory" / "group_vars" / "lab.yml").read_text())
    doc = {
        "all": {"children": {"sglang_servers": {"children": {"lab": {"hosts": {HOST: docker_host(HOST)}}}}}}
    }
    write_yaml(inv / "hosts.yml", doc)
    yield inv / "hosts.yml"
    assert cli("lab", "destroy", "--name", HOST).returncode == 0


def run_fqcn(installed: Path, inventory: Path, *args: str) -> tuple[int, str]:
    # no ansible.cfg of the checkout here: the user's settings (pipelining, as any ansible.cfg of theirs)
    env = {**login_shell_env(), "ANSIBLE_COLLECTIONS_PATH": str(installed), "ANSIBLE_FORCE_COLOR": "false"}
    env["ANSIBLE_PIPELINING"] = "true"
    env["PATH"] = f"{venv_bin()}{os.pathsep}{env['PATH']}"
    started = time.monotonic()
    proc = subprocess.run(
        [str(venv_bin() / "ansible-playbook"), "-i", str(inventory), "sglang.deploy.site", *args],
        capture_output=True, text=True, check=False, cwd=inventory.parent, env=env, timeout=1800,
    )  # fmt: skip
    print(f"sglang.deploy.site {' '.join(args)}: rc={proc.returncode} {time.monotonic() - started:.0f}s")
    out = proc.stdout + proc.stderr
    print(out[-3000:])
    return proc.returncode, out


def recap(out: str) -> dict[str, int]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{HOST} ") and "ok=" in ln)
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split(":", 1)[1].split())}


def test_the_installed_collection_converges_a_fresh_host(installed: Path, fresh_host: Path) -> None:
    before = snapshot(HOST)
    rc, out = run_fqcn(installed, fresh_host, "--check")
    assert rc == 0, out[-4000:]
    assert recap(out)["failed"] == 0
    assert snapshot(HOST) == before, "--check on a fresh host wrote to it"
    assert "/opt/sglang" not in before

    rc, out = run_fqcn(installed, fresh_host)
    assert rc == 0, out[-4000:]
    assert recap(out)["changed"] > 0
    # the roles ran from the installed collection, not from the checkout
    assert "sglang.deploy.preflight" in out or "preflight :" in out
    assert lab_exec("systemctl", "is-enabled", "sglang-kimi", name=HOST).strip() == "enabled"
    assert lab_exec("test", "-L", "/opt/sglang/current", name=HOST) == ""

    rc, out = run_fqcn(installed, fresh_host)
    assert rc == 0, out[-4000:]
    assert recap(out)["changed"] == 0, out[-4000:]
