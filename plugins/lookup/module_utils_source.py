"""Lookup ``sglang.deploy.module_utils_source``: the source text of this collection's module_utils,
for a file a role copies onto a host (the benchmark's scrubber and its secret-name rule) without
reaching out of the role with ``role_path/../../plugins``."""

from __future__ import annotations

DOCUMENTATION = r"""
name: module_utils_source
author: sglang-deploy contributors (@sglang-deploy)
version_added: "0.2.0"
short_description: The source text of one of this collection's module_utils
description:
  - Returns the text of C(plugins/module_utils/<name>.py) of the collection sglang.deploy, found through
    Python's import system (where Ansible loaded the collection from), for each name given.
  - For pure-Python helpers that a script on the managed host loads beside itself (the verify role's
    benchmark runner loads C(verify_scrub) and C(secret_names)), with one file in the collection, no
    copy in a role's C(files/) and no path out of the role.
  - A name must be a plain module name (letters, digits, underscores); anything else, or a name that is
    not a module_utils of this collection, fails the lookup naming it.
options:
  _terms:
    description: Module names under C(plugins/module_utils/), without the C(.py) suffix.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Copy the scrubber beside the benchmark runner
  ansible.builtin.copy:
    content: "{{ lookup('sglang.deploy.module_utils_source', 'verify_scrub') }}"
    dest: /tmp/work/verify_scrub.py
    mode: "0644"
"""

RETURN = r"""
_raw:
  description: The source text of each named module, in the order given.
  type: list
  elements: str
"""

import importlib.util
import re
from typing import Any

from ansible.errors import AnsibleLookupError  # type: ignore[import-untyped]
from ansible.plugins.lookup import LookupBase  # type: ignore[import-untyped]

_PACKAGE = "ansible_collections.sglang.deploy.plugins.module_utils"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def source_of(name: str) -> str:
    """The text of module_utils/<name>.py of this collection (AnsibleLookupError when not one)."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise AnsibleLookupError(
            f"module_utils_source: {name!r} is not a module name (allowed: letters, digits, underscores)"
        )
    try:
        spec = importlib.util.find_spec(f"{_PACKAGE}.{name}")
    except (ImportError, ValueError):  # Ansible's collection finder raises these for a missing module
        spec = None
    if spec is None or spec.origin is None or not spec.origin.endswith(f"/{name}.py"):
        raise AnsibleLookupError(f"module_utils_source: {name!r} is not a module_utils of sglang.deploy")
    with open(spec.origin, encoding="utf-8") as handle:
        return handle.read()


class LookupModule(LookupBase):  # type: ignore[misc]  # ansible ships no type information
    """Ansible entry point."""

    def run(self, terms: list[Any], variables: Any = None, **kwargs: Any) -> list[str]:
        self.set_options(var_options=variables, direct=kwargs)
        return [source_of(term) for term in terms]
