"""Where things are: the repository root (site.yml, ansible.cfg, inventory/) and the artifacts dir."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

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


def load_plugin_file(relative: str, name: str) -> ModuleType:
    """A module of the collection's ``plugins/`` tree (``relative`` to the checkout) loaded as ``name``,
    once: plugins cannot import src/, so a rule both use (the secret-name rule, the history alarm) lives
    with the plugins and the CLI loads it from there. The package's own checkout first (the editable
    install), else the checkout `repo_root` finds."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[2] / relative
    if not path.is_file():
        path = repo_root() / relative
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {relative} from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
