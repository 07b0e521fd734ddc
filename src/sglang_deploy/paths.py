"""Where things are: the repository root (site.yml, ansible.cfg, inventory/) and the artifacts dir."""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "SGLANG_DEPLOY_ROOT"
_MARKERS = ("site.yml", "ansible.cfg", "inventory")


class RepoNotFoundError(RuntimeError):
    """No sglang-deploy checkout around the current directory or the installed package."""


def _is_root(path: Path) -> bool:
    return all((path / marker).exists() for marker in _MARKERS)


def repo_root(start: Path | None = None) -> Path:
    """The checkout to run from: $SGLANG_DEPLOY_ROOT, else the first parent of `start` (default: the
    current directory) holding site.yml + ansible.cfg + inventory/, else the checkout this package is
    installed from (editable install)."""
    env = os.environ.get(ROOT_ENV)
    if env:
        path = Path(env).resolve()
        if not _is_root(path):
            raise RepoNotFoundError(f"{ROOT_ENV}={env} is not an sglang-deploy checkout (no site.yml)")
        return path
    candidates = [(start or Path.cwd()).resolve(), Path(__file__).resolve().parent]
    for base in candidates:
        for path in (base, *base.parents):
            if _is_root(path):
                return path
    raise RepoNotFoundError(
        f"cannot find an sglang-deploy checkout (a directory with {', '.join(_MARKERS)}) above "
        f"{candidates[0]}; run from the repository or set {ROOT_ENV}"
    )


def default_inventory(root: Path) -> Path:
    return root / "inventory" / "lab.yml"


def default_artifacts(root: Path) -> Path:
    return root / "artifacts"
