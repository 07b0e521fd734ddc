"""Shared molecule check: `--check` on the converged host must report 0 changed.

Molecule's own `check` action (run before converge in every scenario) proves check mode does
not fail on a fresh host; molecule's `idempotence` proves a second real run changes nothing.
This test closes the gap: after converge, a check-mode run of the same converge playbook must
predict no change at all (drift would show up here as changed > 0).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.M,
)


def test_check_mode_on_converged_host_reports_no_change() -> None:
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    env = dict(
        os.environ,
        ANSIBLE_FORCE_COLOR="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
    )
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "--check", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=1800,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    recaps = list(RECAP.finditer(out))
    assert recaps, f"no PLAY RECAP in check-mode output:\n{out[-4000:]}"
    for m in recaps:
        assert m["failed"] == "0", out[-4000:]
        assert m["unreachable"] == "0", out[-4000:]
        assert m["changed"] == "0", (
            f"check mode on converged host {m['host']} predicts {m['changed']} change(s):\n"
            + "\n".join(line for line in out.splitlines() if line.startswith("changed:"))
            + "\n"
            + out[-4000:]
        )
