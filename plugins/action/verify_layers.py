# Copyright: sglang-deploy contributors
"""Action plugin sglang.deploy.verify_layers: the verify role's script layers in one task (documented in
plugins/modules/verify_layers.py).

Each layer, in order: skipped with its reason, or its script run on the host (ansible.builtin.script,
read-only, also in check mode) under ``timeout``, its last JSON line on stdout read as the result. The
task returns the layers' results (``layers``, which the caller combines into verify_results) and writes
the controller's verify_results_file (scrubbed as a whole, plugins/module_utils/verify_scrub.py) after
every layer, so a failed run still leaves what passed before it. A failed layer whose ``stop`` is true
fails the task at once naming the layer and why; the layers after it do not run. Without layers the
task only writes the file; ``recorded`` names layers the role computed itself (the benchmark's, already
in ``results``), each reported by its line.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.verify_scrub import scrub_data, scrub_text

REASON_MAX = 600
TIMED_OUT = 124  # coreutils timeout's exit status


def script_result(run: Mapping[str, Any], layer: Mapping[str, Any], secrets: list[str]) -> dict[str, Any]:
    """A layer script's result: the last stdout line that is a JSON object with a ``status``, else a
    failed result saying why the script gave none (its message and stderr, the secrets masked)."""
    if not run.get("failed") and not run.get("skipped"):
        lines = [ln for ln in str(run.get("stdout", "")).splitlines() if ln.startswith("{")]
        if lines:
            try:
                doc = json.loads(lines[-1])
            except ValueError:
                doc = None
            if isinstance(doc, dict) and isinstance(doc.get("status"), str):
                return doc
    why = f"{run.get('msg', '')} {str(run.get('stderr', '')).strip()}".strip() or "no JSON line on stdout"
    if run.get("rc") == TIMED_OUT:
        why = f"timed out after {layer.get('timeout_s')} s; {why}"
    reason = scrub_text(f"{layer['script']} with {layer['executable']} gave no result: {why}", secrets)
    return {
        "status": "failed",
        "reason": reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 3] + "...",
    }


def line(layer: Mapping[str, Any], result: Mapping[str, Any], stops: bool) -> str:
    """The layer's report line, as the role always printed it."""
    status = str(result.get("status"))
    word = status if status in ("passed", "skipped") else "failed"
    tail = "" if status in ("passed", "skipped") or stops else " (rollback follows)"
    return f"verify layer {layer['title']} {word}: {result.get('reason', '')}{tail}"


def write_results(path: str, host: str, results: Mapping[str, Any], secrets: list[str]) -> None:
    """verify_results_file on the controller: the results scrubbed as a whole, 0644 (no secret left)."""
    text = json.dumps(scrub_data({"host": host, "results": results}, secrets), indent=2, sort_keys=True)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(target)


class ActionModule(ActionBase):  # type: ignore[misc]
    """Runs, records and reports the verify role's script layers."""

    _VALID_ARGS = frozenset(("layers", "recorded", "results", "results_file", "stop", "timeout_s", "secrets"))
    _supports_check_mode = True

    def _run_script(self, layer: Mapping[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """ansible.builtin.script with this task's role, environment and connection; read-only, so it
        runs in check mode too."""
        task = self._task.copy()
        task.check_mode = False
        timeout = int(layer.get("timeout_s") or 0)
        executable = str(layer["executable"])
        if timeout > 0:
            executable = f"timeout -k 10 {timeout} {shlex.quote(executable)}"
        task.args = {"cmd": f"{layer['script']} {layer.get('args', '')}".strip(), "executable": executable}
        action = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.script",
            task=task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        try:
            return dict(action.run(task_vars=task_vars))
        except Exception as exc:  # an AnsibleActionFail of the script action: its message is the why
            return {"failed": True, "msg": str(exc)}

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        secrets = [str(s) for s in args.get("secrets") or [] if s]
        results = dict(args.get("results") or {})
        path = str(args.get("results_file") or "")
        host = str(task_vars.get("inventory_hostname", ""))
        default_stop = bool(args.get("stop", True))
        timeout = int(args.get("timeout_s") or 0)
        lines: list[str] = []
        layers: dict[str, Any] = {}
        # the report lines and this task's layers (scrubbed: the result is printed); the caller
        # combines `layers` into verify_results
        shown = bool(args.get("layers") or args.get("recorded"))
        result.update(changed=False, layers=layers, msg=lines, _ansible_verbose_always=shown)
        for layer in args.get("recorded") or []:
            lines.append(line(layer, scrub_data(dict(results.get(layer["key"]) or {}), secrets), True))
        for layer in args.get("layers") or []:
            stops = bool(layer.get("stop", default_stop))
            if layer.get("skip"):
                outcome: dict[str, Any] = {"status": "skipped", "reason": str(layer["skip"])}
            else:
                run = self._run_script({"timeout_s": timeout, **layer}, task_vars)
                outcome = script_result(run, {"timeout_s": timeout, **layer}, secrets)
            outcome = scrub_data(outcome, secrets)
            results[layer["key"]] = layers[layer["key"]] = outcome
            lines.append(line(layer, outcome, stops))
            if path and not self._task.check_mode:
                write_results(path, host, results, secrets)
            if outcome["status"] not in ("passed", "skipped") and stops:
                result.update(
                    failed=True, msg=f"verify layer {layer['title']} failed: {outcome.get('reason', '')}"
                )
                return result
        if path and not self._task.check_mode and not args.get("layers"):
            write_results(path, host, results, secrets)
        return result
