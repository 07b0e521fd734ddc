"""The release lifecycle (module sglang.deploy.release) on the converged host: an interrupted build's
partial directory is removed, a complete release beyond sglang_stack_keep_releases is pruned, and the
release `current` pointed at before the run (the rollback target) is kept whatever its age; `current`
is switched back to the release of these inputs; check mode names each and changes nothing."""

from __future__ import annotations

import json
from typing import Any

from helpers import CURRENT, ROOT, playbook, recap

RELEASES = f"{ROOT}/releases"
OLD, PREVIOUS, PARTIAL = "0ld0000000a1", "0ld0000000b2", "part0000000c"


def test_partial_removed_old_pruned_previous_kept(host: Any) -> None:
    release = host.check_output(f"readlink {CURRENT}")
    assert release.startswith("releases/"), release
    # two complete releases older than the one in force (their markers dated back), the second one
    # made current by hand (as a rollback would), and the directory of a build that was interrupted
    for rid, day in ((OLD, "2020-01-01"), (PREVIOUS, "2020-01-02")):
        host.check_output(
            f"mkdir -p {RELEASES}/{rid}/venv && echo {rid} > {RELEASES}/{rid}/.complete"
            f" && touch -d {day} {RELEASES}/{rid}/.complete"
        )
    host.check_output(
        f"mkdir -p {RELEASES}/{PARTIAL}/venv/lib && touch {RELEASES}/{PARTIAL}/requirements.lock"
    )
    host.check_output(f"ln -sfn releases/{PREVIOUS} {CURRENT}.tmp && mv -T {CURRENT}.tmp {CURRENT}")

    keep = {"sglang_stack_keep_releases": 1}
    rc, out = playbook("--check", "-v", "-e", json.dumps(keep))
    assert rc == 0, out[-3000:]
    assert "would remove incomplete release(s) (an interrupted or failed build)" in out, out[-3000:]
    assert f"{RELEASES}/{PARTIAL}" in out, out[-3000:]
    assert f"would remove releases beyond the newest 1: {RELEASES}/{OLD}" in out, out[-3000:]
    assert f"{RELEASES}/{PREVIOUS}" not in out.split("would remove releases beyond", 1)[1].split('"', 1)[0]
    for rid in (OLD, PREVIOUS, PARTIAL):
        assert host.file(f"{RELEASES}/{rid}").is_directory, rid
    assert host.check_output(f"readlink {CURRENT}") == f"releases/{PREVIOUS}"

    rc, out = playbook("-e", json.dumps(keep))
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] > 0
    assert host.check_output(f"readlink {CURRENT}") == release
    assert not host.file(f"{RELEASES}/{PARTIAL}").exists
    assert not host.file(f"{RELEASES}/{OLD}").exists
    assert host.file(f"{RELEASES}/{PREVIOUS}/.complete").exists  # the rollback target is kept
    assert host.file(f"{ROOT}/{release}/.complete").exists

    # the next run keeps what is kept: the previous release is no longer `current`'s predecessor in
    # this run, so it is pruned now, and nothing else changes
    rc, out = playbook("-e", json.dumps(keep))
    assert rc == 0, out[-3000:]
    assert not host.file(f"{RELEASES}/{PREVIOUS}").exists
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] == 0, out[-3000:]
