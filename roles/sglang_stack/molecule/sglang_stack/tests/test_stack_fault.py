"""A failed upgrade (unreachable index) leaves current and the old release untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
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


# --- issue 21: hashes required in every mode (uv pip sync --require-hashes) --------------------------


def _lock_of_current(host: Any) -> str:
    text: str = host.file(f"{host.file(CURRENT).linked_to}/requirements.lock").content_string
    return text


def _edit_package(lock: str, name: str, edit: str) -> str:
    """The lock with package `name`'s hash lines removed (edit="drop") or replaced by a wrong sha256
    (edit="wrong")."""
    out: list[str] = []
    inside = False
    for line in lock.splitlines():
        if re.match(rf"^{re.escape(name)}==", line):
            inside = True
            out.append(line.rstrip(" \\") if edit == "drop" else line)
            continue
        if inside and line.startswith("    --hash=sha256:"):
            if edit == "wrong":
                out.append("    --hash=sha256:" + "0" * 64 + (" \\" if line.endswith("\\") else ""))
            continue
        inside = inside and line.startswith(" ")
        out.append(line)
    return "\n".join(out) + "\n"


def _build_with_lock(host: Any, tmp_path: Path, text: str) -> tuple[int, str, str, set[str]]:
    before = host.file(CURRENT).linked_to
    releases_before = set(host.check_output(f"ls {ROOT}/releases").split())
    lock = tmp_path / "given.lock"
    lock.write_text(text)
    rc, out = playbook("-e", json.dumps({"sglang_stack_lock": str(lock)}))
    return rc, out, before, releases_before


@pytest.mark.parametrize("edit", ["drop", "wrong"])
def test_a_lock_line_without_its_hash_or_with_a_wrong_one_fails_the_build(
    host: Any, tmp_path: Path, edit: str
) -> None:
    lock = _lock_of_current(host)
    assert re.search(r"^idna==", lock, re.M), "the lock has no idna pin to edit"
    edited = _edit_package(lock, "idna", edit)
    assert edited != lock
    rc, out, before, releases_before = _build_with_lock(host, tmp_path, edited)
    flat = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert "was left unchanged" in flat, out[-3000:]
    assert "uv pip sync (the lock)" in flat
    want = "hash" if edit == "drop" else "Hash mismatch"
    assert want in flat, out[-3000:]
    assert host.file(CURRENT).linked_to == before
    assert set(host.check_output(f"ls {ROOT}/releases").split()) == releases_before


def test_a_lock_without_hashes_is_refused_before_any_change(host: Any, tmp_path: Path) -> None:
    unhashed = re.sub(r" \\\n    --hash=sha256:[0-9a-f]{64}", "", _lock_of_current(host))
    unhashed = re.sub(r"\n    --hash=sha256:[0-9a-f]{64}( \\)?", "", unhashed)
    assert "--hash" not in unhashed
    rc, out, before, releases_before = _build_with_lock(host, tmp_path, unhashed)
    assert rc != 0
    assert "bad sglang_stack input: sglang_stack_lock=" in out, out[-3000:]
    assert "with --hash=sha256: lines" in out
    assert host.file(CURRENT).linked_to == before
    assert set(host.check_output(f"ls {ROOT}/releases").split()) == releases_before
