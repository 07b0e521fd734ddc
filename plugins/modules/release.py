#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""The release lifecycle of the stack and the router, one module (issue 33 item 1).

module: sglang.deploy.release
A release is ``<releases_dir>/<id>/{requirements.lock, venv/, receipt.json, .complete}``; ``current``
points at one. Each step is a state of this module, so each has one implementation and reports its
own change (check mode predicts it, nothing else does): the tools (system packages, uv), the build
(partial directories removed, the directory, the lock and the venv synced from it), the completion
(receipt, then the marker last), the repair of a drifted venv, the prune (the one protect rule of
plugins/module_utils/release.py). The `current` switch is managed_state's link switch. What a role
installs and checks (its lock, its checks, its receipt's content) is the role's, passed in as data.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: release
short_description: The release lifecycle of the stack and the router (tools, build, completion, repair, prune)
description:
  - A release lives in O(releases_dir)/<O(release_id)>/ (C(requirements.lock), C(venv/), C(receipt.json),
    C(.complete) written last); a link C(current) points at the one in force. The link switch itself is
    M(sglang.deploy.managed_state)'s; every other step of the lifecycle is a O(state) of this module.
  - O(state=tools) installs the missing O(packages) (C(apt-get update), then C(apt-get install)) and uv,
    hash-pinned, into its own venv (O(uv_venv)) from O(uv_requirements) unless that venv's uv reports
    O(uv_version). Sources, proxies and pip's hash mode come from the task's C(environment).
  - O(state=venv) keeps a tool's venv (O(venv)) at O(distribution)==O(version) from a hash-pinned
    requirements file on the host (O(requirements)); it creates the venv with O(python) C(-m venv) when it
    has no interpreter and runs C(pip install --require-hashes -r) O(requirements) O(pip_args) unless the
    venv's C(importlib.metadata) already reports that version; a non-empty O(drift) (what the role found
    broken in the venv's files) forces C(--force-reinstall) and is the result's message. uv's venv of
    O(state=tools) is installed by the same code.
  - O(state=built) removes every release directory without C(.complete) (an interrupted or failed
    build, this id's included), then, unless the release is complete, creates its directory, writes
    the lock (O(lock_content) or a copy of O(lock_src)) and O(files), creates the venv with
    C(uv venv --python) O(python) and installs the lock with C(uv pip sync --require-hashes
    --compile-bytecode) O(uv_args). A failed install removes the directory. With O(current) it also
    returns the release C(current) points at before this run, and fails when C(current) is not a link.
  - O(state=complete) writes C(receipt.json) (O(receipt)), then C(.complete) holding the id, each by
    rename(2); a complete release is never rewritten.
  - O(state=synced) repairs a complete release that drifted (what the drift is comes from the
    role's audit, O(drift)) - C(uv pip sync) from its own lock with O(reinstall) reinstalled, the O(remove)
    files deleted, the tree given back to root (O(chown_root)) - and reports O(drift) as its message.
  - O(state=pruned) removes the complete releases beyond the newest O(keep), never the release in
    force (O(release_id)) nor a O(protected) one (the one C(current) pointed at before this run, the
    last good state's, the running process').
  - O(state=listed) changes nothing. It returns every release directory with a summary of its receipt (newest
    complete first, incomplete ones after) and the release C(current) (O(current)) points at, the
    listing of C(sglang-deploy releases).
  - In check mode nothing is written or run that changes the host; the result says what a real run
    would do (C(changed) and C(msg)).
options:
  state:
    description: The step of the lifecycle.
    type: str
    required: true
    choices: [tools, venv, built, complete, synced, pruned, listed]
  releases_dir:
    description: The directory of the releases. Required unless O(state=tools) or O(state=venv).
    type: path
  release_id:
    description:
      - The release's id (its directory's name). Required unless O(state=tools), O(state=venv) or
        O(state=listed).
    type: str
  python:
    description:
      - The interpreter uv builds the venv with (O(state=built)), or that makes uv's venv (O(state=tools)).
    type: str
    default: python3
  uv:
    description: The uv executable (O(state=built), O(state=synced)).
    type: path
  uv_args:
    description: Extra arguments of C(uv pip sync) (sources, C(--only-binary) ...).
    type: list
    elements: str
    default: []
  lock_content:
    description: The lock's text (O(state=built)); exclusive with O(lock_src).
    type: str
  lock_src:
    description:
      - A lock file on the host copied into the release (O(state=built)); exclusive with O(lock_content).
    type: path
  files:
    description: Further files written into a release that is built, records of its inputs.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The file's name in the release directory (no C(/), not hidden).
        type: str
        required: true
      content:
        description: Its text.
        type: str
        required: true
  current:
    description:
      - The C(current) link. With O(state=built) the result's C(previous) is the release it points at;
        with O(state=listed) it is the listing's C(current) (by default C(current) beside O(releases_dir)).
    type: path
  note:
    description: Said after the check-mode prediction of a build (e.g. that its lock is compiled first).
    type: str
    default: ""
  receipt:
    description:
      - The receipt of the release (O(state=complete)), a JSON object (a dict is taken as it is); written
        sorted, two-space indented.
    type: json
  packages:
    description:
      - System packages the tools need (O(state=tools), Debian family); only missing ones are installed.
    type: list
    elements: str
    default: []
  uv_venv:
    description: The venv uv is installed into (O(state=tools)); empty installs no uv.
    type: path
  uv_requirements:
    description: uv's hash-pinned requirements file on the host (O(state=tools)).
    type: path
  uv_version:
    description: The uv version wanted (O(state=tools)).
    type: str
  venv:
    description: The tool's venv (O(state=venv)).
    type: path
  requirements:
    description: The hash-pinned requirements file on the host the venv is installed from (O(state=venv)).
    type: path
  pip_args:
    description: More arguments of C(pip install) (O(state=venv)), e.g. C(--no-index --find-links DIR).
    type: list
    elements: str
    default: []
  distribution:
    description: The distribution whose version says the venv is in place (O(state=venv)).
    type: str
  version:
    description: The version of O(distribution) wanted (O(state=venv)).
    type: str
  drift:
    description:
      - What the role's audit found (O(state=synced)), or what is broken in a tool venv's files
        (O(state=venv), which then reinstalls), one line each; the result's message.
    type: list
    elements: str
    default: []
  sync:
    description:
      - Sync the venv to its lock (O(state=synced)), also without O(reinstall) (removes what the lock lacks).
    type: bool
    default: false
  reinstall:
    description: Distributions reinstalled pristine from the lock (O(state=synced)).
    type: list
    elements: str
    default: []
  remove:
    description: Files removed from the release (O(state=synced)), absolute paths inside it.
    type: list
    elements: path
    default: []
  chown_root:
    description: Give every file of the release back to root (O(state=synced)).
    type: bool
    default: false
  keep:
    description: How many complete releases O(state=pruned) keeps (the release in force counted first).
    type: int
    default: 3
  protected:
    description: Release ids or directories never pruned, whatever their age ('' ignored).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what a real run would install, build, write, repair or remove; changes nothing.
  diff_mode:
    support: partial
    description:
      - The result's C(msg) says what changed. O(state=venv) also returns a diff (the distribution's
        version and the drift before, what is installed after; the header after is the message).
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Install the system packages and uv the releases need
  sglang.deploy.release:
    state: tools
    packages: [python3-venv, python3-packaging]
    python: python3
    uv_venv: /opt/sglang-router/tools/uv
    uv_requirements: /opt/sglang-router/tools/uv-requirements.txt
    uv_version: 0.9.7
  environment:
    PIP_ONLY_BINARY: ":all:"
    PIP_REQUIRE_HASHES: "1"

- name: The CUDA toolkit's wheels in their venv, reinstalled when nvcc is gone
  sglang.deploy.release:
    state: venv
    venv: /opt/cuda/13.0.1/venv
    python: python3
    requirements: /opt/cuda/13.0.1/requirements.txt
    pip_args: [--no-index, --find-links, /srv/wheelhouse]
    distribution: cuda-toolkit
    version: 13.0.1
    drift: ["/opt/cuda/13.0.1: bin/nvcc is missing"]

- name: Build the release of this lock (nothing when it is complete; check mode says it would)
  sglang.deploy.release:
    state: built
    releases_dir: /opt/sglang-router/releases
    release_id: 3f2a9c0d1e4b
    current: /opt/sglang-router/current
    python: python3
    uv: /opt/sglang-router/tools/uv/bin/uv
    uv_args: [--only-binary, sglang-router]
    lock_content: "{{ lookup('ansible.builtin.template', 'requirements.lock.j2') }}"
  environment:
    UV_PYTHON_DOWNLOADS: never
  register: built

- name: Write the receipt, then .complete
  sglang.deploy.release:
    state: complete
    releases_dir: /opt/sglang-router/releases
    release_id: 3f2a9c0d1e4b
    receipt: {release_id: 3f2a9c0d1e4b, sglang_router_version: 0.3.2}
  when: built.built

- name: List the releases and the one current points at (read-only)
  sglang.deploy.release:
    state: listed
    releases_dir: /opt/sglang/releases
    current: /opt/sglang/current
  register: releases

- name: Prune the releases beyond the newest three
  sglang.deploy.release:
    state: pruned
    releases_dir: /opt/sglang-router/releases
    release_id: 3f2a9c0d1e4b
    keep: 3
    protected: ["{{ built.previous }}"]
"""

RETURN = r"""
release_dir:
  description: The release's directory.
  returned: when O(state=built), O(state=complete), O(state=synced) or O(state=pruned)
  type: str
complete:
  description: Whether the release is complete (its C(.complete) exists) after this step.
  returned: when O(state=built), O(state=complete), O(state=synced) or O(state=pruned)
  type: bool
built:
  description: Whether this step built the release (O(state=built)); false when it was complete.
  returned: when O(state=built)
  type: bool
previous:
  description:
    - The release id C(current) pointed at ('' when it does not exist), O(state=built) with O(current).
  returned: when O(state=built)
  type: str
removed:
  description: Release directories removed (or, in check mode, that would be).
  returned: when O(state=built) or O(state=pruned)
  type: list
  elements: str
releases:
  description: The complete release ids left, the release in force first, then newest first (O(state=pruned)).
  returned: when O(state=pruned)
  type: list
  elements: str
receipt:
  description: The receipt written (O(state=complete)).
  returned: when O(state=complete)
  type: dict
listing:
  description:
    - Every release directory (O(state=listed)), newest complete first, and the release C(current) points at.
  returned: when O(state=listed)
  type: dict
  contains:
    current:
      description: The release id C(current) points at ('' when it is missing or not a link).
      type: str
    current_exists:
      description: Whether C(current) exists (a link, dangling or not, or anything else).
      type: bool
    releases:
      description:
        - One dict per release directory - C(id), C(path), C(current), C(complete), C(completed_at) (the
          marker's mtime, 0 when incomplete), C(installed_at), C(checks_ok) (the receipt's launch check;
          null without a receipt), C(versions) (sglang, torch, sgl-kernel, flashinfer-python, transformers),
          C(source), C(patches) (names), C(python).
      type: list
      elements: dict
installed:
  description: >-
    What O(state=tools) installed (or, in check mode, would) - packages and C(uv <version>); what
    O(state=venv) installed (C(<distribution> <version>)), empty when the venv was in place.
  returned: when O(state=tools) or O(state=venv)
  type: list
  elements: str
"""

import json
import os
import shutil
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils import release as lifecycle

ARGUMENT_SPEC: dict[str, Any] = {
    "state": {
        "type": "str",
        "required": True,
        "choices": ["tools", "venv", "built", "complete", "synced", "pruned", "listed"],
    },
    "venv": {"type": "path"},
    "requirements": {"type": "path"},
    "pip_args": {"type": "list", "elements": "str", "default": []},
    "distribution": {"type": "str"},
    "version": {"type": "str"},
    "releases_dir": {"type": "path"},
    "release_id": {"type": "str"},
    "python": {"type": "str", "default": "python3"},
    "uv": {"type": "path"},
    "uv_args": {"type": "list", "elements": "str", "default": []},
    "lock_content": {"type": "str"},
    "lock_src": {"type": "path"},
    "files": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {"name": {"type": "str", "required": True}, "content": {"type": "str", "required": True}},
    },
    "current": {"type": "path"},
    "note": {"type": "str", "default": ""},
    "receipt": {"type": "json"},
    "packages": {"type": "list", "elements": "str", "default": []},
    "uv_venv": {"type": "path"},
    "uv_requirements": {"type": "path"},
    "uv_version": {"type": "str"},
    "drift": {"type": "list", "elements": "str", "default": []},
    "sync": {"type": "bool", "default": False},
    "reinstall": {"type": "list", "elements": "str", "default": []},
    "remove": {"type": "list", "elements": "path", "default": []},
    "chown_root": {"type": "bool", "default": False},
    "keep": {"type": "int", "default": 3},
    "protected": {"type": "list", "elements": "str", "default": []},
}


class Step:
    """One call of the module: its parameters, check mode, and the commands it runs."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.p: dict[str, Any] = module.params
        self.check: bool = module.check_mode

    def run(
        self, argv: list[str], what: str, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> str:
        rc, out, err = self.module.run_command(argv, cwd=cwd, environ_update=env or {})
        if rc != 0:
            raise lifecycle.ReleaseError(f"{what} failed (rc {rc}): {(err or out).strip()[-3000:]}")
        return str(out)

    def release_dir(self) -> str:
        for name in ("releases_dir", "release_id"):
            if not self.p[name]:
                raise lifecycle.ReleaseError(f"state={self.p['state']} needs {name}")
        rid = str(self.p["release_id"])
        if "/" in rid or rid in ("", ".", ".."):
            raise lifecycle.ReleaseError(f"release_id={rid!r} is not a directory name")
        return os.path.join(str(self.p["releases_dir"]), rid)

    # --- tools ------------------------------------------------------------------------------------
    def tools(self) -> dict[str, Any]:
        installed: list[str] = []
        packages = list(self.p["packages"])
        if packages:
            _rc, out, _err = self.module.run_command(
                ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", *packages]
            )
            missing = lifecycle.missing_packages(str(out), packages)
            if missing and not self.check:
                apt = lifecycle.APT_ENV
                # refreshed every time something is missing: a just-built image can hold a recent
                # cache stamp with empty lists
                self.run(["apt-get", "update", "-q"], "apt-get update", env=apt)
                self.run(["apt-get", "install", "-y", "-q", *missing], "apt-get install", env=apt)
            installed += missing
        if self.p["uv_venv"]:
            venv, wanted = str(self.p["uv_venv"]), str(self.p["uv_version"] or "")
            uv_bin = os.path.join(venv, "bin", "uv")
            have = ""
            if os.path.exists(uv_bin):
                have = lifecycle.uv_version(self.run([uv_bin, "--version"], "uv --version"))
            if have != wanted:
                installed.append(f"uv {wanted}")
                if not self.check:
                    if not self.p["uv_requirements"]:
                        raise lifecycle.ReleaseError("state=tools with uv_venv needs uv_requirements")
                    self.pip_install(venv, str(self.p["uv_requirements"]), "uv")
                    have = lifecycle.uv_version(self.run([uv_bin, "--version"], "uv --version"))
                    if have != wanted:
                        raise lifecycle.ReleaseError(
                            f"{uv_bin} reports uv {have or '?'} after the install, not {wanted}"
                        )
        verb = "would install" if self.check else "installed"
        return {
            "changed": bool(installed),
            "installed": installed,
            "msg": f"{verb}: {', '.join(installed)}" if installed else "tools present",
        }

    # --- a tool's venv (uv's for state=tools, the CUDA toolkit's wheels) ---------------------------
    def pip_install(self, venv: str, requirements: str, what: str, extra: list[str] | None = None) -> None:
        """The venv (``python -m venv`` when it has no interpreter), then the hash-checked requirements."""
        python = os.path.join(venv, "bin", "python")
        if not os.path.exists(python):
            self.run([str(self.p["python"]), "-m", "venv", venv], f"creating the venv {venv}")
        pip = [python, "-m", "pip", "install", "--quiet", "--require-hashes", *(extra or [])]
        self.run([*pip, "-r", requirements, *self.p["pip_args"]], f"installing {what}")

    def dist_version(self, venv: str, dist: str) -> str:
        """The version the venv's importlib.metadata reports for ``dist`` ('' without a venv or the dist)."""
        python = os.path.join(venv, "bin", "python")
        if not os.path.exists(python):
            return ""
        code = (
            "import importlib.metadata as m, sys\ntry: print(m.version(sys.argv[1]))\nexcept Exception: pass"
        )
        rc, out, _err = self.module.run_command([python, "-c", code, dist])
        return str(out).strip() if rc == 0 else ""

    def venv(self) -> dict[str, Any]:
        for name in ("venv", "requirements", "distribution", "version"):
            if not self.p[name]:
                raise lifecycle.ReleaseError(f"state=venv needs {name}")
        venv, dist, wanted = str(self.p["venv"]), str(self.p["distribution"]), str(self.p["version"])
        drift = [str(line) for line in self.p["drift"]]
        have = self.dist_version(venv, dist)
        if have == wanted and not drift:
            return {"changed": False, "installed": [], "msg": f"{venv}: {dist} {wanted}"}
        why = "; ".join(drift) if drift else f"{dist} {have or 'not installed'}"
        verb = ("a real run reinstalls" if drift else "would install") if self.check else "installed"
        lines = [f"drift: {why}" if drift else f"{venv}: {why}", f"{verb} {dist} {wanted} in {venv}"]
        result: dict[str, Any] = {"changed": True, "installed": [f"{dist} {wanted}"], "msg": "; ".join(lines)}
        if self.module._diff:
            result["diff"] = {
                "before_header": f"{venv}: {dist}",
                "after_header": result["msg"],
                "before": f"{dist} {have or '(not installed)'}\n" + "".join(f"drift: {d}\n" for d in drift),
                "after": f"{dist} {wanted}" + (" (reinstalled)" if drift else "") + "\n",
            }
        if not self.check:
            force = ["--force-reinstall"] if drift else []
            self.pip_install(venv, str(self.p["requirements"]), f"{dist} {wanted}", force)
            have = self.dist_version(venv, dist)
            if have != wanted:
                raise lifecycle.ReleaseError(
                    f"{venv} reports {dist} {have or '?'} after the install, not {wanted}"
                )
        return result

    # --- built ------------------------------------------------------------------------------------
    def built(self) -> dict[str, Any]:
        release_dir = self.release_dir()
        previous = lifecycle.current_release(str(self.p["current"])) if self.p["current"] else ""
        markers, partial = lifecycle.scan(str(self.p["releases_dir"]))
        is_complete = any(os.path.dirname(m["path"]) == release_dir for m in markers)
        lines: list[str] = []
        if partial:
            lines.append(
                ("would remove" if self.check else "removed")
                + f" incomplete release(s) (an interrupted or failed build): {', '.join(partial)}"
            )
            if not self.check:
                for path in partial:
                    shutil.rmtree(path)
        result: dict[str, Any] = {"release_dir": release_dir, "previous": previous, "removed": partial}
        if is_complete:
            return {
                **result,
                "changed": bool(partial),
                "built": False,
                "complete": True,
                "msg": "; ".join(lines),
            }
        if self.check:
            lines.append(
                f"would build release {self.p['release_id']} in {release_dir}"
                + (f" ({self.p['note']})" if self.p["note"] else "")
            )
            return {**result, "changed": True, "built": False, "complete": False, "msg": "; ".join(lines)}
        if self.p["lock_content"] is None and not self.p["lock_src"]:
            raise lifecycle.ReleaseError("state=built needs lock_content or lock_src")
        try:
            self.build(release_dir)
        except BaseException:
            shutil.rmtree(release_dir, ignore_errors=True)
            raise
        lines.append(f"built release {self.p['release_id']} in {release_dir}")
        return {**result, "changed": True, "built": True, "complete": False, "msg": "; ".join(lines)}

    def build(self, release_dir: str) -> None:
        if not self.p["uv"]:
            raise lifecycle.ReleaseError("state=built needs uv")
        os.makedirs(release_dir, mode=0o755)
        os.chmod(release_dir, 0o755)
        if self.p["lock_src"]:
            with open(str(self.p["lock_src"]), encoding="utf-8") as handle:
                lock = handle.read()
        else:
            lock = str(self.p["lock_content"])
        lifecycle.write_atomic(os.path.join(release_dir, lifecycle.LOCK), lock)
        for item in self.p["files"]:
            name = str(item["name"])
            if "/" in name or name.startswith("."):
                raise lifecycle.ReleaseError(f"files: {name!r} is not a plain file name")
            lifecycle.write_atomic(os.path.join(release_dir, name), str(item["content"]))
        uv = str(self.p["uv"])
        self.run(
            [uv, "venv", "--quiet", "--python", str(self.p["python"]), "venv"], "uv venv", cwd=release_dir
        )
        python = os.path.join(release_dir, "venv", "bin", "python")
        self.run(
            lifecycle.sync_argv(uv, python, self.p["uv_args"]), "uv pip sync (the lock)", cwd=release_dir
        )

    # --- complete ---------------------------------------------------------------------------------
    def complete(self) -> dict[str, Any]:
        release_dir = self.release_dir()
        if self.p["receipt"] is None:
            raise lifecycle.ReleaseError("state=complete needs receipt")
        receipt = json.loads(self.p["receipt"])
        if not isinstance(receipt, dict):
            raise lifecycle.ReleaseError("receipt: a JSON object is needed")
        done = os.path.lexists(os.path.join(release_dir, lifecycle.MARKER))
        if done:
            return {
                "changed": False,
                "complete": True,
                "release_dir": release_dir,
                "receipt": receipt,
                "msg": f"release {self.p['release_id']} is complete already (never rewritten)",
            }
        if not self.check:
            lifecycle.complete(release_dir, str(self.p["release_id"]), receipt)
        verb = "would write" if self.check else "wrote"
        return {
            "changed": True,
            "complete": not self.check,
            "release_dir": release_dir,
            "receipt": receipt,
            "msg": f"{verb} the receipt and .complete of release {self.p['release_id']}",
        }

    # --- synced -----------------------------------------------------------------------------------
    def synced(self) -> dict[str, Any]:
        release_dir = self.release_dir()
        remove = [str(p) for p in self.p["remove"]]
        for path in remove:
            if not os.path.abspath(path).startswith(release_dir.rstrip("/") + "/"):
                raise lifecycle.ReleaseError(f"remove: {path} is not inside {release_dir}")
        sync = bool(self.p["sync"] or self.p["reinstall"])
        todo = sync or any(os.path.lexists(p) for p in remove) or bool(self.p["chown_root"])
        lines = list(self.p["drift"])
        if todo and not self.check:
            self.repair(release_dir, sync, remove)
        if todo:
            actions = []
            if sync:
                reinstall = ", ".join(self.p["reinstall"])
                actions.append(
                    "sync the venv to the lock" + (f" reinstalling {reinstall} pristine" if reinstall else "")
                )
            if remove:
                actions.append(f"remove {', '.join(os.path.basename(p) for p in remove)}")
            if self.p["chown_root"]:
                actions.append("give the release back to root")
            what = ", ".join(actions)
            lines.append(("a real run would " if self.check else "repaired: ") + what)
        return {"changed": todo, "complete": True, "release_dir": release_dir, "msg": "\n".join(lines)}

    def repair(self, release_dir: str, sync: bool, remove: list[str]) -> None:
        if sync:
            if not self.p["uv"]:
                raise lifecycle.ReleaseError("state=synced needs uv")
            python = os.path.join(release_dir, "venv", "bin", "python")
            argv = lifecycle.sync_argv(str(self.p["uv"]), python, self.p["uv_args"], self.p["reinstall"])
            self.run(argv, "uv pip sync (the repair)", cwd=release_dir)
        for path in remove:
            if os.path.lexists(path):
                os.unlink(path)
        if self.p["chown_root"]:
            for top, dirs, names in os.walk(release_dir):
                for name in [*dirs, *names]:
                    os.lchown(os.path.join(top, name), 0, 0)
            os.lchown(release_dir, 0, 0)

    # --- listed -----------------------------------------------------------------------------------
    def listed(self) -> dict[str, Any]:
        if not self.p["releases_dir"]:
            raise lifecycle.ReleaseError("state=listed needs releases_dir")
        releases_dir = str(self.p["releases_dir"])
        current = str(self.p["current"] or os.path.join(os.path.dirname(releases_dir), "current"))
        return {"changed": False, "listing": lifecycle.listing(releases_dir, current)}

    # --- pruned -----------------------------------------------------------------------------------
    def pruned(self) -> dict[str, Any]:
        release_dir = self.release_dir()
        markers, _partial = lifecycle.scan(str(self.p["releases_dir"]))
        try:
            gone = lifecycle.prune(markers, release_dir, int(self.p["keep"]), self.p["protected"])
        except ValueError as err:
            raise lifecycle.ReleaseError(str(err)) from err
        if not self.check:
            for path in gone:
                shutil.rmtree(path)
        verb = "would remove" if self.check else "removed"
        return {
            "changed": bool(gone),
            "complete": any(os.path.dirname(m["path"]) == release_dir for m in markers),
            "release_dir": release_dir,
            "removed": gone,
            "releases": lifecycle.remaining(markers, release_dir, gone),
            "msg": f"{verb} releases beyond the newest {self.p['keep']}: {', '.join(gone)}" if gone else "",
        }


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        mutually_exclusive=[("lock_content", "lock_src")],
        supports_check_mode=True,
    )
    step = Step(module)
    try:
        result = getattr(step, str(module.params["state"]))()
    except (lifecycle.ReleaseError, OSError) as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
