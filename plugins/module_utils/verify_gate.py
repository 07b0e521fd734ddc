"""The verify role's performance gate (layer 7) and the benchmark summary it reads (layer 6).

Pure Python, no Ansible import: the filters ``sglang.deploy.verify_*`` (plugins/filter/verify.py) call
it on the controller and ``tests/test_verify_gate.py`` tests it.

* :func:`summarize_level` turns one ``sglang.bench_serving`` JSONL result into the figures verify keeps
  (output tok/s, TTFT and ITL p50/p99, accept length, errors).
* :func:`fingerprint` reduces the workload of a benchmark (model, drafter, preset, launch spec,
  levels, prompts, lengths, GPUs, driver, ...) to the fields a baseline must share with a run to gate
  it, and their hash; :func:`fingerprint_diff` names the fields two fingerprints differ in.
* :func:`combine_repetitions` turns repeated runs of every level into one row per level: the median
  output tok/s and its spread (stdev, coefficient of variation), the same for the accept length.
* :func:`select_baseline` picks the baseline that applies to THIS run: the host's record whose
  fingerprint matches, else the seed's table when the run's fingerprint is the seed's hardware,
  preset and workload, else none (then the run records a baseline or is ``ungated``, never passed).
* :func:`gate` compares each level with the baseline: allowed shortfall = max(tolerance floor,
  k x the recorded CV); :func:`gate_table` prints expected / measured / delta / allowed / margin.
* :func:`check_accept`, :func:`check_startup`, :func:`check_speculation_gain`: the speculation and
  start-up gates; :func:`verdict` folds every layer into the run's one status.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import is_secret_name

_FIGURES = {
    "output_tps": "output_throughput",
    "ttft_p50_ms": "median_ttft_ms",
    "ttft_p99_ms": "p99_ttft_ms",
    "ttft_mean_ms": "mean_ttft_ms",
    "itl_p50_ms": "median_itl_ms",
    "itl_p99_ms": "p99_itl_ms",
    "itl_mean_ms": "mean_itl_ms",
    "e2e_p50_ms": "median_e2e_latency_ms",
    "request_tps": "request_throughput",
    "duration_s": "duration",
}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) or math.isinf(number) else number


def summarize_level(level: int, result: dict[str, Any] | None, num_prompts: int) -> dict[str, Any]:
    """The figures of one concurrency level from bench_serving's result (None: it wrote none)."""
    if not result:
        return {
            "level": int(level),
            "completed": 0,
            "errors": int(num_prompts),
            "output_tps": None,
            "accept_length": None,
            "ok": False,
        }
    summary: dict[str, Any] = {"level": int(level)}
    for name, key in _FIGURES.items():
        value = _num(result.get(key))
        summary[name] = round(value, 3) if value is not None else None
    completed = int(result.get("completed") or 0)
    summary["completed"] = completed
    summary["errors"] = max(int(num_prompts) - completed, 0)
    accept = _num(result.get("accept_length"))
    summary["accept_length"] = round(accept, 3) if accept is not None else None
    summary["total_output_tokens"] = int(result.get("total_output_tokens") or 0)
    summary["ok"] = summary["errors"] == 0 and summary["output_tps"] is not None
    return summary


def _levels_table(table: Any) -> dict[int, float | None]:
    out: dict[int, float | None] = {}
    if not isinstance(table, dict):
        return out
    for level, value in table.items():
        try:
            key = int(level)
        except (TypeError, ValueError):
            continue
        out[key] = _num(value)
    return out


def describe_hardware(gpu_names: list[str], gpu_count: int, tp_size: int) -> str:
    """'2x NVIDIA H200, tp 2' / 'no GPU (lab mode), tp 1'."""
    if int(gpu_count) == 0 or not gpu_names:
        return f"no GPU (lab mode), tp {tp_size}"
    names = sorted(set(gpu_names))
    return f"{gpu_count}x {' + '.join(names)}, tp {tp_size}"


# ---- prompts per level ------------------------------------------------------------------------------

SEED_PROMPTS_PER_LEVEL = 30


def prompts_per_level(levels: list[Any], num_prompts: Any, mode: str = "scaled") -> dict[int, int]:
    """Prompts each level sends: ``seed`` mode = 30 (the seed's table); ``auto`` = max(30, 2 x C), so
    C=100 and C=250 really keep that many requests in flight; an integer = that many at every level."""
    if mode == "seed":
        return {int(c): SEED_PROMPTS_PER_LEVEL for c in levels}
    if str(num_prompts) == "auto":
        return {int(c): max(SEED_PROMPTS_PER_LEVEL, 2 * int(c)) for c in levels}
    return {int(c): int(num_prompts) for c in levels}


# ---- the workload fingerprint -------------------------------------------------------------------------

