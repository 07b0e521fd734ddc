"""The model and drafter directories: what the host probe reads (:func:`inspect_dir`, read-only) and
the one decider of preflight (:func:`decide_models`, pure).

The probe (plugins/modules/preflight_host_probe.py) runs :func:`inspect_dir` on the host for
``sglang_model_path`` and ``sglang_draft_model_path`` and :func:`service_user` for
``sglang_service_user``; the filter ``sglang.deploy.preflight_model_check`` runs
:func:`decide_models` on its answers with the GPU facts and the launch spec. Tested by
tests/test_model_dir.py.
"""

from __future__ import annotations

import grp
import json
import os
import posixpath
import pwd
import stat
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

# SGLang 0.5.9's EAGLE-3 draft architectures: the EntryClass of sglang/srt/models/llama_eagle3.py
# (the only *eagle3* model module of the 0.5.9 wheel; an EAGLE-3 drafter of Kimi, Llama, Qwen or
# gpt-oss declares it in its config.json).
EAGLE3_ARCHITECTURES = ("LlamaForCausalLMEagle3",)
# The unit's sandbox (roles/sglang_service/templates/sglang.service.j2): these trees are empty or
# inaccessible inside the service; the first matching prefix names the setting.
HIDDEN_TREES = (
    ("/home", "ProtectHome=yes"),
    ("/root", "ProtectHome=yes"),
    ("/run/user", "ProtectHome=yes"),
    ("/tmp", "PrivateTmp=yes"),
    ("/var/tmp", "PrivateTmp=yes"),
)
UNIT = "sglang-kimi.service"
# A tokenizer SGLang/transformers can load: any one of these sets of files.
TOKENIZER_SETS = (
    ("tokenizer.json",),
    ("tokenizer.model",),
    ("tiktoken.model", "tokenizer_config.json"),
    ("tokenizer_config.json", "vocab.json"),
    ("tokenizer_config.json", "vocab.txt"),
)
TOKENIZER_FILES = sorted({name for names in TOKENIZER_SETS for name in names})
WEIGHT_INDEXES = {"safetensors": "model.safetensors.index.json", "bin": "pytorch_model.bin.index.json"}
CONFIG_KEYS = (
    "architectures", "model_type", "torch_dtype", "hidden_size", "num_hidden_layers", "vocab_size",
)  # fmt: skip
# Files whose "auto_map" names Python code transformers runs when loading with trust_remote_code
# (AutoConfig/AutoModel* in config.json, AutoTokenizer in tokenizer_config.json, AutoProcessor/
# AutoImageProcessor/AutoFeatureExtractor in the processor files).
AUTO_MAP_FILES = ("config.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json")
MIB = 1024 * 1024
KV_ROOM_WARN = 0.10  # warn when less than this share of the static budget is left for the KV cache


class Stat(TypedDict):
    path: str
    mode: int
    uid: int
    gid: int


class Weights(TypedDict):
    format: str
    files: list[str]
    bytes: int
    index: str
    missing: list[str]


class DirReport(TypedDict):
    path: str
    realpath: str
    exists: bool
    is_dir: bool
    config_present: bool
    config: dict[str, Any]
    config_error: str
    tokenizer: list[str]
    remote_code: list[str]
    weights: Weights
    dirs: list[Stat]
    files: list[Stat]


class User(TypedDict):
    name: str
    exists: bool
    uid: int
    gids: list[int]


def _stat(path: str) -> Stat:
    st = os.stat(path)
    return Stat(path=path, mode=stat.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid)


def _ancestors(real: str) -> list[str]:
    """``/``, ``/a``, ``/a/b`` ... ``real`` (every directory the service must traverse)."""
    out = ["/"]
    parts = [p for p in real.split("/") if p]
    for i in range(1, len(parts) + 1):
        out.append("/" + "/".join(parts[:i]))
    return out


