#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""One Debian package at one version, held, its drift repaired, and check mode that tells the truth
(issue 33 item 5).

module: sglang.deploy.pinned_package
ansible.builtin.apt fails in check mode on a package no index knows yet (the repository that carries
it is added by the same run), and cannot reinstall; dpkg_selections fails in check mode on a package
dpkg does not know. The role predicted those with `debug changed_when: true`. This module reads dpkg's
answer first and reports (check mode) or makes (a real run) exactly the change: install at the version,
reinstall the packages named (drift), hold or unhold.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: pinned_package
short_description: One Debian package at one version, held, drift repaired; check mode predicts
description:
  - Reads C(dpkg-query) for the package's installed version and selection, then installs
    O(name)=O(version) (C(apt-get update) first) when another version or none is installed, reinstalls the
    packages of O(reinstall) when the wanted version is already installed (a deleted or replaced file of
    theirs), and sets the selection to C(hold) (O(hold=true)) or C(install).
  - Check mode reads only and reports the same change, also for a package that no apt index knows yet
    (its repository is added by the same run), where M(ansible.builtin.apt) fails.
  - Changed only when something was (or in check mode would be) installed, reinstalled or (un)held.
  - Debian family only. Used by the role cuda_toolkit (apt method).
version_added: 1.0.0
author: sglang-deploy contributors (@sglang-deploy)
options:
  name:
    description: The package.
    type: str
    required: true
  version:
    description: The version wanted (as C(apt-cache policy) and C(dpkg-query) print it, e.g. C(13.0.1-1)).
    type: str
    required: true
  hold:
    description: Hold the package (C(true)) or set its selection back to C(install).
    type: bool
    default: true
  update_cache:
    description:
      - Run C(apt-get update) before the install even when the wanted version is installed (a repository
        changed in this run). An install always updates first.
    type: bool
    default: false
  reinstall:
    description:
      - Packages to reinstall (C(apt-get install --reinstall)) when O(name) is already at O(version), the
        packages owning files that drifted. Ignored when O(name) is installed by this call.
    type: list
    elements: str
    default: []
  reason:
    description: Why O(reinstall) is asked for (the drift), the first words of the report.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: dpkg is read; the install, reinstall and hold are reported, not made.
  diff_mode:
    support: full
    description: The package's version and selection before and after; the header after names the change.
  platform:
    support: full
    platforms: debian
    description: Debian and Ubuntu (dpkg, apt-get, apt-mark).
"""

EXAMPLES = r"""
- name: Install cuda-toolkit-13-0 at 13.0.1-1 and hold it
  sglang.deploy.pinned_package:
    name: cuda-toolkit-13-0
    version: 13.0.1-1
    hold: true

- name: The package is at the version but nvcc was deleted - reinstall the package that owns it
  sglang.deploy.pinned_package:
    name: cuda-toolkit-13-0
    version: 13.0.1-1
    reinstall: [cuda-nvcc-13-0]
    reason: "/usr/local/cuda-13.0: bin/nvcc is missing"
"""

RETURN = r"""
installed:
  description: The version installed before this call (empty when none).
  type: str
  returned: always
  sample: 13.0.0-1
actions:
  description: What was done (or in check mode would be), in order.
  type: list
  elements: str
  returned: always
  sample: [install cuda-toolkit-13-0=13.0.1-1, hold]
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.release import APT_ENV, dpkg_state


def plan(p: dict[str, Any], installed: str, selection: str) -> list[str]:
    """The actions, in order: install (another version or none), reinstall (at the version, drift),
    hold / unhold."""
    spec = f"{p['name']}={p['version']}"
    actions = []
    if installed != p["version"]:
        actions.append(f"install {spec}")
    elif p["reinstall"]:
        actions.append(f"reinstall {' '.join(p['reinstall'])}")
    # apt-get install resets the selection to install: after an install or reinstall a hold is set again
    if p["hold"] and (selection != "hold" or actions):
        actions.append("hold")
    elif not p["hold"] and selection == "hold":
        actions.append("unhold")
    return actions


def message(p: dict[str, Any], installed: str, actions: list[str], check: bool) -> str:
    spec = f"{p['name']}={p['version']}"
    if not actions:
        return f"{spec} installed{', held' if p['hold'] else ''}"
    held = "hold" if p["hold"] else "unhold"
    if actions[0].startswith("install"):
        verb = "check mode: would install" if check else "installed"
        return f"{verb} {spec} (installed: {installed or 'none'}) and {held} it"
    if actions[0].startswith("reinstall"):
        verb = "a real run reinstalls" if check else "reinstalled"
        return f"drift: {p['reason'] or 'files differ'}; {verb} {' '.join(p['reinstall'])}"
    return f"{'check mode: would ' if check else ''}{held} {p['name']} (at {p['version']})"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "version": {"type": "str", "required": True},
            "hold": {"type": "bool", "default": True},
            "update_cache": {"type": "bool", "default": False},
            "reinstall": {"type": "list", "elements": "str", "default": []},
            "reason": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    name = str(p["name"])
    if name.startswith("-") or any(c.isspace() or c in "=" for c in name):
        module.fail_json(msg=f"name={name!r} is not a package name")
    query = ["dpkg-query", "-W", "-f", "${Version} ${db:Status-Abbrev}", name]
    _rc, out, _err = module.run_command(query)  # rc 1: dpkg does not know the package (not installed)
    installed, selection = dpkg_state(str(out))
    actions = plan(p, installed, selection)
    result: dict[str, Any] = {"changed": bool(actions), "installed": installed, "actions": actions}
    if module._diff and actions:
        wanted = "hold" if p["hold"] else "install"
        result["diff"] = {
            "before_header": f"dpkg: {name}",
            "after_header": message(p, installed, actions, module.check_mode),
            "before": f"{name} {installed or '(not installed)'} {selection}\n",
            "after": f"{name} {p['version']} {wanted}\n"
            + (f"reinstall {' '.join(p['reinstall'])}\n" if actions[0].startswith("reinstall") else ""),
        }
    if module.check_mode or not actions:
        module.exit_json(msg=message(p, installed, actions, module.check_mode), **result)

    def run(argv: list[str], what: str) -> None:
        rc, so, se = module.run_command(argv, environ_update=APT_ENV)
        if rc != 0:
            module.fail_json(msg=f"{what} failed (rc {rc}): {(se or so).strip()[-3000:]}", **result)

    allow = ["--allow-change-held-packages", "--allow-downgrades"]
    if actions[0].startswith("install") or p["update_cache"]:
        run(["apt-get", "update", "-q"], "apt-get update")
    if actions[0].startswith("install"):
        run(["apt-get", "install", "-y", "-q", *allow, f"{name}={p['version']}"], "apt-get install")
        _rc, out, _err = module.run_command(query)
        now, _sel = dpkg_state(str(out))
        if now != p["version"]:
            module.fail_json(
                msg=f"{name} is at {now or 'none'} after the install, not {p['version']}",
                **result,
            )
    elif actions[0].startswith("reinstall"):
        reinstall = ["apt-get", "install", "-y", "-q", "--reinstall", *allow, *p["reinstall"]]
        run(reinstall, "apt-get install --reinstall")
    if actions[-1] in ("hold", "unhold"):
        run(["apt-mark", actions[-1], name], f"apt-mark {actions[-1]}")
    module.exit_json(msg=message(p, installed, actions, False), **result)


if __name__ == "__main__":
    main()