#: Fields a baseline must share with a run to gate it. NOT in the match, only recorded: the release id
#: (a new release must be gated against the old release's baseline: that is the regression gate) and
#: the NCCL env digest (an env change must be gated against the old env's baseline).
FINGERPRINT_MATCH = (
    "model_path",
    "model_config_sha256",
    "drafter_path",
    "drafter_config_sha256",
    "preset",
    "launch_spec_sha256",
    "levels",
    "prompts_sha256",
    "dataset",
    "input_len",
    "output_len",
    "warmup_requests",
    "prompts_per_level",
    "prompts_mode",
    "gpu_names",
    "gpu_count",
    "tp_size",
    "driver",
)
FINGERPRINT_RECORDED = ("release_id", "nccl_env_sha256")
_SECRET_FLAGS = ("--api-key", "--admin-api-key")


def _sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _hash_hides(name: str) -> bool:
    """Whether the launch-spec hash leaves the value of the environment variable ``name`` out: the one
    secret-name rule (secret_names.py), plus every name holding ``token`` (``*_TOKENS``, ``TOKENIZER*``:
    the hash has always left those out, and recorded hashes stay comparable only if it still does)."""
    return is_secret_name(name) or "token" in name.lower()


def launch_spec_hash(spec: dict[str, Any]) -> str:
    """sha256 of the launch spec's server flags and environment, without anything secret: the value
    after ``--api-key`` and every secret-named environment variable are left out (their names stay)."""
    args = [str(word) for word in spec.get("server_args") or []]
    clean: list[str] = []
    hide = False
    for word in args:
        clean.append("<secret>" if hide else word)
        hide = word in _SECRET_FLAGS
    env = spec.get("environment") or {}
    env_clean = {str(k): ("<secret>" if _hash_hides(str(k)) else str(v)) for k, v in dict(env).items()}
    return _sha256({"server_args": clean, "environment": env_clean})


def fingerprint(fields: dict[str, Any]) -> dict[str, Any]:
    """The run's workload fingerprint: ``{hash, fields}``; ``hash`` covers FINGERPRINT_MATCH only.

    ``fields``: model_path, model_config_sha256 (``missing`` when there is no config.json),
    drafter_path ("" without speculation), drafter_config_sha256, preset, launch_spec_sha256, levels,
    prompts_sha256, dataset, input_len, output_len, warmup_requests, prompts_per_level ({C: n}),
    prompts_mode, gpu_names, gpu_count, tp_size, driver, release_id, nccl_env_sha256."""
    levels = sorted(int(c) for c in fields.get("levels") or [])
    per_level = {str(int(c)): int(n) for c, n in dict(fields.get("prompts_per_level") or {}).items()}
    norm: dict[str, Any] = {
        "model_path": str(fields.get("model_path") or ""),
        "model_config_sha256": str(fields.get("model_config_sha256") or "missing"),
        "drafter_path": str(fields.get("drafter_path") or ""),
        "drafter_config_sha256": str(fields.get("drafter_config_sha256") or "")
        if fields.get("drafter_path")
        else "",
        "preset": str(fields.get("preset") or ""),
        "launch_spec_sha256": str(fields.get("launch_spec_sha256") or ""),
        "levels": levels,
        "prompts_sha256": str(fields.get("prompts_sha256") or ""),
        "dataset": str(fields.get("dataset") or ""),
        "input_len": int(fields.get("input_len") or 0),
        "output_len": int(fields.get("output_len") or 0),
        "warmup_requests": int(fields.get("warmup_requests") or 0),
        "prompts_per_level": dict(sorted(per_level.items(), key=lambda kv: int(kv[0]))),
        "prompts_mode": str(fields.get("prompts_mode") or "scaled"),
        "gpu_names": [str(n) for n in fields.get("gpu_names") or []],
        "gpu_count": int(fields.get("gpu_count") or 0),
        "tp_size": int(fields.get("tp_size") or 0),
        "driver": str(fields.get("driver") or ""),
        "release_id": str(fields.get("release_id") or ""),
        "nccl_env_sha256": str(fields.get("nccl_env_sha256") or ""),
    }
    digest = _sha256({k: norm[k] for k in FINGERPRINT_MATCH})[:16]
    return {"hash": digest, "fields": norm}