def _weights(path: str, names: Sequence[str]) -> Weights:
    for fmt, suffix in (("safetensors", ".safetensors"), ("bin", ".bin")):
        files = sorted(n for n in names if n.endswith(suffix))
        index = WEIGHT_INDEXES[fmt] if WEIGHT_INDEXES[fmt] in names else ""
        if not files and not index:
            continue
        missing: list[str] = []
        if index:
            try:
                with open(posixpath.join(path, index), encoding="utf-8") as fh:
                    wanted = set(json.load(fh).get("weight_map", {}).values())
                missing = sorted(str(w) for w in wanted if w not in names)
            except (OSError, ValueError, AttributeError):
                missing = [f"{index} (unreadable)"]
        total = sum(os.stat(posixpath.join(path, n)).st_size for n in files)
        return Weights(format=fmt, files=files, bytes=total, index=index, missing=missing)
    return Weights(format="", files=[], bytes=0, index="", missing=[])


def _auto_map(path: str, names: Sequence[str]) -> list[str]:
    """``<file>: <AutoClass>=<module.Class>`` for every code reference an ``auto_map`` holds."""
    out: list[str] = []
    for name in AUTO_MAP_FILES:
        if name not in names:
            continue
        try:
            with open(posixpath.join(path, name), encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue  # config.json's error is reported by its own check
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        if not auto_map:
            continue
        if not isinstance(auto_map, dict):
            out.append(f"{name}: auto_map={json.dumps(auto_map)[:80]}")
            continue
        for cls, ref in sorted(auto_map.items()):
            refs = [r for r in (ref if isinstance(ref, list) else [ref]) if r]
            out.append(f"{name}: {cls}={','.join(str(r) for r in refs)[:120]}")
    return out


def inspect_dir(path: str) -> DirReport:
    """Read-only facts of a model directory on this machine (the host)."""
    real = os.path.realpath(path) if path else ""
    report = DirReport(
        path=path, realpath=real, exists=bool(path) and os.path.exists(path), is_dir=False,
        config_present=False, config={}, config_error="", tokenizer=[], remote_code=[],
        weights=Weights(format="", files=[], bytes=0, index="", missing=[]), dirs=[], files=[],
    )  # fmt: skip
    if not report["exists"]:
        return report
    report["is_dir"] = os.path.isdir(path)
    report["dirs"] = [_stat(d) for d in _ancestors(real) if os.path.exists(d)]
    if not report["is_dir"]:
        return report
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        report["config_error"] = f"cannot list the directory: {err.strerror}"
        return report
    if "config.json" in names:
        report["config_present"] = True
        try:
            with open(posixpath.join(path, "config.json"), encoding="utf-8") as fh:
                config = json.load(fh)
            if not isinstance(config, dict):
                raise ValueError("not a JSON object")
            report["config"] = {k: config[k] for k in CONFIG_KEYS if k in config}
        except (OSError, ValueError) as err:
            report["config_error"] = str(err)
    report["tokenizer"] = [n for n in TOKENIZER_FILES if n in names]
    report["remote_code"] = _auto_map(path, names)
    report["weights"] = _weights(path, names)
    used = ["config.json"] * report["config_present"] + report["tokenizer"] + report["weights"]["files"]
    if report["weights"]["index"]:
        used.append(report["weights"]["index"])
    files: list[Stat] = []
    seen = {d["path"] for d in report["dirs"]}
    for name in used:
        full = posixpath.join(path, name)
        target = os.path.realpath(full)
        st = _stat(full)
        st["path"] = target
        files.append(st)
        for parent in _ancestors(posixpath.dirname(target)):  # a symlinked file (HF cache blobs)
            if parent not in seen and os.path.exists(parent):
                seen.add(parent)
                report["dirs"].append(_stat(parent))
    report["files"] = files
    return report


def service_user(name: str) -> User:
    """The service user as this host knows it (absent on a fresh host: the service stage makes it)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return User(name=name, exists=False, uid=-1, gids=[])
    gids = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
    return User(name=name, exists=True, uid=entry.pw_uid, gids=sorted(gids))


# ---- the decider (pure) ----


class Decision(TypedDict):
    errors: list[str]
    warnings: list[str]
    weights_bytes: int
    per_gpu_bytes: int
    budget_bytes: int
    mem_fraction: float
    summary: str


def _hidden(real: str) -> tuple[str, str] | None:
    """(tree, unit setting) when the unit's sandbox hides ``real``."""
    for tree, setting in HIDDEN_TREES:
        if real == tree or real.startswith(tree + "/"):
            return tree, setting
    return None


def _can(user: Mapping[str, Any], st: Mapping[str, Any], bits: int) -> bool:
    """Whether `user` has `bits` (4 r, 1 x, 5 r+x) on an object of mode/uid/gid `st`."""
    mode = int(st["mode"])
    if user.get("exists"):
        if int(user["uid"]) == 0:
            return True
        if int(user["uid"]) == int(st["uid"]):
            return (mode >> 6) & bits == bits
        if int(st["gid"]) in [int(g) for g in user.get("gids", [])]:
            return (mode >> 3) & bits == bits
    return mode & bits == bits


def mem_fraction_auto(gpu_mib: int, tp_size: int, speculative: bool) -> float:
    """The HIGHEST fraction SGLang 0.5.9 picks when --mem-fraction-static is not given
    (ServerArgs._handle_gpu_memory_settings): it reserves at least 512 MiB + 2048 x 1.5 (prefill
    activations) + tp/8 GiB, at least 10 GiB on a GPU of more than 60 GiB, and 2 GiB more for an
    EAGLE drafter. Its real reserve also grows with chunked prefill and cuda-graph batch size, so the
    fraction used here never refuses a model SGLang could fit."""
    reserved = 512 + 2048 * 1.5 + tp_size / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if speculative:
        reserved += 2 * 1024
    return round((gpu_mib - reserved) / gpu_mib, 3)


OUTSIDE = "outside /home, /root, /run/user, /tmp and /var/tmp"
FIX_ACCESS = "or chgrp it to a group of the service user, or set sglang_service_user"


def _check_sandbox(shown: str, var: str, rep: Mapping[str, Any], errors: list[str]) -> None:
    """The directory's and its files' real paths against the unit's ProtectHome/PrivateTmp."""
    path = str(rep.get("path", ""))
    real = str(rep.get("realpath") or path)
    where = f" (real path {real})" if real != path else ""
    hidden = _hidden(real)
    if hidden:
        errors.append(
            f"{shown}{where} is under {hidden[0]}, which {UNIT} cannot see ({hidden[1]} in its sandbox: "
            f"the server would fail at start-up): allowed a path {OUTSIDE}; move the model (or bind-mount "
            f"it) to e.g. /opt/models or /data/models and set {var}"
        )
        return
    for st in rep.get("files", []):
        hidden = _hidden(str(st["path"]))
        if hidden:
            errors.append(
                f"{shown} holds {st['path']} (through a symlink) under {hidden[0]}, which {UNIT} cannot "
                f"see ({hidden[1]}): allowed files {OUTSIDE}; copy the files into {real}"
            )
            return


def _check_contents(shown: str, rep: Mapping[str, Any], *, tokenizer: bool, errors: list[str]) -> None:
    """config.json, tokenizer (target only), weights and the shards an index names."""
    if not rep.get("config_present"):
        errors.append(
            f"{shown} has no config.json: allowed a Hugging Face model directory; copy the whole model "
            f"(config.json beside the weights)"
        )
    elif rep.get("config_error"):
        errors.append(
            f"{shown}: config.json is not valid JSON ({rep['config_error']}): fix or re-download it"
        )
    if tokenizer and not rep.get("tokenizer"):
        errors.append(
            f"{shown} has no tokenizer: allowed tokenizer.json, tokenizer.model, tiktoken.model + "
            f"tokenizer_config.json, or tokenizer_config.json + vocab.json/vocab.txt; copy the model's "
            f"tokenizer files"
        )
    weights = rep.get("weights") or {}
    if not weights.get("files"):
        errors.append(
            f"{shown} has no weights: allowed *.safetensors (or *.bin) files; copy the weight files"
        )
    elif weights.get("missing"):
        missing = list(weights["missing"])
        more = ", ..." if len(missing) > 3 else ""
        errors.append(
            f"{shown}: {weights['index']} names {len(missing)} file(s) that are missing "
            f"({', '.join(missing[:3])}{more}): finish copying the model"
        )


def _check_access(shown: str, rep: Mapping[str, Any], user: Mapping[str, Any], errors: list[str]) -> None:
    """x on every directory on the way, r+x on the model directory, r on every file read."""
    real = str(rep.get("realpath") or rep.get("path", ""))
    name = user.get("name", "")
    who = f"the service user {name}" + ("" if user.get("exists") else " (not created yet: judged as 'other')")
    for st in rep.get("dirs", []):
        inside = str(st["path"]) == real
        if not _can(user, st, 5 if inside else 1):
            verb, need, chmod = ("list", "r+x", "rx") if inside else ("traverse", "x", "x")
            errors.append(
                f"{shown}: {who} cannot {verb} {st['path']} (mode {int(st['mode']):04o}): allowed {need} "
                f"for it; chmod o+{chmod} {st['path']} ({FIX_ACCESS})"
            )
            return
    for st in rep.get("files", []):
        if not _can(user, st, 4):
            errors.append(
                f"{shown}: {who} cannot read {st['path']} (mode {int(st['mode']):04o}): "
                f"chmod -R o+r {real} ({FIX_ACCESS})"
            )
            return


def _check_dir(
    var: str, rep: Mapping[str, Any], user: Mapping[str, Any], *, tokenizer: bool, errors: list[str]
) -> None:
    path = str(rep.get("path", ""))
    real = str(rep.get("realpath") or path)
    shown = f"{var}={json.dumps(path)}"
    _check_sandbox(shown, var, rep, errors)
    if not rep.get("exists"):
        errors.append(
            f"{shown} does not exist on this host: allowed an existing model directory; copy the model "
            f"there (config.json, tokenizer, weights) or set {var} to where it is"
        )
        return
    located = shown + (f" (real path {real})" if real != path else "")
    if not rep.get("is_dir"):
        errors.append(
            f"{located} is not a directory: allowed a model directory (config.json, tokenizer, weights)"
        )
        return
    _check_contents(located, rep, tokenizer=tokenizer, errors=errors)
    _check_access(shown, rep, user, errors)


def _check_remote_code(var: str, rep: Mapping[str, Any], errors: list[str]) -> None:
    """A directory whose auto_map names code, while sglang_trust_remote_code is false."""
    refs = list(rep.get("remote_code") or [])
    if not refs:
        return
    more = f" (+{len(refs) - 3} more)" if len(refs) > 3 else ""
    errors.append(
        f"{var}={json.dumps(str(rep.get('path', '')))} names Python code to run when it is loaded "
        f"({'; '.join(refs[:3])}{more}) and sglang_trust_remote_code=false: allowed with it false a "
        f"directory without auto_map; set sglang_trust_remote_code=true to run that code (as the service "
        f"user {UNIT} runs as, in its sandbox; verify's benchmark too), or use a model without custom code"
    )


def _check_drafter(draft: Mapping[str, Any], errors: list[str]) -> None:
    archs = (draft.get("config") or {}).get("architectures") or []
    if not draft.get("config_present") or draft.get("config_error") or set(archs) & set(EAGLE3_ARCHITECTURES):
        return
    errors.append(
        f"sglang_draft_model_path={json.dumps(str(draft.get('path', '')))}: config.json architectures="
        f"{json.dumps(archs)} names no EAGLE-3 draft model: allowed {', '.join(EAGLE3_ARCHITECTURES)} "
        f"(SGLang 0.5.9's EAGLE-3 drafter); point it at an EAGLE-3 drafter of this model, or use "
        f"sglang_preset=baseline"
    )


def _gib(n: float) -> str:
    """Bytes in GiB, or in MiB below 1 GiB (the lab's model)."""
    return f"{n / MIB / 1024:.1f} GiB" if abs(n) >= MIB * 1024 else f"{n / MIB:.2f} MiB"


def decide_models(
    models: Mapping[str, Any],
    *,
    speculative: bool,
    user: Mapping[str, Any],
    gpu_count: int,
    gpu_memory_mib: int,
    tp_size: int,
    mem_fraction_static: float | str | None = None,
    trust_remote_code: bool = True,
) -> Decision:
    """Decide the probe's reports of ``model`` and ``draft`` (:func:`inspect_dir`).

    Refuses a missing/unfit directory, a path the unit's sandbox hides, a file the service user cannot
    read, weights that do not fit ``gpu_memory_mib x mem_fraction_static`` per GPU (weights / tp; the
    drafter's too when speculative) and, when speculative, a drafter whose architectures name no
    EAGLE-3 draft model, and a directory whose ``auto_map`` names code while ``trust_remote_code`` is
    false (sglang_trust_remote_code). Warns when less than 10 % of the budget is left for the KV cache. No GPU
    (``gpu_count`` 0): the size rule is skipped."""
    errors: list[str] = []
    warnings: list[str] = []
    target = models.get("model") or {}
    draft = models.get("draft") or {}
    _check_dir("sglang_model_path", target, user, tokenizer=True, errors=errors)
    if not trust_remote_code:
        _check_remote_code("sglang_model_path", target, errors)
    if speculative:
        _check_dir("sglang_draft_model_path", draft, user, tokenizer=False, errors=errors)
        _check_drafter(draft, errors)
        if not trust_remote_code:
            _check_remote_code("sglang_draft_model_path", draft, errors)
    total = int((target.get("weights") or {}).get("bytes", 0))
    if speculative:
        total += int((draft.get("weights") or {}).get("bytes", 0))
    tp = max(int(tp_size), 1)
    per_gpu = total // tp
    given = mem_fraction_static not in (None, "", "None")
    if given:
        fraction = float(mem_fraction_static)  # type: ignore[arg-type]
        frac_src = f"sglang_mem_fraction_static={fraction}"
    else:
        fraction = mem_fraction_auto(gpu_memory_mib, tp, speculative) if gpu_memory_mib > 0 else 0.0
        frac_src = f"SGLang's own fraction (at most {fraction} with sglang_mem_fraction_static=null)"
    budget = int(gpu_memory_mib * MIB * fraction)
    what = "the model's and the drafter's weights" if speculative else "the model's weights"
    if gpu_count > 0 and total > 0 and gpu_memory_mib > 0:
        rule = (
            f"{what} take {_gib(per_gpu)} per GPU ({_gib(total)} / sglang_tp_size={tp}); the static budget "
            f"is {_gib(budget)} per GPU ({gpu_memory_mib} MiB x {frac_src})"
        )
        if per_gpu > budget:
            errors.append(
                f"{rule}: they do not fit; allowed weights / tp <= GPU memory x mem fraction: raise "
                f"sglang_tp_size (more GPUs), use a smaller or quantized model, or raise "
                f"sglang_mem_fraction_static"
            )
        elif budget - per_gpu < KV_ROOM_WARN * budget:
            warnings.append(
                f"WARNING: {rule}: only {_gib(budget - per_gpu)} ({(budget - per_gpu) * 100 / budget:.0f} % "
                f"< {KV_ROOM_WARN:.0%}) is left for the KV cache; expect few concurrent requests (raise "
                f"sglang_tp_size or sglang_mem_fraction_static)"
            )
    config = target.get("config") or {}
    summary = (
        f"model {', '.join(config.get('architectures') or ['?'])} {config.get('torch_dtype', '?')} "
        f"{_gib(total)} of weights"
    )
    return Decision(
        errors=errors, warnings=warnings, weights_bytes=total, per_gpu_bytes=per_gpu, budget_bytes=budget,
        mem_fraction=fraction, summary=summary,
    )  # fmt: skip
