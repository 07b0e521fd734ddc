"""The release lifecycle's prune rule, one for the stack and the router (the release directories
``<root>/releases/<id>`` with a ``.complete`` marker, ``<root>/current`` pointing at one of them).

Kept: the newest ``keep`` complete releases (by the marker's mtime, the release this run built counted
as the newest), and always every protected release, whatever its age - the release ``current`` points
at, the one it pointed at before this run (a failed start goes back to it), the last good state's
release (deploy_state's snapshot: the rollback target) and the release the running process uses. The
stack and the router had one rule each and they differed (the router spared only the previous one).

Pure Python (no Ansible import); tests/test_release_prune.py tests it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any


def prune(
    markers: Iterable[Mapping[str, Any]], new_release: str, keep: int, protected: Iterable[str] = ()
) -> list[str]:
    """The release directories to remove: ``markers`` are the ``.complete`` files ({path, mtime}) of
    the complete releases, ``new_release`` the directory of the release this run built or chose (the
    newest), ``keep`` how many to keep, ``protected`` release ids or directories never removed (empty
    strings ignored)."""
    if keep < 1:
        raise ValueError(f"keep={keep}: allowed an integer >= 1")
    newest_first = sorted(markers, key=lambda m: float(m.get("mtime", 0)), reverse=True)
    dirs = [new_release] + [os.path.dirname(str(m["path"])) for m in newest_first]
    ordered = list(dict.fromkeys(d.rstrip("/") for d in dirs if d))
    releases_dir = os.path.dirname(new_release.rstrip("/"))
    spared = {new_release.rstrip("/")}
    for item in protected:
        name = str(item or "").strip().rstrip("/")
        if name:
            spared.add(name if "/" in name else f"{releases_dir}/{name}")
    return [d for d in ordered[keep:] if d not in spared]