def fingerprint_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The FINGERPRINT_MATCH fields in which two fingerprints (or their ``fields``) differ."""
    fa = fingerprint(a.get("fields", a))["fields"]
    fb = fingerprint(b.get("fields", b))["fields"]
    return [k for k in FINGERPRINT_MATCH if fa[k] != fb[k]]


def seed_matches(fp: dict[str, Any], seed: dict[str, Any]) -> tuple[bool, str]:
    """Whether the run is the seed's hardware AND workload exactly (``seed``: gpu_count, tp_size,
    gpu_name_regex, prompts_mode, output_len, warmup_requests, dataset)."""
    f = fp.get("fields", fp)
    want_count = int(seed.get("gpu_count", 0))
    regex = str(seed.get("gpu_name_regex", ""))
    if int(f.get("gpu_count", 0)) != want_count:
        return False, f"{f.get('gpu_count', 0)} GPU(s), the seed's table is for {want_count}"
    if int(f.get("tp_size", 0)) != int(seed.get("tp_size", want_count)):
        return False, f"tp {f.get('tp_size')}, the seed's table is for tp {seed.get('tp_size', want_count)}"
    names = list(f.get("gpu_names") or [])
    odd = [name for name in names if not re.search(regex, str(name))]
    if odd or not names:
        return False, f"GPU {odd[0] if odd else '(none)'} is not the seed's /{regex}/"
    for key in ("prompts_mode", "output_len", "warmup_requests", "dataset"):
        if key in seed and str(f.get(key)) != str(seed[key]):
            return False, f"{key} {f.get(key)}, the seed's table was measured with {seed[key]}"
    return True, "the seed's hardware and workload"


# ---- repetitions and their spread ---------------------------------------------------------------------


def spread(values: list[Any]) -> dict[str, Any]:
    """n, median, mean, sample stdev, coefficient of variation (%) of the numbers among ``values``."""
    nums = [v for v in (_num(x) for x in values) if v is not None]
    if not nums:
        return {"n": 0, "median": None, "mean": None, "stdev": None, "cv_pct": None, "values": []}
    mean = statistics.fmean(nums)
    stdev = statistics.stdev(nums) if len(nums) > 1 else 0.0
    return {
        "n": len(nums),
        "median": round(statistics.median(nums), 3),
        "mean": round(mean, 3),
        "stdev": round(stdev, 3),
        "cv_pct": round(stdev / mean * 100.0, 2) if mean > 0 else None,
        "values": [round(v, 3) for v in nums],
    }


def combine_repetitions(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-level summaries of several repetitions (``summarize_level`` rows, any order) -> one row per
    level: every figure the median over the repetitions, errors summed, ``repetitions``, and the spread
    of output tok/s (``output_tps_spread``) and of the accept length (``accept_spread``)."""
    by_level: dict[int, list[dict[str, Any]]] = {}
    for item in summaries:
        by_level.setdefault(int(item["level"]), []).append(item)
    out: list[dict[str, Any]] = []
    for level in sorted(by_level):
        reps = by_level[level]
        row: dict[str, Any] = {"level": level, "repetitions": len(reps)}
        for name in (*_FIGURES, "accept_length"):
            values = [r.get(name) for r in reps]
            med = spread(values)["median"]
            row[name] = med
        row["completed"] = sum(int(r.get("completed") or 0) for r in reps)
        row["errors"] = sum(int(r.get("errors") or 0) for r in reps)
        row["total_output_tokens"] = sum(int(r.get("total_output_tokens") or 0) for r in reps)
        row["ok"] = all(bool(r.get("ok")) for r in reps)
        if not row["ok"]:
            row["output_tps"] = None if any(r.get("output_tps") is None for r in reps) else row["output_tps"]
        row["output_tps_spread"] = spread([r.get("output_tps") for r in reps])
        row["accept_spread"] = spread([r.get("accept_length") for r in reps])
        out.append(row)
    return out


