"""The callback sglang.deploy.prefork: forked workers start with the parent's objects frozen (the
parent keeps collecting them), and the connection, filter and test plugins are loaded once in the
parent. Real forks in a child Python and in real ansible-playbook workers; real plugin loading in a
fresh Python.

The playbook test reads the freeze count inside the worker through a filter that exists only in
this test's temporary plugin dir (templates run in the worker process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from modload import REPO

PLUGIN = REPO / "plugins" / "callback" / "prefork.py"

# Each script below runs in a fresh Python after this prologue: `plugin` is the callback's module.
PROLOGUE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from modload import load_module
    plugin = load_module("prefork", Path(sys.argv[2]))
    """
)


def in_fresh_python(script: str) -> dict[str, Any]:
    """Run PROLOGUE + script in a new interpreter (nothing loaded yet); return the JSON it prints."""
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections")}
    proc = subprocess.run(
        [sys.executable, "-c", PROLOGUE + script, str(REPO / "tests"), str(PLUGIN)],
        capture_output=True, text=True, check=True, cwd=REPO, env=env,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


CHILD = textwrap.dedent(
    """
    import gc, os
    keep = [[i] for i in range(50000)]  # tracked objects, as a parsed playbook leaves
    first = plugin.register_fork_hooks()
    again = plugin.register_fork_hooks()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, str(gc.get_freeze_count()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = int(os.read(read, 64))
    print(json.dumps({"first": first, "again": again, "child_frozen": child,
                      "parent_frozen": gc.get_freeze_count(), "kept": len(keep)}))
    """
)

FILTER = textwrap.dedent(
    """
    import gc

    class FilterModule:
        def filters(self):
            return {"gc_freeze_count": lambda _: gc.get_freeze_count()}
    """
)

PLAYBOOK = textwrap.dedent(
    """
    - name: Read the worker's GC state
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Count the frozen objects in this task's worker
          ansible.builtin.debug:
            msg: "frozen={{ 0 | gc_freeze_count }}"
    """
)


def test_hooks_freeze_in_the_child_and_not_in_the_parent() -> None:
    result = in_fresh_python(CHILD)
    assert result["first"] is True  # one pair of hooks per process
    assert result["again"] is False
    assert result["child_frozen"] >= 50000  # the child inherited the parent's objects frozen
    assert result["parent_frozen"] == 0  # the parent unfroze right after the fork


PRELOAD = textwrap.dedent(
    """
    from ansible import constants as C
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()
    docker = "ansible_collections.community.docker.plugins.connection.docker"  # its resolved name
    known = lambda: C.config.has_configuration_definition("connection", docker)
    before = known()
    missing = plugin.preload(["community.docker.docker", "no.such.connection"])
    print(json.dumps({"before": before, "after": known(), "missing": missing,
                      "ssh": C.config.has_configuration_definition("connection", "ssh")}))
    """
)


def test_preload_registers_the_connection_plugins_and_names_the_missing() -> None:
    result = in_fresh_python(PRELOAD)
    assert result["before"] is False
    assert result["after"] is True  # its documentation was parsed here, not in each worker
    assert result["ssh"] is True  # the default transport, loaded without being named
    assert result["missing"] == ["connection plugin no.such.connection"]


JINJA = textwrap.dedent(
    """
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader()
    own = "ansible_collections.sglang.deploy.plugins.filter.launch_spec"
    # ansible.builtin's plugin modules are loaded under a name with a hash suffix
    core = lambda: any(name.startswith("ansible.plugins.filter.core") for name in sys.modules)
    before = own in sys.modules or core()
    loaded, missing = plugin.preload_jinja_plugins(["sglang.deploy", "no.such"])
    print(json.dumps({"before": before, "loaded": loaded, "missing": missing,
                      "own": own in sys.modules, "core": core()}))
    """
)


def test_preload_loads_the_builtin_and_the_collection_jinja_plugins() -> None:
    result = in_fresh_python(JINJA)
    assert result["before"] is False
    assert result["own"] is True  # sglang.deploy's filters (launch_spec among them)
    assert result["core"] is True  # ansible.builtin's
    assert result["loaded"] > 2 * 200  # short and FQCN names of ~250 builtin filters and tests, and ours
    assert result["missing"] == ["filter or test plugins of collection no.such"]


def run_playbook(tmp_path: Path, callbacks: str, preload: str = "") -> tuple[int, str]:
    (tmp_path / "filter").mkdir(exist_ok=True)
    (tmp_path / "filter" / "gcstate.py").write_text(FILTER)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(tmp_path / "none.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections"),
        "ANSIBLE_FILTER_PLUGINS": str(tmp_path / "filter"),
        "ANSIBLE_CALLBACKS_ENABLED": callbacks,
        "SGLANG_DEPLOY_PREFORK_PRELOAD_CONNECTIONS": preload,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-c", "local", str(tmp_path / "play.yml")],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if '"msg": "frozen=' in x)
    return int(line.split("frozen=")[1].strip().rstrip('"')), proc.stderr


def test_ansible_workers_start_frozen_only_with_the_callback(tmp_path: Path) -> None:
    frozen, stderr = run_playbook(
        tmp_path, "sglang.deploy.prefork", "community.docker.docker,no.such.connection"
    )
    assert frozen > 10000
    assert "sglang.deploy.prefork: no connection plugin no.such.connection to preload; skipped" in stderr
    assert run_playbook(tmp_path, "ansible.builtin.timer")[0] == 0
