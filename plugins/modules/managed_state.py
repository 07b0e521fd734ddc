#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""A role's whole host state (groups, users, directories, files, links, absent paths, units),
compared and applied in one round trip; check mode and --diff native. The logic lives in
plugins/module_utils/managed_state.py (pure Python, tested by pytest)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: managed_state
short_description: Apply or report a role's host state (files, dirs, links, users, units) in one round trip
description:
  - O(state) describes everything a role keeps on a host; file contents are rendered on the
    controller (for example C(lookup('ansible.builtin.template', 'x.j2')) in the role's vars).
  - The module first computes, per item, what differs on the host (RV(items[].why)); then, unless in
    check mode, applies exactly those differences. Check mode and a real run share that one code
    path, so check mode reports what a real run would change.
  - Items are handled in the order groups, users, directories, files, links, absent, units (a
    directory's owner may be the user created in the same call).
  - A file is written to a temporary file in its own directory (owner, group, mode set, optional
    O(state.files[].validate) run on it) and renamed over the target (atomic). Only the owner, group
    or mode differing changes them in place.
  - A file with O(state.files[].secret=true) takes its content from O(secrets), a C(no_log) option
    (the invocation logged on the host masks it), and never shows it, nor a hash of it, in RV(diff)
    or RV(items).
  - A unit is reloaded (C(systemctl daemon-reload)) when its file O(state.units[].path), a file
    under C(<path>.d/) or one of O(state.units[].dropins) changed in this call, then enabled or disabled.
version_added: "0.1.0"
author: sglang-deploy contributors (@sglang-deploy)
options:
  state:
    description: The host state.
    type: dict
    required: true
    suboptions:
      groups:
        description: Groups that must exist (C(groupadd)).
        type: list
        elements: dict
        default: []
        suboptions:
          name: {description: Group name., type: str, required: true}
          system: {description: Create it as a system group., type: bool, default: true}
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
      users:
        description: Users with exactly these attributes (C(useradd)/C(usermod); no home is created).
        type: list
        elements: dict
        default: []
        suboptions:
          name: {description: User name., type: str, required: true}
          group: {description: Primary group., type: str}
          groups:
            description: Supplementary groups (exactly these plus O(state.users[].optional_groups)).
            type: list
            elements: str
            default: []
          optional_groups:
            description: Supplementary groups added only when they exist on the host.
            type: list
            elements: str
            default: []
          home: {description: Home directory (not created)., type: str}
          shell: {description: Login shell., type: str}
          comment: {description: GECOS comment., type: str}
          system: {description: Create it as a system user., type: bool, default: true}
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
      directories:
        description: Directories that must exist (missing parents are created with the same mode).
        type: list
        elements: dict
        default: []
        suboptions:
          path: {description: Absolute path., type: str, required: true}
          mode: {description: Octal mode as a string (C("0755")); omitted = not managed., type: str}
          owner: {description: Owner name; omitted = not managed., type: str}
          group: {description: Group name; omitted = not managed., type: str}
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
      files:
        description: Regular files with exactly this content, owner, group and mode.
        type: list
        elements: dict
        default: []
        suboptions:
          path:
            description: Absolute path; its directory must exist (or be in O(state.directories)).
            type: str
            required: true
          content:
            description: The whole content (text rendered on the controller); not for a secret file.
            type: str
          secret:
            description:
              - A secret file (an API key file) whose content is the O(secrets) entry of its path; its
                content is never returned, diffed, hashed or logged (O(secrets[].content) is C(no_log)).
            type: bool
            default: false
          mode:
            description: Octal mode as a string (C("0644")); omitted = 0644 for a new file, else not managed.
            type: str
          owner: {description: Owner name; omitted = not managed., type: str}
          group: {description: Group name; omitted = not managed., type: str}
          validate:
            description: Command run on the temporary file before it replaces the target; C(%s) is its
              path (as for C(ansible.builtin.template)).
            type: str
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
      links:
        description: Symbolic links pointing at exactly O(state.links[].src) (replaced by rename).
        type: list
        elements: dict
        default: []
        suboptions:
          path: {description: Absolute path of the link., type: str, required: true}
          src: {description: "Link target, as written.", type: str, required: true}
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
      absent:
        description:
          - Paths that must not exist (a file or link is unlinked, a directory removed; never read).
          - Each item is an absolute path or C({path, trigger}) (C(trigger) sets RV(triggered) when removed).
        type: list
        elements: raw
        default: []
      prune:
        description:
          - Directories in which every entry that is not a directory, not named in O(state.prune[].keep)
            and no file or link of this state, is an O(state.absent) item (a systemd drop-in directory).
          - A missing directory is fine (nothing to remove; it is not created).
        type: list
        elements: dict
        default: []
        suboptions:
          path: {description: Absolute path of the directory., type: str, required: true}
          keep: {description: Entry names left alone., type: list, elements: str, default: []}
          trigger: {description: Sets RV(triggered) when an entry is removed., type: bool, default: false}
      units:
        description: systemd units (last, after the files).
        type: list
        elements: dict
        default: []
        suboptions:
          name: {description: Unit name (C(x.service))., type: str, required: true}
          enabled:
            description: Enabled at boot (true) or not (false); omitted = not managed.
            type: bool
          path:
            description: The unit's file; when it or a file under C(<path>.d/) changed, systemd is reloaded.
            type: str
          dropins:
            description: Drop-ins of the unit in other directories (a runtime
              C(/run/systemd/system/<unit>.d/x.conf)); when one changed (an O(state.absent) item
              removed it), systemd is reloaded.
            type: list
            elements: str
            default: []
          trigger: {description: Sets RV(triggered) when this item changes., type: bool, default: false}
  secrets:
    description:
      - Content of the O(state.files[].secret=true) files, one entry per file.
      - Only O(secrets[].content) is C(no_log); the path stays readable in the result and the diff.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The secret file's path (as in O(state.files[].path)).
        type: str
        required: true
      content:
        description: Its whole content (C(no_log)).
        type: str
        required: true
notes:
  - Check mode and C(--diff) are supported; check mode writes nothing and runs no changing command.
  - A file whose owner is a user created in the same call is reported (check mode) as C(owner) drift.
"""

EXAMPLES = r"""
- name: Apply the role's host state (one round trip)
  sglang.deploy.managed_state:
    state:
      directories:
        - {path: /etc/sglang, owner: root, group: root, mode: "0755"}
      files:
        - path: /etc/sglang/nccl.env
          content: "{{ lookup('ansible.builtin.template', 'nccl.env.j2') }}"
          owner: root
          group: root
          mode: "0644"
        - path: /etc/sglang/key.yaml
          secret: true
          mode: "0600"
          trigger: true
      absent:
        - /etc/sglang/api-key.env
      prune:
        - {path: /etc/systemd/system/app.service.d, keep: [], trigger: true}
      units:
        - {name: app.service, enabled: true, path: /etc/systemd/system/app.service}
    secrets:
      - path: /etc/sglang/key.yaml
        content: "{{ {'api-key': sglang_api_key} | to_json }}\n"
  register: state_result
  notify: Restart app
"""

RETURN = r"""
changed:
  description: Whether any item changed (in check mode - would change).
  returned: always
  type: bool
triggered:
  description: Whether an item with C(trigger=true) changed (would change in check mode).
  returned: always
  type: bool
items:
  description: Every item of the state, in the order handled.
  returned: always
  type: list
  elements: dict
  contains:
    kind: {description: "group, user, directory, file, link, absent or unit.", type: str, returned: always}
    path: {description: The path (paths' kinds)., type: str, returned: when a path kind}
    name: {description: "The name (group, user, unit).", type: str, returned: when a named kind}
    changed:
      description: Whether it differed (and, not in check mode, was changed).
      type: bool
      returned: always
    why:
      description: "What differed: missing, content, mode, owner, group, type, src, present (absent
        items), enabled, reload (units), or a user's group, groups, home, shell, comment."
      type: list
      elements: str
      returned: always
    secret:
      description: True for a secret file (nothing of its content is returned).
      type: bool
      returned: when a secret file
    enabled:
      description: >-
        A unit's C(systemctl is-enabled) answer as the call leaves it (C(enabled), C(disabled), C(static),
        C(not-found), ...; in check mode, as it is): the caller reads no second time.
      type: str
      returned: for a unit whose enabled is set
  sample: [{kind: file, path: /etc/sglang/nccl.env, changed: true, why: [content]}]
diff:
  description: Ansible's before/after per changed item (text for contents, else attribute dicts;
    secrets masked).
  returned: always
  type: list
  elements: dict
"""


from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.managed_state import StateError, run


def _opts(**spec: Any) -> dict[str, Any]:
    return {k: ({"type": v} if isinstance(v, str) else v) for k, v in spec.items()}


def _items(**spec: Any) -> dict[str, Any]:
    return {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": _opts(**spec, trigger={"type": "bool", "default": False}),
    }


ARGUMENT_SPEC: dict[str, Any] = {
    "state": {
        "type": "dict",
        "required": True,
        "options": {
            "groups": _items(
                name={"type": "str", "required": True}, system={"type": "bool", "default": True}
            ),
            "users": _items(
                name={"type": "str", "required": True},
                group="str",
                groups={"type": "list", "elements": "str", "default": []},
                optional_groups={"type": "list", "elements": "str", "default": []},
                home="str",
                shell="str",
                comment="str",
                system={"type": "bool", "default": True},
            ),
            "directories": _items(
                path={"type": "str", "required": True}, mode="str", owner="str", group="str"
            ),
            "files": _items(
                path={"type": "str", "required": True},
                content="str",
                secret={"type": "bool", "default": False},
                mode="str",
                owner="str",
                group="str",
                validate="str",
            ),
            "links": _items(path={"type": "str", "required": True}, src={"type": "str", "required": True}),
            "absent": {"type": "list", "elements": "raw", "default": []},
            "prune": _items(
                path={"type": "str", "required": True},
                keep={"type": "list", "elements": "str", "default": []},
            ),
            "units": _items(
                name={"type": "str", "required": True},
                enabled="bool",
                path="str",
                dropins={"type": "list", "elements": "str", "default": []},
            ),
        },
    },
    "secrets": {
        "type": "list",
        "elements": "dict",
        "default": [],
        # Only the content is no_log: a no_log list would mask its paths too, wherever they appear in
        # the result (the drift report then said VALUE_SPECIFIED_IN_NO_LOG_PARAMETER for the key file).
        # no_log=False says so to validate-modules, which asks it of every secret-looking option name.
        "no_log": False,
        "options": {
            "path": {"type": "str", "required": True},
            "content": {"type": "str", "required": True, "no_log": True},
        },
    },
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    state: dict[str, Any] = module.params["state"]
    secrets: dict[str, Any] = {entry["path"]: entry["content"] for entry in module.params["secrets"] or []}
    for item in state.get("files") or []:
        if item.get("secret"):
            if item["path"] not in secrets or item.get("content") is not None:
                module.fail_json(
                    msg=f"managed_state: secret file {item['path']}: its content must be "
                    "the secrets entry of its path (and no content)"
                )
            item["secret_content"] = str(secrets[item["path"]])
    try:
        result = run(state, check=module.check_mode)
    except (StateError, OSError) as exc:
        module.fail_json(msg=f"managed_state: {exc}")
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
