"""The version manifest and the cross-role inputs (group_vars/all/*.yml) are the playbooks' group
vars too: `ansible-playbook playbooks/site.yml` and the installed collection's `sglang.deploy.site`
load group_vars beside the playbook, playbooks/group_vars/all/. That directory holds one relative
link per file of group_vars/all (ansible-test sanity allows links to files, not to a directory), so a
file added to group_vars/all needs its link: these tests say which is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from modload import REPO, local_ansible_env

SHARED = REPO / "group_vars" / "all"
BESIDE = REPO / "playbooks" / "group_vars"
BIN = Path(sys.executable).parent


def test_each_file_of_group_vars_all_is_linked_beside_the_playbooks() -> None:
    assert sorted(p.name for p in BESIDE.iterdir()) == ["all"]
    wanted = sorted(p.name for p in SHARED.iterdir())
    assert sorted(p.name for p in (BESIDE / "all").iterdir()) == wanted, (
        f"playbooks/group_vars/all must hold a link to each of {wanted}: "
        "ln -s ../../../group_vars/all/NAME playbooks/group_vars/all/NAME"
    )
    for name in wanted:
        link = BESIDE / "all" / name
        assert link.is_symlink(), f"{link} is not a link"
        assert os.readlink(link) == f"../../../group_vars/all/{name}", f"{link} must be a relative link"
        assert link.resolve() == (SHARED / name).resolve()


def _host_vars(playbook_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """What Ansible loads for a host of a play in playbook_dir, with an inventory that has no vars."""
    proc = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", "localhost,", "--playbook-dir", str(playbook_dir),
         "--host", "localhost"],
        capture_output=True, text=True, check=False, env=env, cwd=playbook_dir, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def _each_file_loaded(found: dict[str, Any]) -> None:
    for path in sorted(SHARED.iterdir()):
        names = sorted(yaml.safe_load(path.read_text()))
        missing = [name for name in names if name not in found]
        assert missing == [], f"{path.name}'s variables not loaded beside the playbooks: {missing}"


def test_a_playbook_of_the_checkout_loads_the_shared_group_vars() -> None:
    _each_file_loaded(_host_vars(REPO / "playbooks", local_ansible_env()))


def test_the_installed_collections_playbooks_load_the_shared_group_vars(tmp_path: Path) -> None:
    """Built and installed as a user does: the links travel in the tarball."""
    env = {**local_ansible_env(), "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections")}
    env.pop("ANSIBLE_CONFIG")
    galaxy = str(BIN / "ansible-galaxy")
    subprocess.run(
        [galaxy, "collection", "build", "--output-path", str(tmp_path), str(REPO)],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    [tarball] = tmp_path.glob("sglang-deploy-*.tar.gz")
    subprocess.run(
        [galaxy, "collection", "install", "--no-deps", "-p", str(tmp_path / "collections"), str(tarball)],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    installed = tmp_path / "collections" / "ansible_collections" / "sglang" / "deploy"
    _each_file_loaded(_host_vars(installed / "playbooks", env))
