"""Callback sglang.deploy.prefork: make the forked workers of ansible-playbook cheaper.

ansible-playbook forks one worker per host and task, and each worker inherits the parent's heap
copy-on-write. Two costs were measured in every worker of a no-op rerun (bench/noop_rerun.py):

- Python's cyclic garbage collector walked the inherited objects (the parsed playbook, the inventory,
  the loaded plugins: about 100k tracked objects), writing their GC headers, so their pages were
  copied into the worker and CPU went on objects the worker never frees. This callback installs fork
  hooks (os.register_at_fork) that freeze the GC generations just before each fork (gc.freeze: the
  child starts with them in the permanent generation, which it never collects) and unfreeze them in
  the parent right after it (gc.unfreeze), so the parent collects as before.
- The connection plugin was imported, and its documentation parsed for its configuration
  definitions, in every worker again (about 6 ms a task), because the parent itself never loads it.
  So were the filter and test plugins the task's templates use. When the playbook starts, this
  callback loads in the parent the connection plugins (the configured default transport and those
  named in `preload_connections`), the `sh` shell, the configured become method, ansible.builtin's
  filters and tests, and those of the collections in `preload_collections` (this one by default);
  workers inherit them loaded.

It changes no task, no result and no output. Measured on a converged lab host (ansible-playbook
site.yml no-op, 2 CPUs, three alternating runs each): the GC hooks took one host 8.38 s -> 8.03 s and
three hosts 13.82 s -> 13.03 s; the connection preload then took one host 7.63 s -> 7.28 s, and the
filter and test preload 7.77 s -> 7.26 s (four alternating runs).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: prefork
type: aggregate
short_description: Make the forked workers of ansible-playbook cheaper (GC hooks, preloaded plugins)
description:
  - Registers fork hooks (C(os.register_at_fork)) in the ansible-playbook process that freeze the
    garbage collector's generations before each worker fork (C(gc.freeze)) and unfreeze them in the
    parent right after it (C(gc.unfreeze)). A worker then never walks, and so never copies, the objects
    it inherited; the parent collects as before.
  - When the playbook starts, loads in the parent the connection plugins (the configured default
    transport and O(preload_connections)), the C(sh) shell plugin, the configured become method,
    ansible.builtin's filter and test plugins and those of O(preload_collections), so that workers
    do not import them and parse their documentation again for every task.
  - Tasks, results and output are unchanged. Enable it in C(callbacks_enabled) (this repository's
    C(ansible.cfg) does).
requirements:
  - enabled in the configuration (callbacks_enabled)
options:
  preload_connections:
    description:
      - Connection plugins to load in the parent besides the configured default transport, e.g. the
        C(ansible_connection) of the inventory's hosts. A name that does not resolve is reported as a
        warning and skipped.
    type: list
    elements: str
    default: []
    ini:
      - section: callback_prefork
        key: preload_connections
    env:
      - name: SGLANG_DEPLOY_PREFORK_PRELOAD_CONNECTIONS
  preload_collections:
    description:
      - Collections whose filter and test plugins are loaded in the parent (ansible.builtin's always
        are). A collection without such plugins is reported as a warning and skipped.
    type: list
    elements: str
    default: [sglang.deploy]
    ini:
      - section: callback_prefork
        key: preload_collections
    env:
      - name: SGLANG_DEPLOY_PREFORK_PRELOAD_COLLECTIONS
"""


import gc
import importlib
import os
import pkgutil
from typing import Any

from ansible import constants as C  # type: ignore[import-untyped]
from ansible.plugins.callback import CallbackBase  # type: ignore[import-untyped]
from ansible.plugins.loader import (  # type: ignore[import-untyped]
    become_loader,
    connection_loader,
    filter_loader,
    shell_loader,
    test_loader,
)

_registered: set[int] = set()  # the pids whose fork hooks are installed (a forked child keeps them)


def register_fork_hooks() -> bool:
    """Install the hooks once per process; return whether this call installed them."""
    if _registered:
        return False
    os.register_at_fork(before=gc.freeze, after_in_parent=gc.unfreeze)
    _registered.add(os.getpid())
    return True


def preload(connections: list[str]) -> list[str]:
    """Load the plugins workers would load for every task; return the names that did not resolve."""
    missing = []
    wanted = [C.DEFAULT_TRANSPORT, *connections] if C.DEFAULT_TRANSPORT != "smart" else connections
    for kind, loader, name in [
        *(("connection", connection_loader, name) for name in dict.fromkeys(wanted)),
        ("shell", shell_loader, "sh"),
        ("become", become_loader, C.DEFAULT_BECOME_METHOD),
    ]:
        if loader.get(name, class_only=True) is None:
            missing.append(f"{kind} plugin {name}")
    return missing


def preload_jinja_plugins(collections: list[str]) -> tuple[int, list[str]]:
    """Load ansible.builtin's filters and tests (by short name and FQCN) and those of `collections`;
    return how many names were loaded and the collections that have none."""
    loaded, missing = 0, []
    for loader in (filter_loader, test_loader):
        for plugin in loader.all():
            for name in (plugin.ansible_name, plugin.ansible_name.rsplit(".", 1)[-1]):
                loaded += loader.get_with_context(name).object is not None
    for collection in dict.fromkeys(collections):
        found = 0
        for kind, loader, method in (("filter", filter_loader, "filters"), ("test", test_loader, "tests")):
            try:
                package = importlib.import_module(f"ansible_collections.{collection}.plugins.{kind}")
            except ModuleNotFoundError:
                continue
            for info in pkgutil.iter_modules(package.__path__):
                module = importlib.import_module(f"{package.__name__}.{info.name}")
                holder = getattr(module, "FilterModule" if kind == "filter" else "TestModule", None)
                for name in getattr(holder(), method)() if holder else ():
                    found += loader.get_with_context(f"{collection}.{name}").object is not None
        loaded += found
        if not found:
            missing.append(f"filter or test plugins of collection {collection}")
    return loaded, missing


class CallbackModule(CallbackBase):  # type: ignore[misc]  # ansible ships no type information
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang.deploy.prefork"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        register_fork_hooks()

    def v2_playbook_on_start(self, playbook: Any) -> None:
        missing = preload(list(self.get_option("preload_connections")))
        missing += preload_jinja_plugins(list(self.get_option("preload_collections")))[1]
        for name in missing:
            self._display.warning(f"sglang.deploy.prefork: no {name} to preload; skipped")
