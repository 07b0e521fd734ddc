# Copyright: sglang-deploy contributors
"""Action plugin sglang.deploy.validate_inputs: the one validator of the roles' inputs (controller side;
documented in plugins/modules/validate_inputs.py).

It reads the role's argument spec (entry point ``validate``), templates each option and each name the
role's rules read besides (``FACTS`` of plugins/plugin_utils/input_rules/<role>.py; ``GROUP_FACTS``,
names read from the hosts of a group, as ``group_facts``), applies the
control-character and ``..`` checks (plugins/module_utils/text_checks.py) to every option once, then
the role's rules, and fails with every error at once. Nothing on a host is contacted.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.plugins.action import ActionBase  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.text_checks import argspec_inputs, text_errors

COLLECTION = Path(__file__).resolve().parents[2]
RULES = "ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules"


def spec_inputs(role: str, entry: str = "validate") -> list[str]:
    """The option names of the role's argument spec entry point (``main`` when it has no such entry)."""
    path = COLLECTION / "roles" / role / "meta" / "argument_specs.yml"
    return list(argspec_inputs(yaml.safe_load(path.read_text(encoding="utf-8")) or {}, entry))


def rules_of(role: str) -> Any:
    """The role's rule module, or None when the role has only the control-character check."""
    try:
        return importlib.import_module(f"{RULES}.{role}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{RULES}.{role}":
            raise
        return None


class ActionModule(ActionBase):  # type: ignore[misc]
    """Checks one role's inputs on the controller; fails listing every error."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("role", "entry"))
    _requires_connection = False

    @staticmethod
    def _group_facts(task_vars: dict[str, Any], wanted: dict[str, Any], errors: list[str]) -> dict[str, Any]:
        """{group: {host: {name: value}}}: the ``GROUP_FACTS`` a role's rules read from other hosts (each
        templated in its host's context by hostvars; a name a host lacks is absent)."""
        found: dict[str, Any] = {}
        hostvars = task_vars.get("hostvars") or {}
        for group, names in wanted.items():
            found[group] = {}
            for host in (task_vars.get("groups") or {}).get(group, []):
                if host not in hostvars:
                    continue
                for name in names:
                    if name not in hostvars[host]:
                        continue
                    try:
                        found[group].setdefault(host, {})[name] = hostvars[host][name]
                    except AnsibleError as exc:
                        errors.append(f"{name} of host {host} cannot be read: {exc.message}")
        return found

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        role = str(self._task.args.get("role") or "")
        entry = str(self._task.args.get("entry") or "validate")
        if not (COLLECTION / "roles" / role / "meta" / "argument_specs.yml").is_file():
            return {**result, "failed": True, "msg": f"validate_inputs: role={role!r} has no argument spec"}
        names = spec_inputs(role, entry)
        rules = rules_of(role)
        values: dict[str, Any] = {}
        errors: list[str] = []
        for name in [*names, *getattr(rules, "FACTS", ())]:
            if name not in task_vars or name in values:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except AnsibleError as exc:
                errors.append(f"{name} cannot be read: {exc.message}")
        values["group_facts"] = self._group_facts(task_vars, getattr(rules, "GROUP_FACTS", {}), errors)
        errors += text_errors({name: values.get(name, "") for name in names})
        if rules is not None:
            errors += rules.errors(values)
        result.update(changed=False, role=role, checked=len(names))
        if errors:
            result.update(failed=True, errors=errors, msg=f"{role}: invalid input: {' | '.join(errors)}")
        elif rules is not None and hasattr(rules, "summary"):
            # what the inputs decided, printed like an assert's success_msg (without -v too)
            result.update(msg=rules.summary(values), _ansible_verbose_always=True)
        return result
