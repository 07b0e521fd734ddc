"""A failed upgrade (unreachable index) leaves current and the old release untouched."""

from __future__ import annotations

import json
from typing import Any

from helpers import CURRENT, ROOT, playbook, recap


def test_upgrade_with_unreachable_index_keeps_current(host: Any) -> None:
    before = host.file(CURRENT).linked_to
    old_receipt = host.file(f"{before}/receipt.json").sha256sum
    releases_before = set(host.check_output(f"ls {ROOT}/releases").split())
    extra = {
        "sglang_stack_index_url": "http://127.0.0.1:9/simple",
        "sglang_transformers_version": "4.57.0",
    }  # a changed pin: new release id
    rc, out = playbook("-e", json.dumps(extra))
    assert rc != 0, out[-3000:]
    assert recap(out)["failed"] == 1
    assert "was left unchanged" in out, out[-3000:]
    assert host.file(CURRENT).linked_to == before
    assert host.file(f"{before}/.complete").exists
    assert host.file(f"{before}/receipt.json").sha256sum == old_receipt
    # the failed release was removed (no 11 GB partial left behind), nothing else changed
    assert set(host.check_output(f"ls {ROOT}/releases").split()) == releases_before
    assert not host.file(f"{ROOT}/.current.new").exists
