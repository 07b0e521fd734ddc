# Copyright: sglang-deploy contributors
"""Action plugin sglang.deploy.inventory_record: a record measured on a host written on the controller as
inventory variables (documented in plugins/modules/inventory_record.py).

The collection's one writer of host_vars records (verify's baseline and calibration, autotune's NCCL and
preset results): one variable and its value through plugins/plugin_utils/inventory_data.py ``dump``
(every string tagged ``!unsafe``: read back as text, never templated; control characters refused), then
``plain`` lines of controller constants, written atomically (a temporary file renamed over the record)
with its directory created. Changed only when the text or the mode differs; check mode writes nothing
and says whether a real run would; ``--diff`` shows the text before and after. No host is contacted.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.plugin_utils.inventory_data import dump

VARIABLE = re.compile(r"[a-z_][a-z0-9_]{0,99}")


def record_text(variable: str, value: Any, header: str = "", plain: str = "") -> str:
    """The record's text: ``variable: value`` as !unsafe YAML, then the ``plain`` lines."""
    if not VARIABLE.fullmatch(variable):
        raise ValueError(f"variable={variable!r} is not a variable name: allowed [a-z_][a-z0-9_]*")
    if plain and not plain.endswith("\n"):
        plain += "\n"
    return str(dump({variable: value}, header)) + plain


def write_record(path: str, text: str, mode: int, check: bool) -> dict[str, Any]:
    """Writes ``text`` to ``path`` (its directory created 0755, the file atomically with ``mode``) unless
    ``check``; the result says whether it changed and what it held before."""
    target = Path(path)
    before = target.read_text(encoding="utf-8") if target.is_file() else None
    same_mode = before is not None and stat.S_IMODE(target.stat().st_mode) == mode
    changed = before != text or not same_mode
    if changed and not check:
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        tmp.replace(target)
    return {"changed": changed, "path": str(target), "before": before or ""}


class ActionModule(ActionBase):  # type: ignore[misc]
    """Writes one inventory record on the controller."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "variable", "value", "header", "plain", "mode"))
    _requires_connection = False
    _supports_check_mode = True
    _supports_diff = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = self._task.args
        path = str(args.get("path") or "")
        if not path.startswith("/"):
            return {**result, "failed": True, "msg": f"inventory_record: path={path!r} must be absolute"}
        try:
            mode = int(str(args.get("mode") or "0600"), 8)
            text = record_text(
                str(args.get("variable") or ""), args.get("value"), str(args.get("header") or ""),
                str(args.get("plain") or ""),
            )  # fmt: skip
            written = write_record(path, text, mode, bool(self._task.check_mode))
        except (ValueError, OSError) as exc:
            return {**result, "failed": True, "msg": f"inventory_record {path}: {exc}"}
        verb = ("would write" if self._task.check_mode else "wrote") if written["changed"] else "unchanged"
        result.update(changed=written["changed"], path=path, msg=f"{verb}: {path}")
        if self._task.diff and written["changed"]:
            result["diff"] = {
                "before": written["before"],
                "after": text,
                "before_header": path,
                "after_header": path,
            }
        return result
