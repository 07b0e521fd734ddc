"""The preset choice of the autotune role: which speculative preset and --cuda-graph-max-bs to deploy.

Pure Python (no Ansible import): plugins/filter/autotune.py calls it, tests/test_autotune_preset.py
feeds it recorded data.

Input: one entry per candidate as the role records it after verify's benchmark layer ran against
the server restarted with that candidate::

    {"name": "production/bs128", "preset": "production", "cuda_graph_max_bs": 128,
     "status": "passed" | "failed", "reason": "...",
     "levels": [{"level": 1, "output_tps": 86.8, "errors": 0, "ok": true, ...}, ...]}

The rule (``choose``), at the operator's target concurrency T:

* a candidate counts when its level T ran without errors (``ok``);
* the best is the highest output tok/s at T; the CURRENT configuration (the operator's preset and
  max-bs) is replaced only when the best beats it by more than ``min_gain_pct`` (one run per candidate
  measures no spread: this threshold is the declared noise) - otherwise the current one is kept;
* candidates within ``tie_pct`` of the best are a tie: the current one wins, then the preset without
  speculation (nothing to drift), then the smaller max-bs (less graph memory), then the name;
* when the current configuration speculates and the baseline (no speculation) beats it by more than
  ``min_gain_pct`` at T, the result says so (the drafter stopped paying off on these prompts);
* when the current configuration did not run, the best counting candidate is chosen.
Per level, the best candidate is reported too (informational).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# What the record's switches may hold (written plain into host_vars): a preset of sglang_presets and
# an integer --cuda-graph-max-bs; choice_errors() refuses anything else.
PRESET_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_BS_RE = re.compile(r"[1-9][0-9]{0,5}")


def candidate_name(preset: str, max_bs: int) -> str:
    return f"{preset}/bs{int(max_bs)}"


def _tps_at(entry: Mapping[str, Any], level: int) -> float | None:
    for lv in entry.get("levels") or []:
        if int(lv.get("level", -1)) == level:
            if lv.get("ok") and lv.get("output_tps") is not None and float(lv["output_tps"]) > 0:
                return float(lv["output_tps"])
            return None
    return None


def _speculative(entry: Mapping[str, Any], presets: Mapping[str, Any]) -> bool:
    return bool((presets.get(str(entry.get("preset"))) or {}).get("speculative", False))


def choose(
    results: Sequence[Mapping[str, Any]],
    current: Mapping[str, Any],
    target: int,
    presets: Mapping[str, Any],
    *,
    min_gain_pct: float = 5.0,
    tie_pct: float = 2.0,
) -> dict[str, Any]:
    """{choice: {name, preset, cuda_graph_max_bs}, changed, reason, drift, per_level, rows, rules}."""
    if not results:
        raise ValueError("no candidate was measured")
    target = int(target)
    cur_name = candidate_name(str(current["preset"]), int(current["cuda_graph_max_bs"]))
    rows: list[dict[str, Any]] = []
    for entry in results:
        tps = _tps_at(entry, target)
        rows.append(
            {
                "name": candidate_name(str(entry["preset"]), int(entry["cuda_graph_max_bs"])),
                "preset": str(entry["preset"]),
                "cuda_graph_max_bs": int(entry["cuda_graph_max_bs"]),
                "speculative": _speculative(entry, presets),
                "tps": {int(lv["level"]): lv.get("output_tps") for lv in entry.get("levels") or []},
                "target_tps": tps,
                "current": candidate_name(str(entry["preset"]), int(entry["cuda_graph_max_bs"])) == cur_name,
                "why": ""
                if tps is not None
                else (entry.get("reason") or f"no error-free result at C={target}"),
            }
        )
    rules = {"target_concurrency": target, "min_gain_pct": min_gain_pct, "tie_pct": tie_pct}
    counting = [r for r in rows if r["target_tps"] is not None]
    if not counting:
        raise ValueError(f"no candidate has an error-free result at the target concurrency {target}")
    best_tps = max(r["target_tps"] for r in counting)
    tied = [r for r in counting if r["target_tps"] >= best_tps * (1 - tie_pct / 100)]
    tied.sort(key=lambda r: (not r["current"], r["speculative"], r["cuda_graph_max_bs"], r["name"]))
    best = tied[0]
    cur = next((r for r in rows if r["current"]), None)
    for r in rows:
        if cur is not None and cur["target_tps"] and r["target_tps"] is not None:
            r["gain_pct"] = round((r["target_tps"] / cur["target_tps"] - 1) * 100, 1)
    if cur is None or cur["target_tps"] is None:
        win = best
        why = "was not measured" if cur is None else f"has no error-free result at C={target}"
        reason = (
            f"chose {win['name']} ({win['target_tps']:.1f} tok/s at C={target}): the current {cur_name} {why}"
        )
    elif best is cur or best["gain_pct"] <= min_gain_pct:
        win = cur
        reason = f"kept {cur_name} ({cur['target_tps']:.1f} tok/s at C={target}): " + (
            "no other candidate is faster beyond the tie margin"
            if best is cur
            else f"the best other, {best['name']}, gains {best['gain_pct']:+.1f}% "
            f"(switching needs more than {min_gain_pct:g}%)"
        )
    else:
        win = best
        reason = (
            f"chose {win['name']}: {win['target_tps']:.1f} vs {cur['target_tps']:.1f} tok/s at C={target} "
            f"for the current {cur_name} ({win['gain_pct']:+.1f}%, more than {min_gain_pct:g}%)"
        )
    drift = _drift(rows, cur, target, min_gain_pct)
    if drift:
        reason += f"; {drift}"
    for r in rows:
        r["verdict"] = "chosen" if r is win else (r["why"] or "")
    per_level = _per_level(rows)
    return {
        "choice": {
            "name": win["name"],
            "preset": win["preset"],
            "cuda_graph_max_bs": win["cuda_graph_max_bs"],
        },
        "changed": win is not cur,
        "reason": reason,
        "drift": drift,
        "per_level": per_level,
        "rows": rows,
        "rules": rules,
    }


def choice_errors(choice: Mapping[str, Any], presets: Mapping[str, Any]) -> str:
    """Why the choice may not be recorded ('' = it may): a preset outside sglang_presets or the schema."""
    preset, max_bs = choice.get("preset"), choice.get("cuda_graph_max_bs")
    ok = (
        isinstance(preset, str)
        and PRESET_RE.fullmatch(preset) is not None
        and preset in presets
        and MAX_BS_RE.fullmatch(str(max_bs)) is not None
    )
    if ok:
        return ""
    return (
        f"autotune preset choice refused: {json.dumps(dict(choice), default=str)}: allowed a preset of "
        f"sglang_presets ({', '.join(map(str, presets))}) and an integer --cuda-graph-max-bs "
        "(nothing is recorded)"
    )


def _drift(rows: list[dict[str, Any]], cur: dict[str, Any] | None, target: int, min_gain_pct: float) -> str:
    if cur is None or not cur["speculative"] or cur["target_tps"] is None:
        return ""
    plain = [r for r in rows if not r["speculative"] and r["target_tps"] is not None]
    if not plain:
        return ""
    top = max(plain, key=lambda r: r["target_tps"])
    gain = (top["target_tps"] / cur["target_tps"] - 1) * 100
    if gain <= min_gain_pct:
        return ""
    return (
        f"speculation no longer pays off at C={target}: {top['name']} (no speculation) "
        f"{top['target_tps']:.1f} vs {cur['name']} {cur['target_tps']:.1f} tok/s ({gain:+.1f}%)"
    )


def _per_level(rows: list[dict[str, Any]]) -> dict[int, str]:
    levels = sorted({lv for r in rows for lv in r["tps"]})
    out: dict[int, str] = {}
    for lv in levels:
        have = [r for r in rows if r["tps"].get(lv) is not None]
        if have:
            out[lv] = max(have, key=lambda r: float(r["tps"][lv]))["name"]
    return out


def table(result: Mapping[str, Any], test_numbers: bool = False) -> str:
    """Markdown table: output tok/s per level and candidate, the gain at the target, the verdict."""
    rows = result["rows"]
    target = result["rules"]["target_concurrency"]
    levels = sorted({lv for r in rows for lv in r["tps"]})
    head = ["candidate"] + [f"C={lv}" + (" (target)" if lv == target else "") for lv in levels]
    head += ["vs current at target", "verdict"]
    lines = []
    if test_numbers:
        lines.append("TEST NUMBERS: measured against the SGLang protocol test double (lab mode, no GPU).")
        lines.append("")
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name = r["name"] + (" (current)" if r["current"] else "")
        name = f"**{name}**" if r.get("verdict") == "chosen" else name
        cells = [name]
        for lv in levels:
            v = r["tps"].get(lv)
            cells.append("-" if v is None else f"{float(v):.1f}")
        cells.append("-" if r["current"] or "gain_pct" not in r else f"{r['gain_pct']:+.1f}%")
        cells.append(r.get("verdict") or "")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "Best per level: "
        + ", ".join(f"C={lv}: {name}" for lv, name in sorted(result["per_level"].items()))
        + " (output tok/s)"
    )
    return "\n".join(lines)
