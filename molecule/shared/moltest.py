"""Helpers for the scenarios' testinfra tests (not collected: no test_ prefix).

They run a playbook of the scenario against the molecule instance, the way molecule itself does,
and read the PLAY RECAP. molecule/base.yml puts this directory on the verifier's PYTHONPATH, so
a test does `import moltest`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.M,
)


def scenario_dir() -> Path:
    return Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])


def inventory_dir() -> Path:
    """Molecule's generated inventory (its directory: hosts + host/group vars links)."""
    return Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent


def ansible_env(callback: str = "ansible.builtin.default") -> dict[str, str]:
    return dict(
        os.environ, ANSIBLE_FORCE_COLOR="false", ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK=callback
    )


def run_playbook(
    playbook: str | Path = "converge.yml",
    *args: str,
    extra: Iterable[str | dict[str, Any]] = (),
    timeout: int = 1800,
) -> tuple[int, str]:
    """ansible-playbook against the instance; a relative playbook is a file of the scenario.

    extra: each item one `-e` (a dict is passed as JSON). Returns (rc, stdout + stderr).
    """
    path = Path(playbook) if Path(playbook).is_absolute() else scenario_dir() / playbook
    cmd = ["ansible-playbook", "-i", str(inventory_dir()), str(path), *args]
    for item in extra:
        cmd += ["-e", item if isinstance(item, str) else json.dumps(item)]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=ansible_env(), check=False, timeout=timeout
    )
    record_run(cmd[3:], time.monotonic() - started, proc.returncode)
    return proc.returncode, proc.stdout + proc.stderr


def record_run(args: list[str], seconds: float, rc: int) -> None:
    """One line per playbook a test runs in <checkout>/artifacts/molecule-runs.tsv (scenario, test,
    playbook and arguments, seconds, exit code): where a scenario's verify time goes."""
    project = os.environ.get("MOLECULE_PROJECT_DIRECTORY")
    if not project:
        return
    artifacts = Path(project).parents[1] / "artifacts"
    artifacts.mkdir(exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").rsplit(" ", 1)[0]
    scenario = os.environ.get("MOLECULE_SCENARIO_NAME", "-")
    with (artifacts / "molecule-runs.tsv").open("a", encoding="utf-8") as out:
        out.write(f"{scenario}\t{test}\t{' '.join(args)[:200]}\t{seconds:.1f}\t{rc}\n")


def recaps(out: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP lines -> {host: {ok, changed, unreachable, failed}} (the last play wins)."""
    return {
        m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"} for m in RECAP.finditer(out)
    }


def totals(out: str) -> dict[str, int]:
    """Counters summed over every PLAY RECAP line; fails the test when there is none."""
    found = list(RECAP.finditer(out))
    assert found, f"no PLAY RECAP in the output:\n{out[-3000:]}"
    keys = ("ok", "changed", "unreachable", "failed")
    return {k: sum(int(m[k]) for m in found) for k in keys}


def changed_tasks(out: str) -> list[str]:
    """Names of the tasks that reported a change, in order (the default callback's TASK headers)."""
    names: list[str] = []
    current = ""
    for line in out.splitlines():
        if line.startswith("TASK ["):
            current = line[len("TASK [") : line.rindex("]")]
        elif line.startswith("changed:") and current not in names:
            names.append(current)
    return names
