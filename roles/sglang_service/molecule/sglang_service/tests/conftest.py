"""Helpers of the sglang_service scenario tests: run the scenario's playbooks from the verifier."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path(__file__).resolve().parents[1]))
GOLDEN = SCENARIO / "golden"
TEST_KEY = "TestKey-0123456789-abcdefXYZ"
UNIT = "sglang-kimi"
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.M,
)


def run_playbook(playbook: str = "service.yml", extra: dict | None = None, verbose: bool = False):
    """Run a playbook of the scenario against the test instance; returns (rc, output, recap)."""
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    env = dict(
        os.environ,
        ANSIBLE_FORCE_COLOR="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
    )
    cmd = ["ansible-playbook", "-i", str(inventory), str(SCENARIO / playbook)]
    if extra:
        cmd += ["-e", json.dumps(extra)]
    if verbose:
        cmd.append("-v")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=900)
    out = proc.stdout + proc.stderr
    m = RECAP.search(out)
    return proc.returncode, out, (m.groupdict() if m else None)
