"""The role graph is declared: every include_role/import_role that enters another role through
``tasks_from`` (from a role, a playbook or a molecule scenario) names an entry point of that role's
``meta/argument_specs.yml``, by its bare name - Ansible looks the spec up by the literal ``tasks_from``
value, so ``launch_spec.yml`` would silently skip the validation ``launch_spec`` gets - and no role
reaches into another's directory through ``role_path``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from modload import REPO

INCLUDES = {"ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role"}
SOURCES = [*REPO.glob("roles/**/*.yml"), *REPO.glob("playbooks/**/*.yml"), REPO / "site.yml"]


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key in INCLUDES & node.keys():
            if isinstance(node[key], dict):
                yield node[key]
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _role_of(path: Path) -> str | None:
    parts = path.relative_to(REPO).parts
    return parts[1] if parts[0] == "roles" and "molecule" not in parts else None


def cross_role_entries() -> list[tuple[str, str, str]]:
    """(source file, target role, tasks_from) of every static cross-role entry."""
    found = []
    for path in SOURCES:
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue  # a Jinja template, not YAML
        for args in _walk(data):
            name, entry = str(args.get("name", "")), args.get("tasks_from")
            if not entry or "{{" in str(entry) or "{{" in name:
                continue
            if _role_of(path) != name.rsplit(".", 1)[-1]:
                found.append((str(path.relative_to(REPO)), name.rsplit(".", 1)[-1], str(entry)))
    return found


def test_the_graph_has_edges() -> None:
    targets = {(role, entry) for _src, role, entry in cross_role_entries()}
    assert ("preflight", "launch_spec") in targets
    assert ("verify", "bench_run") in targets
    assert ("deploy_state", "restore") in targets


def test_every_cross_role_entry_point_is_declared_by_its_bare_name() -> None:
    missing = []
    for source, role, entry in cross_role_entries():
        specs = yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())
        if entry not in specs["argument_specs"]:
            missing.append(f"{source}: {role} tasks_from {entry!r}")
    why = "undeclared entry points (or a .yml suffix, which skips the spec)"
    assert missing == [], why + ":\n" + "\n".join(missing)


def test_no_role_reaches_into_another_through_role_path() -> None:
    # none at all: the collection's module_utils a host script needs come through the lookup
    # sglang.deploy.module_utils_source (verify's benchmark), not role_path/../../plugins
    reach = re.compile(r"role_path\s*\}\}/\.\./")
    tasks = REPO.glob("roles/*/tasks/*.yml")
    offenders = [str(p.relative_to(REPO)) for p in tasks if reach.search(p.read_text())]
    assert offenders == [], offenders
