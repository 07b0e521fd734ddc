"""The NCCL choice of the autotune role: which candidate NCCL environment to deploy, from measurements.

Pure Python (no Ansible import): the filters in plugins/filter/autotune.py call it, the tests in
tests/test_autotune_nccl.py feed it recorded data.

Input: the measurement document of roles/autotune/files/autotune_nccl.py::

    {"ranks": 2, "reps": 7, "decode_sizes": [8192, ...], "prefill_sizes": [33554432, ...],
     "candidates": [{"name": "defaults", "vars": {}, "sums_ok": true, "error": null,
                     "samples": {"8192": [us rep1, us rep2, ...], ...}}, ...]}

``samples[size][r]`` is the per-operation latency (us) of repetition r: the slowest rank's, CUDA-graph
replay. Repetitions were interleaved across candidates (rep 1 of every candidate, then rep 2, ...),
so drift hits all alike.

The rule (``choose``):

* decode figure of a candidate = per repetition the mean latency over the decode sizes, then the
  median over repetitions; its spread = (max - min) / median of those per-repetition values (%);
* prefill figure = busbw (GB/s) of the median latency at each prefill size;
* a candidate is ELIGIBLE when it ran (sums right, no error), loses no more than ``floor_pct`` of the
  defaults' busbw at every prefill size, and its decode gain over the defaults (%) exceeds the measured
  noise, i.e. the SUM of its own spread and the defaults' spread, and at least ``min_gain_pct``. (The
  larger of the two spreads was not enough: on the dual-H200 host it let ALGO=Ring win one run by 14.2%
  against 11.9%, and the next run measured Ring 11% slower than the defaults - each candidate's processes
  vary more between runs than its repetitions within one run);
* among the eligible ones the lowest decode median wins; candidates within ``tie_pct`` of it are a
  tie, broken by fewer variables, then the higher worst busbw ratio, then the name;
* no eligible candidate: the defaults are kept, and the result says why (the best gain vs its noise).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULTS = "defaults"
# What the nccl_env role renders from a record (the host's measurements are data, issue 21): a
# candidate name, NCCL_* variable names and plain values; record_errors() refuses anything else.
CHOICE_RE = re.compile(r"[a-z0-9_]{1,64}")
VAR_NAME_RE = re.compile(r"NCCL_[A-Z0-9_]{1,64}")
VAR_VALUE_RE = re.compile(r"[A-Za-z0-9_.,:+/^=-]{0,256}")
_UNITS = ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))


def human(nbytes: int) -> str:
    """8192 -> '8K', 33554432 -> '32M' (the table's column names)."""
    for unit, suffix in _UNITS:
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


def busbw_gbps(nbytes: int, latency_us: float, ranks: int) -> float:
    """busbw = algbw * 2(n-1)/n (NCCL-tests convention), GB/s = 1e9 bytes/s."""
    if latency_us <= 0:
        return 0.0
    return nbytes / (latency_us * 1e-6) / 1e9 * 2 * (ranks - 1) / ranks


def _samples(cand: Mapping[str, Any], size: int) -> list[float]:
    raw = (cand.get("samples") or {}).get(str(size))
    if raw is None:
        raw = (cand.get("samples") or {}).get(size)
    return [float(v) for v in raw or []]


def _spread_pct(values: Sequence[float]) -> float:
    med = statistics.median(values)
    return (max(values) - min(values)) / med * 100 if med else 0.0


def summarize(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per candidate: decode median/min/max/spread, per-size medians, prefill busbw; ``ok``/``why``."""
    ranks = int(doc.get("ranks") or 2)
    decode = [int(s) for s in doc.get("decode_sizes") or []]
    prefill = [int(s) for s in doc.get("prefill_sizes") or []]
    if not decode or not prefill:
        raise ValueError("the measurements name no decode_sizes or no prefill_sizes")
    out: list[dict[str, Any]] = []
    for cand in doc.get("candidates") or []:
        row: dict[str, Any] = {
            "name": str(cand.get("name")),
            "vars": {str(k): str(v) for k, v in (cand.get("vars") or {}).items()},
            "ok": False,
            "why": "",
            "decode_us": {},
            "prefill_busbw_gbps": {},
        }
        out.append(row)
        if cand.get("error"):
            row["why"] = f"did not run: {cand['error']}"
            continue
        if not cand.get("sums_ok", False):
            row["why"] = "the all-reduce returned a wrong sum"
            continue
        per_size = {s: _samples(cand, s) for s in decode + prefill}
        counts = {len(v) for v in per_size.values()}
        if len(counts) != 1 or 0 in counts:
            row["why"] = f"incomplete samples (repetitions per size: {sorted(counts)})"
            continue
        reps = counts.pop()
        per_rep = [statistics.fmean(per_size[s][r] for s in decode) for r in range(reps)]
        row.update(
            ok=True,
            reps=reps,
            decode_median_us=round(statistics.median(per_rep), 2),
            decode_min_us=round(min(per_rep), 2),
            decode_max_us=round(max(per_rep), 2),
            decode_spread_pct=round(_spread_pct(per_rep), 1),
            decode_us={human(s): round(statistics.median(per_size[s]), 2) for s in decode},
            prefill_busbw_gbps={
                human(s): round(busbw_gbps(s, statistics.median(per_size[s]), ranks), 1) for s in prefill
            },
        )
    return out


def choose(
    doc: Mapping[str, Any], floor_pct: float = 5.0, min_gain_pct: float = 2.0, tie_pct: float = 1.0
) -> dict[str, Any]:
    """The choice (see the module docstring): {choice, vars, changed, reason, rows, rules}."""
    rows = summarize(doc)
    rules = {"floor_pct": floor_pct, "min_gain_pct": min_gain_pct, "tie_pct": tie_pct}
    base = next((r for r in rows if r["name"] == DEFAULTS), None)
    if base is None or not base["ok"]:
        why = base["why"] if base else "no candidate named defaults"
        raise ValueError(f"the NCCL defaults were not measured ({why}): nothing to compare with")
    for row in rows:
        _judge(row, base, floor_pct, min_gain_pct)
    eligible = [r for r in rows if r.get("eligible")]
    if not eligible:
        contenders = [r for r in rows if r["ok"] and r is not base and r["floor_ok"]]
        best = min(contenders, key=lambda r: r["decode_median_us"], default=None)
        reason = "kept the NCCL defaults: no candidate's decode gain exceeded the measured noise"
        if best is not None:
            reason += (
                f" (best: {best['name']} {best['gain_pct']:+.1f}% vs noise {best['noise_pct']:.1f}%"
                f", minimum gain {min_gain_pct:g}%)"
            )
        base["verdict"] = "chosen (defaults kept)"
        return {
            "choice": DEFAULTS,
            "vars": {},
            "changed": False,
            "reason": reason,
            "rows": rows,
            "rules": rules,
        }
    best_us = min(r["decode_median_us"] for r in eligible)
    tied = [r for r in eligible if r["decode_median_us"] <= best_us * (1 + tie_pct / 100)]
    tied.sort(key=lambda r: (len(r["vars"]), -r["busbw_worst_ratio"], r["name"]))
    win = tied[0]
    win["verdict"] = "chosen"
    reason = (
        f"chose {win['name']}: decode {win['decode_median_us']:.2f} us vs defaults "
        f"{base['decode_median_us']:.2f} us ({win['gain_pct']:+.1f}%, above the noise "
        f"{win['noise_pct']:.1f}%), prefill busbw {win['busbw_worst_ratio'] * 100 - 100:+.1f}%"
        f" (floor -{floor_pct:g}%)"
    )
    if len(tied) > 1:
        others = ", ".join(r["name"] for r in tied[1:])
        reason += f"; tied within {tie_pct:g}% with {others}: fewer variables, then more busbw, then name"
    return {"choice": win["name"], "vars": win["vars"], "changed": True, "reason": reason, "rows": rows,
            "rules": rules}  # fmt: skip


def record_errors(result: Mapping[str, Any]) -> str:
    """Why the choice may not be recorded ('' = it may): its name and variables outside the schema."""
    choice, env = result.get("choice"), result.get("vars")
    ok = (
        isinstance(choice, str)
        and CHOICE_RE.fullmatch(choice) is not None
        and isinstance(env, Mapping)
        and all(isinstance(k, str) and VAR_NAME_RE.fullmatch(k) for k in env)
        and all(VAR_VALUE_RE.fullmatch(str(v)) for v in env.values())
    )
    if ok:
        return ""
    return (
        f"autotune NCCL record refused: choice={json.dumps(choice)} vars={json.dumps(env, default=str)}: "
        "allowed a candidate name [a-z0-9_]+ and variables NCCL_[A-Z0-9_]+ with values of "
        "[A-Za-z0-9_.,:+/^=-] (nothing is recorded)"
    )


def _judge(row: dict[str, Any], base: dict[str, Any], floor_pct: float, min_gain_pct: float) -> None:
    """Adds gain_pct, noise_pct, busbw ratios, floor_ok, eligible and a verdict to a summary row."""
    row["eligible"] = False
    if not row["ok"]:
        row["floor_ok"] = False
        row["verdict"] = row["why"]
        return
    ratios = {
        size: (bw / base["prefill_busbw_gbps"][size] if base["prefill_busbw_gbps"].get(size) else 0.0)
        for size, bw in row["prefill_busbw_gbps"].items()
    }
    row["busbw_ratio"] = {k: round(v, 3) for k, v in ratios.items()}
    row["busbw_worst_ratio"] = round(min(ratios.values()), 3) if ratios else 0.0
    row["floor_ok"] = row["busbw_worst_ratio"] >= 1 - floor_pct / 100
    row["gain_pct"] = round(
        (base["decode_median_us"] - row["decode_median_us"]) / base["decode_median_us"] * 100, 1
    )
    row["noise_pct"] = round(
        row["decode_spread_pct"] + (0.0 if row is base else base["decode_spread_pct"]), 1
    )
    if row is base:
        row["verdict"] = "reference"
        return
    if not row["floor_ok"]:
        worst = min(ratios, key=lambda k: ratios[k])
        row["verdict"] = f"busbw {ratios[worst] * 100 - 100:+.0f}% at {worst} (floor -{floor_pct:g}%)"
    elif row["gain_pct"] <= 0:
        row["verdict"] = "not faster at decode sizes"
    elif row["gain_pct"] <= row["noise_pct"] or row["gain_pct"] < min_gain_pct:
        row["verdict"] = f"gain {row['gain_pct']:+.1f}% within noise ({row['noise_pct']:.1f}%)"
    else:
        row["eligible"] = True
        row["verdict"] = "eligible"


def _vars_text(env: Mapping[str, str]) -> str:
    if not env:
        return "(NCCL defaults)"
    return " ".join(f"{k.removeprefix('NCCL_')}={v}" for k, v in env.items())


def table(result: Mapping[str, Any]) -> str:
    """Markdown table of a ``choose`` result: per candidate the decode medians per size, the decode
    figure with its spread and gain, the prefill busbw with its change, and the verdict."""
    rows = result["rows"]
    ok_rows = [r for r in rows if r["ok"]]
    decode_cols = list(ok_rows[0]["decode_us"]) if ok_rows else []
    prefill_cols = list(ok_rows[0]["prefill_busbw_gbps"]) if ok_rows else []
    head = (
        ["candidate", "variables"]
        + [f"{c} us" for c in decode_cols]
        + ["decode mean us (spread)", "vs defaults"]
        + [f"{c} GB/s" for c in prefill_cols]
        + ["verdict"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name = f"**{r['name']}**" if r.get("verdict", "").startswith("chosen") else r["name"]
        if not r["ok"]:
            cells = [name, _vars_text(r["vars"])] + ["-"] * (len(head) - 3) + [r["why"]]
        else:
            gain = "-" if r["name"] == DEFAULTS else f"{-r['gain_pct']:+.1f}%"
            bws = [
                f"{r['prefill_busbw_gbps'][c]:.0f}"
                + ("" if r["name"] == DEFAULTS else f" ({r['busbw_ratio'][c] * 100 - 100:+.0f}%)")
                for c in prefill_cols
            ]
            cells = (
                [name, _vars_text(r["vars"])]
                + [f"{r['decode_us'][c]:.1f}" for c in decode_cols]
                + [f"{r['decode_median_us']:.1f} ({r['decode_spread_pct']:.0f}%)", gain]
                + bws
                + [r.get("verdict", "")]
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
