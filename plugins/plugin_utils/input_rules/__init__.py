"""The input rules of the roles, one module per role (``<role>.py``), run by the action
``sglang.deploy.validate_inputs`` (plugins/action/validate_inputs.py): the one validator of the
collection. Each role's ``tasks/validate.yml`` (its ``validate`` entry point, which preflight runs for
every role of ``preflight_validate_roles`` before any host change) is that one task.

A rule module defines:

- ``FACTS``: the names its rules read besides the options of the role's argument spec (entry point
  ``validate``), e.g. ``preflight_launch_spec`` (absent from the values when undefined);
- ``GROUP_FACTS`` (optional): ``{group: (name, ...)}``, names read from every host of a group (e.g. the
  servers' ``verify_baseline_records`` for the router), given as ``v["group_facts"][group][host][name]``;
- ``errors(v)``: ``v`` maps each of those names to its templated value (an undefined name is absent);
  returns every error at once, each naming the variable, its value (never a secret's: the one
  secret-name rule) and what is allowed;
- ``summary(v)`` (optional): the line the task prints when the inputs hold (what they decided, e.g.
  cuda_toolkit's driver gate), shown without ``-v`` like an assert's ``success_msg``.

The control-character and ``..`` checks (plugins/module_utils/text_checks.py) run over every option
of the spec in the action, once, before these rules. Pure Python on the controller (no Ansible
import): tests/test_input_rules.py calls the rules with plain dicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.text_checks import has_control


def as_json(value: Any) -> str:
    """A value as the Jinja filter ``to_json`` wrote it in the former assert messages."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # a self-referencing structure
        return repr(value)


def full(pattern: str, value: Any) -> bool:
    """A string without control characters that full-matches ``pattern`` (the one string rule)."""
    return isinstance(value, str) and not has_control(value) and re.fullmatch(pattern, value) is not None


def is_list(value: Any) -> bool:
    """A list (or tuple): not a string, not a mapping."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | Mapping)


class Errors(list[str]):
    """The error list of one role's rules, in the collection's one message form."""

    def bad(self, var: str, value: Any, allowed: str) -> None:
        """``var=<value as JSON> is not valid: allowed <allowed>``."""
        self.append(f"{var}={as_json(value)} is not valid: allowed {allowed}")
