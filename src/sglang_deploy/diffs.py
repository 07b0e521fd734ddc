"""A short, human summary of what a changed task changed (or, in check mode, would change).

Reads the `diff` of a task result (`--diff`: text before/after with headers, dicts of attributes such
as `state`/`mode`, or a module's own `prepared` text), the diffs of its loop items, and its `msg`.
Used by `sglang-deploy drift` to say per task what drifted. The caller redacts the result (it may
quote file content)."""

from __future__ import annotations

import difflib
from typing import Any

MAX_CHANGED_LINES = 6
MAX_LINE = 160
MAX_SUMMARY = 2000


def _clip(text: str, limit: int = MAX_LINE) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text_diff(before: str, after: str, header: str) -> list[str]:
    old, new = before.splitlines(), after.splitlines()
    changed = [
        line
        for line in difflib.unified_diff(old, new, lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    added = sum(1 for line in changed if line.startswith("+"))
    removed = len(changed) - added
    if not old and new:
        head = f"{header}: would be created ({len(new)} lines)"
    elif old and not new:
        head = f"{header}: content removed ({len(old)} lines)"
    else:
        head = f"{header}: +{added} -{removed} lines"
    lines = [head]
    lines += [f"  {_clip(line)}" for line in changed[:MAX_CHANGED_LINES]]
    if len(changed) > MAX_CHANGED_LINES:
        lines.append(f"  ... {len(changed) - MAX_CHANGED_LINES} more changed lines")
    return lines


def _dict_diff(before: dict[str, Any], after: dict[str, Any], header: str) -> list[str]:
    keys = [k for k in sorted({*before, *after}) if k != "path" and before.get(k) != after.get(k)]
    if not keys:
        return []
    parts = [
        f"{k}: {_clip(str(before.get(k, '-')), 60)} -> {_clip(str(after.get(k, '-')), 60)}" for k in keys
    ]
    return [f"{header}: {', '.join(parts)}"]


def summarize_diff(diff: Any) -> list[str]:
    """Lines for one `diff` value (a dict or a list of dicts, as modules return it)."""
    if isinstance(diff, list):
        return [line for item in diff for line in summarize_diff(item)]
    if not isinstance(diff, dict):
        return []
    before, after = diff.get("before"), diff.get("after")
    header = str(
        diff.get("after_header")
        or diff.get("before_header")
        or (after.get("path") if isinstance(after, dict) else None)
        or (before.get("path") if isinstance(before, dict) else None)
        or "content"
    )
    lines: list[str] = []
    if isinstance(before, str) or isinstance(after, str):
        lines += _text_diff(
            before if isinstance(before, str) else "", after if isinstance(after, str) else "", header
        )
    elif isinstance(before, dict) or isinstance(after, dict):
        lines += _dict_diff(
            before if isinstance(before, dict) else {}, after if isinstance(after, dict) else {}, header
        )
    prepared = diff.get("prepared")
    if isinstance(prepared, str) and prepared.strip():
        prepared_lines = prepared.strip().splitlines()
        lines += [_clip(line) for line in prepared_lines[:MAX_CHANGED_LINES]]
        if len(prepared_lines) > MAX_CHANGED_LINES:
            lines.append(f"... {len(prepared_lines) - MAX_CHANGED_LINES} more lines")
    return lines


def _message(res: dict[str, Any]) -> list[str]:
    msg = res.get("msg")
    if isinstance(msg, list):
        msg = "\n".join(str(m) for m in msg)
    if not isinstance(msg, str) or not msg.strip() or msg.strip() in ("All items completed", "OK"):
        return []
    return [_clip(line) for line in msg.strip().splitlines()[:MAX_CHANGED_LINES]]


def _item_label(item: dict[str, Any]) -> str:
    label = item.get("_ansible_item_label", item.get("item"))
    return _clip(str(label), 80) if label is not None else "item"


def change_summary(res: Any) -> str:
    """What a changed result changed: its diff(s), its loop items' diffs, and its message."""
    if not isinstance(res, dict):
        return ""
    if res.get("censored"):
        return "(no_log: details hidden)"
    lines = summarize_diff(res.get("diff")) + _message(res)
    results = res.get("results")
    if isinstance(results, list):
        for item in results:
            if not isinstance(item, dict) or not item.get("changed"):
                continue
            if item.get("censored"):
                lines.append(f"[{_item_label(item)}] (no_log: details hidden)")
                continue
            item_lines = summarize_diff(item.get("diff")) + _message(item)
            lines.append(f"[{_item_label(item)}] changed")
            lines += [f"  {line}" for line in item_lines]
    text = "\n".join(lines)
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 3] + "..."
