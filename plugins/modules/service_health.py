#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Restart or start a served unit and await its /health (logic: plugins/module_utils/service_health.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: service_health
short_description: Restart or start a served systemd unit and wait until its health URL answers 200
description:
  - The collection's one "restart and await health". The server's unit (role sglang_service), its
    rollback (deploy_state), autotune's candidates, the router (sglang_router) and verify's wait for a
    start it did not make all call this module, so every wait has the same timeout rule, the same
    start-up measurement and the same failure report.
  - O(action=restart) restarts the unit, O(action=start) starts it when it is not active, O(action=await)
    starts nothing and waits only when the unit is active or activating. Then the module asks
    O(health_url) every O(delay_s) seconds until it answers 200.
  - The timeout rule. The module measures the start-up of the unit (systemd's start of its main process
    to the first 200, within O(delay_s)) whenever it sees one, and keeps the last one per unit in
    O(record_dir)/<unit>.json. With a measured start-up the wait allows 3 x that start-up, at least 300 s
    and at most O(timeout_s); without one, O(timeout_s). RV(timeout_rule) says which applied.
  - While it waits, a unit that stops (C(ActiveState) failed or inactive) fails the task at once instead
    of at the timeout. A failure's message holds the last O(journal_lines) lines of the unit's journal,
    with the values held in O(secret_files) and every secret-named C(name=value) masked.
  - The start-up record is bookkeeping, not managed state - writing it does not report C(changed); a
    restart or a start does.
  - Check mode starts and restarts nothing and sends no request; it reports whether the task would
    restart or start the unit and the start-up recorded for the running start, if any.
  - The health request goes to O(health_url) directly, never through a proxy of the host's environment.
