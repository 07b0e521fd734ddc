"""bench/role_stats.py on a made-up checkout: tasks inside blocks counted one by one, the bookkeeping
actions recognised by short name or FQCN, the Python a role calls found through its FQCN references."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "role_stats.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("role_stats", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["role_stats"] = module
    spec.loader.exec_module(module)
    return module


TASKS = """---
- name: Fact
  ansible.builtin.set_fact:
    a: "{{ x | sglang.deploy.shout }}"
- name: Block
  when: true
  block:
    - name: Check
      ansible.builtin.assert:
        that: true
    - name: Write
      ansible.builtin.copy:
        dest: /tmp/x
        content: x
        mode: "0644"
  rescue:
    - name: Fail
      fail:
        msg: no
  always:
    - name: More
      ansible.builtin.include_tasks: more.yml
- name: Probe
  sglang.deploy.probe:
  register: p
"""
FILTER = """
from ansible_collections.sglang.deploy.plugins.module_utils.words import loud

class FilterModule:
    def filters(self):
        return {"shout": loud}
"""


def test_counts_on_a_made_up_checkout(tmp_path: Path) -> None:
    role = tmp_path / "roles" / "demo"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(TASKS)
    (role / "molecule" / "demo").mkdir(parents=True)
    (role / "molecule" / "demo" / "molecule.yml").write_text("---\nscenario:\n  name: demo\n")
    plugins = tmp_path / "plugins"
    for sub in ("filter", "modules", "module_utils"):
        (plugins / sub).mkdir(parents=True)
    (plugins / "filter" / "words.py").write_text(FILTER)
    (plugins / "filter" / "unused.py").write_text(
        "class FilterModule:\n    def filters(self):\n        return {'x': 1}\n"
    )
    (plugins / "modules" / "probe.py").write_text("print(1)\n")
    (plugins / "module_utils" / "words.py").write_text("def loud(x):\n    return x\n")
    rows = {row["role"]: row for row in load().stats(tmp_path)}
    demo = rows["demo"]
    assert demo["tasks"] == 6  # the block's children, not the block
    assert demo["files"] == 1
    assert (demo["set_fact"], demo["assert"], demo["include"], demo["debug"]) == (1, 2, 1, 0)
    assert demo["yaml"] == len(TASKS.splitlines())
    assert demo["yaml_mol"] == 3
    assert demo["py_files"] == [
        "plugins/filter/words.py",
        "plugins/module_utils/words.py",
        "plugins/modules/probe.py",
    ]
    assert demo["py"] == len(FILTER.splitlines()) + 2 + 1
    assert rows["TOTAL"]["tasks"] == 6
