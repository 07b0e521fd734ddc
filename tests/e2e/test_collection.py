"""The repository is an installable collection: `ansible-galaxy collection build`, install the tarball
into a temporary collections path, then run the collection's site playbook by its FQCN
(`sglang.deploy.site`) from outside the checkout (no ansible.cfg of the checkout, the installed copy the
only collection path):

* on a fresh lab host of its own (sglang-lab-col): `--check` writes nothing;
* on the converged lab host (the session's `converged_lab`: the README's `up` through the checkout):
  the installed collection's run changes nothing - the installed roles, playbooks and plugins decide
  the same state the checkout converged - and its `--check` reports nothing to change.

Until 2026-12-06 the installed collection also converged the fresh host from scratch: a third
whole-stack install (an 11-12 GB release venv, the SGLang sdist built and patched) in every `make test`,
proving no more than the converged host's no-op run does once the checkout's first `up` (conftest's
`converged_lab`) converged a fresh host with the same roles."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_lab import (
    LAB_HOST,
    REPO,
    cli,
    docker_host,
    lab_exec,
    login_shell_env,
    snapshot,
    venv_bin,
    write_yaml,
)

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


def lab_group_inventory(dest: Path, host: str) -> Path:
    """An inventory outside the checkout naming ``host`` in the lab group (the lab's group vars): what a
    user of the installed collection writes. Its hosts file."""
    (dest / "group_vars").mkdir()
    (dest / "group_vars" / "lab.yml").write_text((REPO / "inventory" / "group_vars" / "lab.yml").read_text())
    doc = {
        "all": {"children": {"sglang_servers": {"children": {"lab": {"hosts": {host: docker_host(host)}}}}}}
    }
    return write_yaml(dest / "hosts.yml", doc)


@pytest.fixture(scope="module")
def fresh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new lab container and an inventory for it outside the checkout (the lab's group vars)."""
    created = cli("lab", "create", "--name", HOST)
    assert created.returncode == 0, created.stderr
    yield lab_group_inventory(tmp_path_factory.mktemp("inventory"), HOST)
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


def recap(out: str, host: str) -> dict[str, int]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"{host} ") and "ok=" in ln)
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split(":", 1)[1].split())}


def test_the_installed_collection_checks_a_fresh_host_writing_nothing(
    installed: Path, fresh_host: Path
) -> None:
    before = snapshot(HOST)
    assert "/opt/sglang" not in before
    rc, out = run_fqcn(installed, fresh_host, "--check")
    assert rc == 0, out[-4000:]
    assert recap(out, HOST)["failed"] == 0
    assert recap(out, HOST)["changed"] > 0  # a fresh host: the stack, the unit, ... would be made
    assert snapshot(HOST) == before, "--check on a fresh host wrote to it"


def test_the_installed_collection_finds_the_converged_host_converged(
    installed: Path, converged_lab: dict[str, object], tmp_path: Path
) -> None:
    inventory = lab_group_inventory(tmp_path, LAB_HOST)
    unit = lab_exec("systemctl", "cat", "sglang-kimi")
    rc, out = run_fqcn(installed, inventory)
    assert rc == 0, out[-4000:]
    assert recap(out, LAB_HOST)["changed"] == 0, out[-4000:]
    # the installed roles ran (their tasks are named by role), and left the converged unit as it was
    assert "TASK [sglang.deploy.preflight : " in out, out[-4000:]
    assert lab_exec("systemctl", "cat", "sglang-kimi") == unit
    rc, out = run_fqcn(installed, inventory, "--check")
    assert rc == 0, out[-4000:]
    assert recap(out, LAB_HOST)["changed"] == 0, out[-4000:]