options:
  name:
    description: The unit (C(.service) is appended when missing).
    type: str
    required: true
  action:
    description: C(restart), C(start) (only when not active) or C(await) (no start; wait when active).
    type: str
    choices: [restart, start, await]
    default: start
  daemon_reload:
    description: Run C(systemctl daemon-reload) first (a unit file or drop-in changed).
    type: bool
    default: false
  health_url:
    description: The URL that answers 200 when the unit serves (SGLang's and the router's C(/health)).
    type: str
    required: true
  timeout_s:
    description: The longest wait, and the wait when no start-up of the unit was measured yet.
    type: int
    default: 1800
  delay_s:
    description: Seconds between two health requests (the start-up figure's resolution).
    type: float
    default: 5
  record_dir:
    description: Directory of the per-unit start-up records (created 0755 root).
    type: path
    default: /var/lib/sglang-deploy/startup
  secret_files:
    description:
      - Files holding the unit's secrets (a key file, SGLang's C(--config) YAML).
      - Their values are masked in the journal excerpt of a failure.
    type: list
    elements: path
    default: []
  journal_lines:
    description: How many of the unit's last journal lines a failure reports.
    type: int
    default: 50
  reason:
    description:
      - Why the task restarts or starts the unit (what changed, the running process' drift), returned as
        RV(msg) with the action (and as the task's diff under C(--diff)), also in check mode, so a drift
        report names the cause beside the change.
      - Text of the caller's own comparison; it must hold no secret (it is printed).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reads only - no restart, no start, no health request.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Restart the server and wait for /health (the journal in the failure, the key masked)
  sglang.deploy.service_health:
    name: sglang-kimi
    action: restart
    daemon_reload: true
    health_url: http://127.0.0.1:30000/health
    timeout_s: 1800
    secret_files: [/etc/sglang/sglang-config.yaml]

- name: Restart a running process that differs from its unit (check mode reports it with the reason)
  sglang.deploy.service_health:
    name: sglang-kimi
    action: restart
    health_url: http://127.0.0.1:30000/health
    reason: "environment: NCCL_NTHREADS=512 (want 256)"

- name: Wait for a start this run did not make (verify), and read its start-up
  sglang.deploy.service_health:
    name: sglang-kimi
    action: await
    health_url: http://127.0.0.1:30000/health
    delay_s: 1
  register: health
"""

RETURN = r"""
msg:
  description: The action and O(reason) when a restart or start happened or, in check mode, would happen.
  returned: when O(reason) is set and the unit is (or would be) restarted or started
  type: str
  sample: "restart sglang-kimi: environment: NCCL_NTHREADS=512 (want 256)"
restarted:
  description: Whether the unit was restarted.
  returned: always
  type: bool
started:
  description: Whether the unit was started (it was not active).
  returned: always
  type: bool
active:
  description: The unit's C(ActiveState) as the module leaves it (in check mode, as it is).
  returned: always
  type: str
enabled:
  description: >-
    The unit's C(UnitFileState) (C(enabled), C(disabled), ...; empty for a unit systemd does not know) as
    the module leaves it: the caller needs no second C(systemctl show).
  returned: always
  type: str
invocation_id:
  description: systemd's C(InvocationID) of the unit's current start (empty when not running).
  returned: always
  type: str
timeout_s:
  description: The seconds the wait allowed.
  returned: always
  type: int
timeout_rule:
  description: Why that many (the measured start-up it came from, or the configured ceiling).
  returned: always
  type: str
waited_s:
  description: Seconds from the (re)start to the first 200 (0 when the unit already answered).
  returned: always
  type: float
startup:
  description: >-
    The start-up of the current start: C(status) measured (seen now), recorded (measured earlier at
    this start) or not measured, C(startup_s), C(invocation), C(reason).
  returned: always
  type: dict
journal:
  description: The last journal lines of the unit, secrets masked (on failure only).
  returned: failed
  type: list
  elements: str
"""

import json
import os
import time
from datetime import UTC, datetime
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible.module_utils.urls import open_url  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils import service_health as rule
from ansible_collections.sglang.deploy.plugins.module_utils.managed_state import write_atomic

RUNNING = ("active", "activating", "reloading")
STOPPED = ("failed", "inactive")
SHOW = "ActiveState,SubState,LoadState,UnitFileState,InvocationID,ExecMainStartTimestampMonotonic"
ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "action": {"type": "str", "choices": ["restart", "start", "await"], "default": "start"},
    "daemon_reload": {"type": "bool", "default": False},
    "health_url": {"type": "str", "required": True},
    "timeout_s": {"type": "int", "default": 1800},
    "delay_s": {"type": "float", "default": 5},
    "record_dir": {"type": "path", "default": rule.RECORD_DIR},
    # paths of files whose values are masked, not secrets themselves
    "secret_files": {"type": "list", "elements": "path", "default": [], "no_log": False},
    "journal_lines": {"type": "int", "default": 50},
    "reason": {"type": "str", "default": ""},
}


class Unit:
    """The unit through systemctl and journalctl; failures carry its masked journal."""

    def __init__(self, module: AnsibleModule, name: str) -> None:
        self.module = module
        self.name = name
        self.systemctl = module.get_bin_path("systemctl", required=True)

    def show(self) -> dict[str, str]:
        rc, out, err = self.module.run_command([self.systemctl, "show", self.name, f"--property={SHOW}"])
        if rc != 0:
            self.module.fail_json(msg=f"systemctl show {self.name} failed (rc {rc}): {err.strip()}")
        show: dict[str, str] = rule.parse_show(out)
        return show

    def run(self, *args: str) -> None:
        rc, _out, err = self.module.run_command([self.systemctl, *args])
        if rc != 0:
            self.fail(f"systemctl {' '.join(args)} failed (rc {rc}): {err.strip()}")

    def journal(self, values: list[str]) -> list[str]:
        journalctl = self.module.get_bin_path("journalctl")
        if not journalctl:
            return ["(journalctl not found)"]
        n = str(int(self.module.params["journal_lines"]))
        rc, out, _err = self.module.run_command(
            [journalctl, "-u", self.name, "-n", n, "--no-pager", "-o", "short-iso"]
        )
        return [rule.mask(line, values) for line in out.splitlines()] if rc == 0 else ["(journal unreadable)"]

    def fail(self, message: str, **result: Any) -> None:
        texts = []
        for path in self.module.params["secret_files"]:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    texts.append(handle.read())
            except OSError:
                continue
        values = rule.secret_values(texts)
        journal = self.journal(values)
        header = (
            f"{rule.mask(message, values)} Last journal lines (journalctl -u {self.name} -n {len(journal)}):"
        )
        self.module.fail_json(msg="\n".join([header, *journal]), journal=journal, **result)


def health_status(url: str) -> int | None:
    """The status /health answered, None when nothing answered (refused, timed out)."""
    try:
        response = open_url(url, method="GET", timeout=5, use_proxy=False, follow_redirects="none")
        return int(response.status)
    except Exception as exc:  # any answer other than 200, or none, means "not yet"
        code = getattr(exc, "code", None)
        return int(code) if isinstance(code, int) else None


def write_record(path: str, record: dict[str, Any]) -> None:
    """The start-up record, replaced atomically (0644 root; its directory 0755)."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_atomic(path, (json.dumps(record, indent=2) + "\n").encode(), 0o644)


def read_record(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            record: dict[str, Any] = rule.parse_record(handle.read())
            return record
    except OSError:
        return {}


def not_measured(invocation: str, reason: str) -> dict[str, Any]:
    return {"status": "not measured", "startup_s": None, "invocation": invocation, "reason": reason}


def recorded_startup(record: dict[str, Any], invocation: str, reason: str) -> dict[str, Any]:
    """The recorded start-up when it was measured at the current start, else not measured (reason)."""
    if invocation and record.get("invocation") == invocation:
        when = record.get("measured_at", "?")
        return {
            "status": "recorded",
            "startup_s": record["startup_s"],
            "invocation": invocation,
            "reason": f"start-up {record['startup_s']} s (measured at this start, {when})",
        }
    return not_measured(invocation, reason)


def await_health(unit: Unit, url: str, deadline: float, result: dict[str, Any]) -> bool:
    """Ask ``url`` until it answers 200; fail when the unit stops or the deadline passes. Whether the
    first answer was not 200 (the start was seen before its first 200)."""
    delay = float(unit.module.params["delay_s"])
    status = health_status(url)
    waited = False
    while status != 200:
        waited = True
        state = unit.show()
        if state.get("ActiveState") in STOPPED:
            unit.fail(
                f"{unit.name} stopped while this run waited for 200 on {url} "
                f"(ActiveState={state.get('ActiveState')}, SubState={state.get('SubState')}).",
                **result,
            )
        if time.monotonic() >= deadline:
            last = status if status is not None else "none"
            unit.fail(
                f"{unit.name} did not answer 200 on {url} within {result['timeout_s']} s "
                f"({result['timeout_rule']}; last status {last}).",
                **result,
            )
        time.sleep(delay)
        status = health_status(url)
    return waited


def measure(unit: Unit, record_file: str, began: float, result: dict[str, Any]) -> dict[str, Any]:
    """The start-up of the start this module saw (written to the record), from /proc/uptime and systemd."""
    with open("/proc/uptime", encoding="ascii") as handle:
        uptime = handle.read()
    after = unit.show()
    invocation = after.get("InvocationID", "")
    result.update(active=after.get("ActiveState", ""), invocation_id=invocation)
    result["waited_s"] = round(time.monotonic() - began, 1)
    seconds = rule.startup_seconds(uptime, after.get("ExecMainStartTimestampMonotonic", "0"))
    if seconds is None or not invocation:
        return not_measured(invocation, "not measured: systemd reports no start time for the current start")
    measured_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    delay = float(unit.module.params["delay_s"])
    write_record(
        record_file,
        {"unit": unit.name, "invocation": invocation, "startup_s": seconds, "measured_at": measured_at,
         "resolution_s": delay},
    )  # fmt: skip
    return {
        "status": "measured",
        "startup_s": seconds,
        "invocation": invocation,
        "measured_at": measured_at,
        "reason": f"start-up {seconds} s (unit start -> first /health 200, seen within {delay:g} s)",
    }


def checked(module: AnsibleModule, name: str) -> None:
    """Fail on parameters the argument spec cannot express (full-matched unit name, ranges, URL)."""
    p = module.params
    try:
        rule.unit_name(name)
    except ValueError as exc:
        module.fail_json(msg=f"service_health: {exc}")
    if p["timeout_s"] < 1 or not 0 < p["delay_s"] <= 60 or p["journal_lines"] < 0:
        module.fail_json(msg="service_health: allowed timeout_s >= 1, 0 < delay_s <= 60, journal_lines >= 0")
    if not str(p["health_url"]).startswith(("http://", "https://")):
        module.fail_json(msg=f"service_health: health_url={p['health_url']!r}: allowed an http(s):// URL")


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p: dict[str, Any] = module.params
    checked(module, str(p["name"]))
    unit = Unit(module, rule.unit_name(str(p["name"])))
    record_file = rule.record_path(str(p["record_dir"]), unit.name)
    record = read_record(record_file)
    wait_s, wait_rule = rule.timeout(p["timeout_s"], record)
    before = unit.show()
    invocation = before.get("InvocationID", "")
    running = before.get("ActiveState", "") in RUNNING
    action = str(p["action"])
    result: dict[str, Any] = {
        "changed": False, "restarted": False, "started": False, "waited_s": 0.0,
        "timeout_s": wait_s, "timeout_rule": wait_rule,
        "active": before.get("ActiveState", ""), "enabled": before.get("UnitFileState", ""),
        "invocation_id": invocation,
    }  # fmt: skip
    acts = action == "restart" or (action == "start" and not running)
    # the caller's reason: the result's msg when it ends well (a failure's msg is the failure)
    note: dict[str, str] = {}
    if acts and p["reason"]:
        note["msg"] = f"{action} {unit.name}: {p['reason']}"
        # shown under --diff (also in check mode): what the unit runs now, and why it is restarted
        result["diff"] = {
            "before_header": unit.name, "after_header": unit.name,
            "before": f"ActiveState={before.get('ActiveState', '')} InvocationID={invocation}\n",
            "after": f"{action}: {p['reason']}\n",
        }  # fmt: skip
    if module.check_mode:
        result["changed"] = acts
        result["startup"] = recorded_startup(record, invocation, "check mode: no health request")
        module.exit_json(**note, **result)
    if action == "await" and not running:
        result["startup"] = not_measured("", f"not measured: {unit.name} is not active")
        module.exit_json(**result)
    if action != "await" and before.get("LoadState") == "not-found" and not p["daemon_reload"]:
        module.fail_json(msg=f"{unit.name} is not installed (LoadState=not-found)", **result)
    if p["daemon_reload"]:
        unit.run("daemon-reload")
    began = time.monotonic()
    if acts:
        unit.run(action, unit.name)
        result.update(changed=True, restarted=action == "restart", started=action == "start")
    waited = await_health(unit, str(p["health_url"]), began + wait_s, result)
    if waited or result["changed"]:
        result["startup"] = measure(unit, record_file, began, result)
    else:
        reason = "not measured: /health was already 200 when first asked (a start this run did not see)"
        result["startup"] = recorded_startup(record, invocation, reason)
    if result["changed"] or waited:  # the state as this module leaves it
        after = unit.show()
        result.update(active=after.get("ActiveState", ""), enabled=after.get("UnitFileState", ""))
    module.exit_json(**note, **result)


if __name__ == "__main__":
    main()
