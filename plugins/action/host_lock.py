# Copyright: sglang-deploy contributors
"""Action plugin of sglang.deploy.host_lock: the controller's half of the host lock.

It names the holder (this controller's host name, the pid of its ansible-playbook - the parent of
the worker process that runs this plugin -, that process' start time from /proc, its command line
without secrets), runs the module on the host, and when another run holds the lock checks on the
controller whether that run's process is gone (same controller, pid not running with that start
time): then it runs the module again to take the lock over. The module documents the behaviour.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.host_lock import (
    alive,
    command_line,
    describe,
    input_errors,
    process_start,
    scrub_command,
)


def controller_holder() -> dict[str, Any]:
    """The holder record of this run: the ansible-playbook process that forked this worker."""
    pid = os.getppid()
    start = process_start(pid) or 0.0
    controller = socket.gethostname()
    return {
        "run_id": f"{controller}:{pid}:{start:.2f}",
        "controller": controller,
        "pid": pid,
        "pid_start": start,
        "command": scrub_command(command_line(pid)),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class ActionModule(ActionBase):  # type: ignore[misc]
    """Runs sglang.deploy.host_lock with the holder filled in; takes over a lock of a dead local run."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("state", "path", "stale_after_s"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = {k: v for k, v in self._task.args.items() if k in self._VALID_ARGS}
        errors = input_errors(args)
        if errors:
            result.update(failed=True, changed=False, msg=" | ".join(errors))
            return result
        args["holder"] = me = controller_holder()
        res: dict[str, Any] = self._execute_module(
            module_name="sglang.deploy.host_lock", module_args=args, task_vars=task_vars
        )
        if res.get("failed"):
            result.update(res)
            return result
        warnings = list(res.pop("warnings", []) or [])
        path = args.get("path", "/run/sglang-deploy/lock")
        if res.get("status") == "held":
            other = (res.get("lock") or {}).get("holder") or {}
            if other.get("controller") == me["controller"] and not alive(
                other.get("pid"), other.get("pid_start")
            ):
                res = self._execute_module(
                    module_name="sglang.deploy.host_lock",
                    module_args={**args, "takeover": str(other.get("run_id"))},
                    task_vars=task_vars,
                )
                if res.get("failed"):
                    result.update(res)
                    return result
                warnings += list(res.pop("warnings", []) or [])
        status = res.get("status")
        if status in ("taken_over", "would_take_over"):
            warnings.append(
                f"host lock {path}: {'would take' if status == 'would_take_over' else 'took'} over"
                " a stale lock "
                f"({res.get('why')}) from {describe(res.get('previous'))}"
            )
        elif status == "held":
            text = f"host lock {path} is held by {describe(res.get('lock'))}"
            if self._task.check_mode:
                warnings.append(text + " (check mode reads only: going on)")
            else:
                res["failed"] = True
                res["msg"] = (
                    text + ". Wait for that run to end; if it is gone, the next run from its controller takes"
                    " the lock over, or remove the file on the host."
                )
        elif status == "held_by_other":
            warnings.append(f"host lock {path} not released: held by {describe(res.get('lock'))}")
        result.update(res)
        if warnings:
            result["warnings"] = warnings
        result["changed"] = False
        return result
