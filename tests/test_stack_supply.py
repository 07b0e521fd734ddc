"""The supply-chain input checks of the sglang_stack and cuda_toolkit roles (each role's
tasks/validate.yml: the one validator with its rules in plugins/plugin_utils/input_rules/sglang_stack.py
and cuda_toolkit.py; preflight runs both before any change), run by a
real ansible-playbook on the controller: each bad input fails naming the variable, its value and what
is allowed; the manifest's defaults pass: the cu130 sgl-kernel URL with every sha256 SGLang's index
lists for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from modload import REPO

ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PLAY = """---
- hosts: localhost
  gather_facts: false
  vars_files:
    - {repo}/group_vars/all/versions.yml
    - {repo}/group_vars/all/sglang.yml
  vars:
    sglang_root: /opt/sglang
  tasks:
    - name: The role's supply-chain checks
      ansible.builtin.include_role:
        name: "{{{{ role }}}}"
        tasks_from: validate
"""
PYPI_KERNEL = "sgl-kernel==0.3.21"


def check(tmp: Path, role: str, **extra: Any) -> tuple[int, str]:
    play = tmp / "play.yml"
    play.write_text(PLAY.format(repo=REPO))
    env = {"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "HOME": str(tmp), "LC_ALL": "C.UTF-8",
           "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play),
         "-e", json.dumps({"role": role, **extra})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def test_the_stack_defaults_pass_with_no_hand_made_hash(tmp_path: Path) -> None:
    rc, out = check(tmp_path, "sglang_stack")
    assert rc == 0, out[-3000:]
    # an operator's extra value (a sixth re-upload) is accepted when it is a sha256
    rc, out = check(tmp_path, "sglang_stack", sglang_stack_sgl_kernel_sha256_extra=["d" * 64])
    assert rc == 0, out[-3000:]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"sglang_stack_sgl_kernel_sha256_extra": ["4BE1313F"]},
            'bad sglang_stack input: sglang_stack_sgl_kernel_sha256_extra=["4BE1313F"]: allowed a list of',
        ),
        (
            {"sglang_stack_sgl_kernel_sha256_extra": "d" * 64},
            "bad sglang_stack input: sglang_stack_sgl_kernel_sha256_extra=",
        ),
        # an architecture SGLang publishes no cu130 wheel for, and no value given: nothing to accept
        (
            {"sglang_stack_sgl_kernel_sha256": []},
            'bad sglang_stack input: sglang_stack_sgl_kernel_requirement="sgl-kernel @ https://github.com/',
        ),
        # a fragment holds one value (and uv takes it on trust): the accepted list decides instead
        (
            {
                "sglang_stack_sgl_kernel_requirement": "sgl-kernel @ https://example.invalid/sgl_kernel.whl#sha256="
                + "a" * 64
            },
            "without a #sha256= fragment",
        ),
        (
            {"sglang_stack_sgl_kernel_requirement": PYPI_KERNEL, "sglang_stack_git_version": "bbe9c7eeb"},
            'bad sglang_stack input: sglang_stack_git_version="bbe9c7eeb": allowed the full 40-hex commit id',
        ),
        (
            {"sglang_stack_sgl_kernel_requirement": PYPI_KERNEL, "sglang_stack_uv_sha256": ["abc"]},
            'bad sglang_stack input: sglang_stack_uv_sha256=["abc"]: allowed a non-empty list of sha256',
        ),
        (
            {
                "sglang_stack_sgl_kernel_requirement": PYPI_KERNEL,
                "sglang_stack_extra_requirements": ["x @ https://example.invalid/x.whl"],
            },
            "a URL requirement must end in #sha256=<64 hex>",
        ),
    ],
)
def test_bad_stack_supply_input_is_named(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    rc, out = check(tmp_path, "sglang_stack", **extra)
    assert rc != 0
    assert message in out, out[-3000:]


def test_the_toolkit_defaults_pass(tmp_path: Path) -> None:
    rc, out = check(tmp_path, "cuda_toolkit")
    assert rc == 0, out[-3000:]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"cuda_toolkit_apt_repo_url": "http://mirror.invalid/cuda/"},
            'cuda_toolkit_apt_repo_url="http://mirror.invalid/cuda/": allowed an https:// URL '
            "(http:// only with cuda_toolkit_allow_insecure_repo=true)",
        ),
        (
            {"cuda_toolkit_apt_key_fingerprint": "3BF863CC"},
            'cuda_toolkit_apt_key_fingerprint="3BF863CC": allowed the key\'s full fingerprint',
        ),
        (
            {"cuda_toolkit_wheel_hashes": {"cuda-toolkit==13.0.1": ["nothex"]}},
            "bad cuda_toolkit input: cuda_toolkit_wheel_hashes=",
        ),
    ],
)
def test_bad_toolkit_supply_input_is_named(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    rc, out = check(tmp_path, "cuda_toolkit", **extra)
    assert rc != 0
    assert message in out, out[-3000:]


def test_http_is_allowed_only_when_asked(tmp_path: Path) -> None:
    rc, out = check(tmp_path, "cuda_toolkit", cuda_toolkit_apt_repo_url="http://127.0.0.1:8808/",
                    cuda_toolkit_apt_signing_key="http://127.0.0.1:8808/k.asc",
                    cuda_toolkit_allow_insecure_repo=True)  # fmt: skip
    assert rc == 0, out[-3000:]