def pool_levels(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two measurements of the same levels (``combine_repetitions`` rows) pooled: per level the output
    tok/s and accept length are the median and spread over the repetitions of both (their ``values``),
    repetitions, completed, errors and output tokens summed, ``ok`` only when both were; the latency
    figures (medians of each measurement, not pooled exactly) are the mean of the two. A level measured
    once only keeps that row."""
    second_by = {int(r["level"]): r for r in second}
    out: list[dict[str, Any]] = []
    for a in sorted(first, key=lambda r: int(r["level"])):
        b = second_by.get(int(a["level"]))
        if b is None:
            out.append(dict(a))
            continue
        row: dict[str, Any] = {"level": int(a["level"])}
        for name in _FIGURES:
            if name == "output_tps":
                continue
            known = [v for v in (_num(a.get(name)), _num(b.get(name))) if v is not None]
            row[name] = round(sum(known) / len(known), 3) if known else None
        tps = spread(_values(a, b, "output_tps_spread", "output_tps"))
        acc = spread(_values(a, b, "accept_spread", "accept_length"))
        row["output_tps"] = tps["median"]
        row["accept_length"] = acc["median"]
        row["output_tps_spread"], row["accept_spread"] = tps, acc
        for name in ("repetitions", "completed", "errors", "total_output_tokens"):
            row[name] = int(a.get(name) or (1 if name == "repetitions" else 0)) + int(
                b.get(name) or (1 if name == "repetitions" else 0)
            )
        row["ok"] = bool(a.get("ok")) and bool(b.get("ok"))
        if not row["ok"] and (a.get("output_tps") is None or b.get("output_tps") is None):
            row["output_tps"] = None
        out.append(row)
    return out


def _values(a: dict[str, Any], b: dict[str, Any], spread_key: str, figure: str) -> list[Any]:
    """The repetitions' values of one figure in both rows (a row without a spread: its one value)."""
    out: list[Any] = []
    for row in (a, b):
        values = (row.get(spread_key) or {}).get("values")
        out += list(values) if values else [row.get(figure)]
    return out


# ---- baseline records ---------------------------------------------------------------------------------


def baseline_record(
    levels: list[dict[str, Any]],
    fp: dict[str, Any],
    *,
    startup_s: Any = None,
    recorded_at: str = "",
    release_id: str = "",
) -> dict[str, Any]:
    """A baseline record of this run (``levels`` from combine_repetitions): per level the median output
    tok/s, its stdev and CV over the repetitions, the accept length median and spread; the start-up
    seconds; the fingerprint (hash + fields); when and from which release."""
    rows: dict[str, Any] = {}
    for item in levels:
        tps = item.get("output_tps_spread") or spread([item.get("output_tps")])
        acc = item.get("accept_spread") or spread([item.get("accept_length")])
        rows[str(int(item["level"]))] = {
            "output_tps": tps["median"],
            "stdev": tps["stdev"],
            "cv_pct": tps["cv_pct"],
            "n": tps["n"],
            "values": tps["values"],
            "accept_length": acc["median"],
            "accept_stdev": acc["stdev"],
            "accept_cv_pct": acc["cv_pct"],
        }
    startup = _num(startup_s)
    return {
        "fingerprint": fp["hash"],
        "fields": fp["fields"],
        "recorded_at": str(recorded_at),
        "release_id": str(release_id or fp["fields"].get("release_id", "")),
        "repetitions": max((int(i.get("repetitions") or 1) for i in levels), default=0),
        "startup_s": round(startup, 1) if startup is not None else None,
        "levels": rows,
    }


def records_with(records: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The host's records (``{fingerprint hash: record}``) with ``record`` added or replaced."""
    out = dict(records) if isinstance(records, dict) else {}
    out[str(record["fingerprint"])] = record
    return dict(sorted(out.items()))


def pooled_band(cvs: dict[int, float | None]) -> dict[int, float | None]:
    """Each level's CV, at least the CV pooled over all levels (root mean square): three repetitions
    estimate one level's spread poorly (2 degrees of freedom), the host's jitter pooled over the levels
    much better; a level noisier than the pool keeps its own. bench/gate_power.py measured the gain."""
    known = [v for v in cvs.values() if v is not None]
    if not known:
        return dict(cvs)
    pooled = math.sqrt(sum(v * v for v in known) / len(known))
    return {
        level: round(max(v, pooled), 3) if v is not None else round(pooled, 3) for level, v in cvs.items()
    }


def _closest(records: dict[str, Any], fp: dict[str, Any]) -> tuple[str, list[str]] | None:
    best: tuple[str, list[str]] | None = None
    for key, record in records.items():
        if not isinstance(record, dict) or not isinstance(record.get("fields"), dict):
            continue
        diff = fingerprint_diff(fp, record["fields"])
        if best is None or len(diff) < len(best[1]):
            best = (str(key), diff)
    return best


def select_baseline(
    fp: dict[str, Any],
    *,
    records: Any,
    seed_table: dict[str, Any] | None,
    seed_match: dict[str, Any],
    seed_hardware: str = "",
) -> dict[str, Any]:
    """The baseline that applies to this run (fingerprint ``fp``).

    Returns ``{source: recorded|seed|none, table: {C: tok/s}, band: {C: CV %}, accept: {C: median},
    accept_band: {C: CV %}, startup_s, fingerprint, hardware, reason}``. A record of the host whose
    fingerprint matches (same hash, every match field equal) wins; the seed's table applies only when
    the run is the seed's hardware, preset and workload exactly; else none."""
    f = fp["fields"]
    here = describe_hardware(f["gpu_names"], f["gpu_count"], f["tp_size"])
    recs = records if isinstance(records, dict) else {}
    record = recs.get(fp["hash"])
    if (
        isinstance(record, dict)
        and isinstance(record.get("fields"), dict)
        and not fingerprint_diff(fp, record["fields"])
    ):
        rows = record.get("levels") or {}
        return {
            "source": "recorded",
            "table": _levels_table({c: (r or {}).get("output_tps") for c, r in rows.items()}),
            "band": pooled_band(_levels_table({c: (r or {}).get("cv_pct") for c, r in rows.items()})),
            "accept": _levels_table({c: (r or {}).get("accept_length") for c, r in rows.items()}),
            "accept_band": pooled_band(
                _levels_table({c: (r or {}).get("accept_cv_pct") for c, r in rows.items()})
            ),
            "startup_s": _num(record.get("startup_s")),
            "fingerprint": fp["hash"],
            "hardware": here,
            "repetitions": record.get("repetitions"),
            "reason": f"recorded on this host ({record.get('recorded_at') or 'time unknown'}, "
            f"release {record.get('release_id') or 'unknown'}, {record.get('repetitions')} repetition(s), "
            f"fingerprint {fp['hash']})",
        }
    matches, why = seed_matches(fp, seed_match)
    seed = _levels_table((seed_table or {}).get(f["preset"]))
    if matches and any(value is not None for value in seed.values()):
        return {
            "source": "seed",
            "table": seed,
            "band": {},
            "accept": {},
            "accept_band": {},
            "startup_s": None,
            "fingerprint": fp["hash"],
            "hardware": seed_hardware or here,
            "reason": "the seed's table (this host is the seed's hardware, preset and workload)",
        }
    if matches:
        why = f"the seed's table has no row for preset {f['preset']}"
    closest = _closest(recs, fp)
    near = (
        f"; the closest record ({closest[0]}) differs in {', '.join(closest[1])}"
        if closest is not None
        else "; no record on this host"
    )
    return {
        "source": "none",
        "table": {},
        "band": {},
        "accept": {},
        "accept_band": {},
        "startup_s": None,
        "fingerprint": fp["hash"],
        "hardware": here,
        "reason": f"no comparable baseline for {here}/{f['preset']} (fingerprint {fp['hash']}{near}; "
        f"seed: {why})",
    }


# ---- the gate -----------------------------------------------------------------------------------------


def allowed_shortfall(
    tolerance_pct: float,
    noise_k: float,
    cv_pct: Any,
    gate_repetitions: int = 1,
    baseline_repetitions: int = 1,
) -> float:
    """The allowed shortfall of one level in percent: max(tolerance floor, k x the measured spread of
    the comparison). The spread is the recorded run-to-run CV scaled to the two medians compared:
    CV x sqrt(1/gate repetitions + 1/baseline repetitions) (the standard error of their difference)."""
    cv = _num(cv_pct)
    if cv is None:
        return float(tolerance_pct)
    scale = math.sqrt(1.0 / max(int(gate_repetitions), 1) + 1.0 / max(int(baseline_repetitions), 1))
    return max(float(tolerance_pct), float(noise_k) * cv * scale)


def gate(
    levels: list[dict[str, Any]],
    baseline: dict[str, Any],
    tolerance_pct: float,
    noise_k: float = 3.0,
    first: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compare each measured level with the baseline.

    Per level: expected = the recorded median, allowed = max(``tolerance_pct``, ``noise_k`` x the
    recorded CV %); a level fails when it had errors or measured < expected x (1 - allowed / 100).
    margin = delta + allowed (percent of expected above the threshold; negative = failed). Returns
    ``{status: passed|failed|ungated, rows, reason, failed_levels, confirmable, tolerance_pct, noise_k}``;
    ``confirmable``: failed on throughput only (no level with errors or without a result), the case a
    second measurement may judge (``pool_levels``). ``first``: the gate of the first measurement when
    ``levels`` pools it with a confirmation; the result then names both (``confirmation``)."""
    table = _levels_table(baseline.get("table", {}))
    band = _levels_table(baseline.get("band", {}))
    base_reps = int(baseline.get("repetitions") or 1)
    tol = float(tolerance_pct)
    rows: list[dict[str, Any]] = []
    failed: list[int] = []
    gated = 0
    for item in sorted(levels, key=lambda x: int(x["level"])):
        level = int(item["level"])
        measured = _num(item.get("output_tps"))
        expected = table.get(level)
        errors = int(item.get("errors") or 0)
        allowed = allowed_shortfall(
            tol, noise_k, band.get(level), int(item.get("repetitions") or 1), base_reps
        )
        row: dict[str, Any] = {
            "level": level,
            "expected": expected,
            "measured": measured,
            "delta_pct": None,
            "allowed_pct": round(allowed, 1) if expected is not None else None,
            "min_allowed": None,
            "margin_pct": None,
            "cv_pct": band.get(level),
            "errors": errors,
            "verdict": "no reference" if baseline.get("source") == "seed" else "ungated",
        }
        if expected is not None and measured is not None and expected > 0:
            delta = (measured - expected) / expected * 100.0
            row["delta_pct"] = round(delta, 1)
            row["min_allowed"] = round(expected * (1.0 - allowed / 100.0), 1)
            row["margin_pct"] = round(delta + allowed, 1)
        if errors > 0 or measured is None:
            row["verdict"] = "FAIL (errors)" if errors > 0 else "FAIL (no result)"
            failed.append(level)
        elif expected is not None:
            gated += 1
            if measured < expected * (1.0 - allowed / 100.0):
                row["verdict"] = "FAIL"
                failed.append(level)
            else:
                row["verdict"] = "ok"
        rows.append(row)
    if failed:
        status = "failed"
        reason = (
            f"output tok/s below the {baseline.get('source')} baseline - allowed shortfall "
            f"(max({tol:g}%, {float(noise_k):g} x the measured spread)) or errors at "
            f"C={', C='.join(map(str, failed))}"
        )
    elif gated == 0:
        status = "ungated"
        reason = baseline.get("reason") or "no baseline"
        if baseline.get("source") != "none":
            reason = f"the baseline ({baseline.get('source')}) has no value for the measured levels"
    else:
        status = "passed"
        lowest = min(
            (r["margin_pct"] for r in rows if r["margin_pct"] is not None and r["verdict"] == "ok"),
            default=None,
        )
        reason = (
            f"{gated} level(s) within the allowed shortfall of the {baseline.get('source')} baseline "
            f"({baseline.get('hardware')}); smallest margin {lowest:+.1f}%"
            if lowest is not None
            else f"{gated} level(s) passed"
        )
        if gated < len(rows):
            reason += f"; {len(rows) - gated} level(s) without a reference value"
    result: dict[str, Any] = {
        "status": status,
        "rows": rows,
        "reason": reason,
        "failed_levels": failed,
        "confirmable": bool(failed) and all(r["verdict"] == "FAIL" for r in rows if r["level"] in failed),
        "tolerance_pct": tol,
        "noise_k": float(noise_k),
    }
    return _with_confirmation(result, first, levels) if first is not None else result


def _with_confirmation(
    result: dict[str, Any], first: dict[str, Any], levels: list[dict[str, Any]]
) -> dict[str, Any]:
    """A gate over pooled levels, annotated with the first measurement's gate."""
    reps = max((int(i.get("repetitions") or 1) for i in levels), default=0)
    shortfalls = ", ".join(
        f"C={r['level']} {_fmt(r['delta_pct'], '%')} (allowed -{r['allowed_pct']}%)"
        for r in first.get("rows", [])
        if r["level"] in first.get("failed_levels", [])
    )
    result["confirmation"] = {
        "first_status": first.get("status"),
        "first_failed_levels": list(first.get("failed_levels", [])),
        "first_rows": first.get("rows", []),
        "repetitions": reps,
    }
    result["reason"] = (
        f"the first measurement fell short at {shortfalls}; measured again, the gate judged the "
        f"{reps} repetitions of both: {result['reason']}"
    )
    result["confirmable"] = False
    return result


def gate_outcome(
    gated: dict[str, Any], baseline: dict[str, Any], *, record: Any, layers_ok: bool
) -> dict[str, Any]:
    """The gate's final status and whether this run is written as a baseline.

    ``record``: auto (record when there is no comparable baseline), true (also refresh a matching
    baseline, only from a run whose gate passed), false (never). Without a comparable baseline the
    status is ``baseline_recorded`` when recording and layers 1-6 passed, else ``ungated`` - never
    ``passed``. A failed gate never records."""
    mode = str(record).strip().lower()
    mode = (
        "true"
        if mode in ("true", "yes", "1", "on")
        else ("false" if mode in ("false", "no", "0", "off") else mode)
    )
    out = dict(gated)
    out["record"] = False
    if gated["status"] == "failed":
        return out
    if gated.get("mode") == "same_window":
        # the pair decided (passed, inconclusive, ungated); a passed pair is recorded as the stored
        # baseline of its fingerprint when none is comparable (auto) or always (true): the baseline stays
        # the gate of a run with no serving release before it and the long-term reference
        if (
            gated["status"] == "passed"
            and layers_ok
            and (mode == "true" or (mode == "auto" and baseline.get("source") == "none"))
        ):
            out["record"] = True
            out["reason"] = gated["reason"] + "; recorded as the host's stored baseline of this workload"
        return out
    if baseline.get("source") == "none" or gated["status"] == "ungated":
        if mode in ("auto", "true") and layers_ok:
            out["status"] = "baseline_recorded"
            out["record"] = True
            out["reason"] = f"{baseline.get('reason')}; this run is the host's baseline now"
        else:
            out["status"] = "ungated"
            why = "verify_record_baseline is false" if mode == "false" else "an earlier layer failed"
            out["reason"] = f"{baseline.get('reason')}; nothing recorded ({why})"
        return out
    if mode == "true" and gated["status"] == "passed":
        out["record"] = True
        out["reason"] = gated["reason"] + "; baseline refreshed from this run (verify_record_baseline: true)"
    return out


def check_accept(
    levels: list[dict[str, Any]],
    baseline: dict[str, Any],
    tolerance_pct: float,
    noise_k: float,
    speculative: bool,
) -> dict[str, Any]:
    """Speculation must pay: each level's accept length against the recorded median minus its band
    (max(``tolerance_pct``, k x the recorded CV of the accept length)). Skipped without speculation,
    without a recorded accept length or without a measured one."""
    if not speculative:
        return {"status": "skipped", "reason": "not a speculative preset", "rows": []}
    expect = _levels_table(baseline.get("accept", {}))
    band = _levels_table(baseline.get("accept_band", {}))
    rows: list[dict[str, Any]] = []
    failed: list[int] = []
    for item in sorted(levels, key=lambda x: int(x["level"])):
        level = int(item["level"])
        expected = expect.get(level)
        measured = _num(item.get("accept_length"))
        if expected is None or measured is None or expected <= 0:
            continue
        allowed = allowed_shortfall(
            tolerance_pct,
            noise_k,
            band.get(level),
            int(item.get("repetitions") or 1),
            int(baseline.get("repetitions") or 1),
        )
        ok = measured >= expected * (1.0 - allowed / 100.0)
        rows.append(
            {
                "level": level,
                "expected": expected,
                "measured": measured,
                "delta_pct": round((measured - expected) / expected * 100.0, 1),
                "allowed_pct": round(allowed, 1),
                "verdict": "ok" if ok else "FAIL",
            }
        )
        if not ok:
            failed.append(level)
    if not rows:
        return {
            "status": "skipped",
            "reason": "no recorded and measured accept length to compare",
            "rows": [],
        }
    if failed:
        return {
            "status": "failed",
            "reason": f"accept length below the recorded value - band at C={', C='.join(map(str, failed))}",
            "rows": rows,
        }
    return {
        "status": "passed",
        "reason": f"accept length within its band at {len(rows)} level(s)",
        "rows": rows,
    }


def check_speculation_gain(
    levels: list[dict[str, Any]],
    fp: dict[str, Any],
    records: Any,
    *,
    target: int,
    speculative: bool,
    required: bool,
    baseline_preset: str = "baseline",
) -> dict[str, Any]:
    """Opt-in (``required``): the speculative preset still beats the host's recorded figures of
    ``baseline_preset`` (same workload and hardware; preset, launch spec and drafter may differ) at
    concurrency ``target``."""
    if not required:
        return {"status": "skipped", "reason": "verify_require_speculation_gain is false"}
    if not speculative:
        return {"status": "skipped", "reason": "not a speculative preset"}
    ignore = {"preset", "launch_spec_sha256", "drafter_path", "drafter_config_sha256"}
    measured = next((_num(i.get("output_tps")) for i in levels if int(i["level"]) == int(target)), None)
    for record in (records if isinstance(records, dict) else {}).values():
        fields = record.get("fields") if isinstance(record, dict) else None
        if not isinstance(fields, dict) or fields.get("preset") != baseline_preset:
            continue
        if [k for k in fingerprint_diff(fp, fields) if k not in ignore]:
            continue
        ref = _num(((record.get("levels") or {}).get(str(int(target))) or {}).get("output_tps"))
        if ref is None or measured is None:
            break
        gain = (measured - ref) / ref * 100.0 if ref > 0 else 0.0
        ok = measured > ref
        return {
            "status": "passed" if ok else "failed",
            "reason": f"C={target}: {measured:.1f} tok/s vs {baseline_preset} {ref:.1f} tok/s ({gain:+.1f}%)"
            + ("" if ok else ": speculation no longer pays on this host"),
            "measured": measured,
            "reference": ref,
            "gain_pct": round(gain, 1),
        }
    return {
        "status": "failed",
        "reason": f"no recorded {baseline_preset} figures at C={target} for this host and workload "
        f"to compare with (record them: a verify run with sglang_preset={baseline_preset})",
    }


def check_startup(
    measured_s: Any, baseline: dict[str, Any], tolerance_pct: float, slack_s: float
) -> dict[str, Any]:
    """Start-up (unit start -> first /health 200) against the recorded value: fails when measured >
    recorded x (1 + ``tolerance_pct`` / 100) + ``slack_s``. Skipped when either is unknown."""
    measured = _num(measured_s)
    recorded = _num(baseline.get("startup_s"))
    if measured is None:
        return {"status": "skipped", "reason": "start-up not measured in this run", "measured_s": None}
    if recorded is None:
        return {
            "status": "skipped",
            "reason": f"{measured:.1f} s; no recorded start-up to compare with",
            "measured_s": measured,
        }
    limit = recorded * (1.0 + float(tolerance_pct) / 100.0) + float(slack_s)
    ok = measured <= limit
    return {
        "status": "passed" if ok else "failed",
        "reason": f"{measured:.1f} s against recorded {recorded:.1f} s (allowed up to {limit:.1f} s)"
        + ("" if ok else ": start-up regressed"),
        "measured_s": measured,
        "recorded_s": recorded,
        "limit_s": round(limit, 1),
    }


# ---- the verdict --------------------------------------------------------------------------------------

VERDICT_LAYERS = ("gpu", "cuda", "torch", "nccl", "http", "bench", "gate", "speculation", "startup")
_TITLES = {
    "gpu": "1 (GPU)",
    "cuda": "2 (CUDA)",
    "torch": "3 (torch)",
    "nccl": "4 (NCCL)",
    "http": "5 (HTTP)",
    "bench": "6 (benchmark)",
    "gate": "7 (gate)",
    "speculation": "7 (speculation)",
    "startup": "7 (start-up)",
}


def verdict(results: dict[str, Any], *, require_gate: bool) -> dict[str, Any]:
    """The run's one status: ``{status: passed|failed|inconclusive|ungated|baseline recorded|skipped, reason,
    failed}``.

    failed: any layer failed (also an ``ungated`` gate under ``require_gate``); baseline recorded: the
    gate found no comparable baseline and this run was recorded; ungated: no baseline and nothing
    recorded; skipped: the benchmark and gate did not run (layers 1-5 only); passed: gated and passed;
    inconclusive: the same-window pair neither passed nor failed at its cap of repetitions (never passed)."""
    failed = [k for k in VERDICT_LAYERS if (results.get(k) or {}).get("status") == "failed"]
    gate_status = (results.get("gate") or {}).get("status")
    if gate_status == "ungated" and require_gate:
        failed.append("gate")
        failed = [k for k in VERDICT_LAYERS if k in failed]
    if failed:
        reasons = []
        for key in failed:
            why = (results.get(key) or {}).get("reason", "")
            if key == "gate" and gate_status == "ungated":
                why = f"{why} (verify_require_gate: a run that cannot be gated fails)"
            reasons.append(f"layer {_TITLES[key]}: {why}")
        return {"status": "failed", "reason": "; ".join(reasons), "failed": failed}
    if gate_status == "inconclusive":
        return {"status": "inconclusive", "reason": results["gate"]["reason"], "failed": []}
    if gate_status == "baseline_recorded":
        return {"status": "baseline recorded", "reason": results["gate"]["reason"], "failed": []}
    if gate_status == "ungated":
        return {"status": "ungated", "reason": results["gate"]["reason"], "failed": []}
    if gate_status == "passed":
        return {"status": "passed", "reason": results["gate"]["reason"], "failed": []}
    why = (results.get("bench") or {}).get("reason") or "the benchmark and the gate did not run"
    return {"status": "skipped", "reason": f"not gated: {why}", "failed": []}


def _layer_line(results: dict[str, Any], key: str) -> str:
    """``  layer N (TITLE): status - reason`` of one layer of a result (``not run`` when it did not)."""
    layer = results.get(key) or {}
    title = _TITLES[key.removesuffix("_after_rollback")]
    return f"  layer {title}: {layer.get('status', 'not run')} - {layer.get('reason', '-')}"


def _table(results: dict[str, Any], key: str) -> list[str]:
    return str((results.get(key) or {}).get("table") or "").splitlines()


def failure_lines(results: dict[str, Any], decided: dict[str, Any] | None, service: str) -> list[str]:
    """Why the verify role fails the play at its end (after layer 9 wrote the document and the results),
    one message: after a rollback both results (the new release's, then the previous one's after the
    restore) with their gate tables; else a failed gate with its table; else a failed layer 5 or 6;
    else an inconclusive or failed verdict. [] when the run does not fail."""
    rollback = results.get("rollback")
    status = (decided or {}).get("status", "")
    if rollback is not None:
        head = "inconclusive" if status == "inconclusive" else "failed"
        return [
            f"verify {head} on release {rollback['from']} and rolled back to {rollback['to']}:",
            f"new release {rollback['from']}:",
            *(_layer_line(results, key) for key in ("http", "bench", "gate")),
            *_table(results, "gate"),
            f"previous release {rollback['to']} (now current, {service} restarted):",
            *(_layer_line(results, f"{key}_after_rollback") for key in ("http", "bench", "gate")),
            *_table(results, "gate_after_rollback"),
            f"API key: {rollback.get('key', '-')}",
            f"failed combination: {rollback.get('known_bad', '-')}",
        ]
    if (results.get("gate") or {}).get("status") == "failed":
        return [
            f"verify layer 7 (gate) failed: {results['gate'].get('reason', '')}",
            *_table(results, "gate"),
        ]
    layers = [
        f"verify layer {_TITLES[key]} failed: {results[key].get('reason', '')}"
        for key in ("http", "bench")
        if (results.get(key) or {}).get("status") == "failed"
    ]
    if layers:
        return layers
    reason = (decided or {}).get("reason", "")
    if status == "inconclusive":
        keep = "the new state keeps serving: verify_same_window_inconclusive=keep"
        return [f"verify verdict inconclusive ({keep}): {reason}", *_table(results, "gate")]
    if status == "failed":
        gate = _table(results, "gate") if "gate" in (decided or {}).get("failed", []) else []
        return [f"verify verdict failed: {reason}", *gate]
    return []


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:+.1f}{suffix}" if suffix == "%" else f"{value:.1f}{suffix}"
    return f"{value}{suffix}"


def _allowed(row: dict[str, Any]) -> str:
    allowed = row.get("allowed_pct")
    return f"-{allowed:.1f}%" if allowed is not None else "-"


# (title, width, cell) per column; the stored-baseline gate's table, then the same-window pair's
_LEVEL = ("level", 6, lambda row: "C=" + str(row["level"]))
_VERDICT = ("verdict", 0, lambda row: row["verdict"])
_BASELINE_COLUMNS = (
    _LEVEL,
    ("expected", 10, lambda row: _fmt(row["expected"])),
    ("measured", 10, lambda row: _fmt(row["measured"])),
    ("delta", 8, lambda row: _fmt(row["delta_pct"], "%")),
    ("allowed", 8, _allowed),
    ("margin", 8, lambda row: _fmt(row.get("margin_pct"), "%")),
    _VERDICT,
)
_SAME_WINDOW_COLUMNS = (
    _LEVEL,
    ("arm A", 10, lambda row: _fmt(row["expected"])),
    ("arm B", 10, lambda row: _fmt(row["measured"])),
    ("B/A", 8, lambda row: _fmt(row["delta_pct"], "%")),
    ("bound", 8, lambda row: _fmt(row.get("lower_pct"), "%")),
    ("allowed", 8, _allowed),
    ("margin", 8, lambda row: _fmt(row.get("margin_pct"), "%")),
    ("pairs", 5, lambda row: str(row.get("pairs", 0))),
    _VERDICT,
)


def _table_line(cells: list[tuple[str, int]]) -> str:
    *fixed, (last, _width) = cells
    return " ".join(f"{text:>{width}}" for text, width in fixed) + "  " + last


def gate_table(result: dict[str, Any]) -> str:
    """The gate's rows as a fixed-width text table: level, expected, measured, delta, allowed, margin,
    verdict. The same-window gate: arm A and arm B (medians), B/A, its one-sided bound, the allowed
    shortfall, the margin of the bound above it, the pairs and the verdict."""
    columns = _SAME_WINDOW_COLUMNS if result.get("mode") == "same_window" else _BASELINE_COLUMNS
    header = _table_line([(title, width) for title, width, _cell in columns])
    lines = [header, "-" * len(header)]
    for row in result.get("rows", []):
        lines.append(_table_line([(cell(row), width) for _title, width, cell in columns]))
    return "\n".join(lines)
