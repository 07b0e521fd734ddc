"""Shared molecule check: `--check` on the converged host must report 0 changed.

Molecule's own `check` action (run before converge in every scenario) proves check mode does
not fail on a fresh host; molecule's `idempotence` proves a second real run changes nothing.
This test closes the gap: after converge, a check-mode run of the same converge playbook must
predict no change at all (drift would show up here as changed > 0).
"""

from __future__ import annotations

import moltest


def test_check_mode_on_converged_host_reports_no_change() -> None:
    rc, out = moltest.run_playbook("converge.yml", "--check")
    assert rc == 0, out[-4000:]
    per_host = moltest.recaps(out)
    assert per_host, f"no PLAY RECAP in check-mode output:\n{out[-4000:]}"
    for host, counts in per_host.items():
        assert counts["failed"] == 0, out[-4000:]
        assert counts["unreachable"] == 0, out[-4000:]
        assert counts["changed"] == 0, (
            f"check mode on converged host {host} predicts {counts['changed']} change(s):\n"
            + "\n".join(line for line in out.splitlines() if line.startswith("changed:"))
            + "\n"
            + out[-4000:]
        )
