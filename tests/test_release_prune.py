"""The one prune rule of the release lifecycle (plugins/module_utils/release.py), used by the stack's and
the router's prune through the module sglang.deploy.release (state pruned)."""

from __future__ import annotations

import pytest
from modload import REPO, load_module

release = load_module("release_rule", REPO / "plugins/module_utils/release.py")
R = "/opt/sglang/releases"


def markers(*ids_by_age: str) -> list[dict[str, object]]:
    """Complete markers, the first the newest."""
    return [{"path": f"{R}/{rid}/.complete", "mtime": 1000 - i} for i, rid in enumerate(ids_by_age)]


def test_keeps_the_newest_and_removes_the_rest() -> None:
    assert release.prune(markers("d", "c", "b", "a"), f"{R}/d", 2) == [f"{R}/b", f"{R}/a"]


def test_the_new_release_counts_as_the_newest_even_when_older() -> None:
    # a rollback to an old complete release: it is current, it stays, the newest other one stays too
    assert release.prune(markers("d", "c", "b", "a"), f"{R}/a", 2) == [f"{R}/c", f"{R}/b"]


def test_protected_releases_stay_whatever_their_age() -> None:
    # previous (by id), the rollback target (by directory), the running process' release (by id)
    pruned = release.prune(markers("e", "d", "c", "b", "a"), f"{R}/e", 1, ["d", f"{R}/b/", "a", ""])
    assert pruned == [f"{R}/c"]


def test_a_new_release_without_its_marker_yet() -> None:
    assert release.prune(markers("b", "a"), f"{R}/n", 2) == [f"{R}/a"]


def test_keep_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keep=0"):
        release.prune(markers("a"), f"{R}/a", 0)
