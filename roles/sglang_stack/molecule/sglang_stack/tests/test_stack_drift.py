"""Reverting patch 4 in the installed tree is reported by check mode and repaired by a run."""

from __future__ import annotations

from typing import Any

from helpers import playbook, push_patch, recap, receipt, series, site_packages, strip_of


def test_reverted_patch_is_reported_then_restored(host: Any) -> None:
    entry = next(e for e in series() if str(e.get("id", "")).endswith("4") or "0004" in e["file"])
    sp = site_packages(host)
    rel = entry["files"][0]
    recorded = receipt(host)["patched_files"][rel]
    assert host.file(f"{sp}/{rel}").sha256sum == recorded

    src = push_patch(host, entry["file"])
    host.check_output(f"patch -R -p{strip_of(entry)} -d {sp} -i {src} --no-backup-if-mismatch")
    reverted = host.file(f"{sp}/{rel}").sha256sum
    assert reverted != recorded

    rc, out = playbook("--check")
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] > 0, out[-3000:]
    assert "drift:" in out, out[-3000:]
    assert rel in out, out[-3000:]
    assert host.file(f"{sp}/{rel}").sha256sum == reverted, "check mode changed the file"

    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] > 0
    assert host.file(f"{sp}/{rel}").sha256sum == recorded
    for path, digest in receipt(host)["patched_files"].items():
        assert host.file(f"{sp}/{path}").sha256sum == digest, path
    # (the shared test_check_mode.py then proves the repaired host is clean again)
