"""Load a module of the repository by its file path (plugins, role scripts, bench scripts are not an
importable package): the one helper the pure tests share (not collected: no test_ prefix)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The probe modules import the collection's module_utils by FQCN (as Ansible ships them):
# scripts/bootstrap links .collections/ansible_collections/sglang/deploy to the repository root.
if str(REPO / ".collections") not in sys.path:
    sys.path.insert(0, str(REPO / ".collections"))


def load_module(name: str, path: Path) -> ModuleType:
    """Execute `path` as module `name`, registered in sys.modules (dataclasses and pickling look it up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def iter_tasks(items: Any) -> list[dict[str, Any]]:
    """Every task of a task list, those of block/rescue/always included (not the blocks)."""
    found: list[dict[str, Any]] = []
    for item in items or []:
        if any(key in item for key in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                found += iter_tasks(item.get(key))
        else:
            found.append(item)
    return found


def local_ansible_env() -> dict[str, str]:
    """The environment of an ansible-playbook run on the controller by a test: this repository's
    ansible.cfg, the default stdout callback, the prefork callback, no colour, a UTF-8 locale."""
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_CALLBACKS_ENABLED": "sglang.deploy.prefork",
        "ANSIBLE_FORCE_COLOR": "false",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }


def run_module(
    module: str, args: dict[str, Any], *flags: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One of the collection's modules as a role runs it: `ansible localhost -m sglang.deploy.<module>`
    through this repository's ansible.cfg with the JSON stdout callback; its result for localhost.
    flags: e.g. --check, --diff."""
    environ = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "LC_ALL": "C.UTF-8",
        **(env or {}),
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", *flags,
         "-m", f"sglang.deploy.{module}", "-a", json.dumps(args)],
        cwd=REPO, env=environ, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert "{" in done.stdout, done.stdout + done.stderr
    doc: dict[str, Any] = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{") :])[0]
    result: dict[str, Any] = doc["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result
