"""Filters of the sglang_service role: validate inputs, resolve the preset, build the launch argv
and render it as a systemd ExecStart with safe quoting.

Pure Python (no Ansible import): tests/test_service_filters.py loads this file directly.

- ``sglang_service_resolve``: the role's inputs (a dict) -> ``{"spec": {...}, "errors": [...]}``;
  every error names the variable, the bad value (never a secret) and what is allowed.
- ``sglang_service_args``: inputs + resolved spec -> the server flags (list of strings).
- ``sglang_service_exec_start``: argv -> ``ExecStart=`` value, one flag per continuation line.
- ``sglang_service_systemd_quote``: one word quoted for a systemd command line.
- ``sglang_service_env_line``: NAME + value -> a quoted ``Environment=`` assignment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

API_KEY_PLACEHOLDER = "${SGLANG_API_KEY}"
PRESET_KEYS = ("speculative", "algorithm", "num_steps", "eagle_topk", "num_draft_tokens", "spec_v2")
ATTENTION_BACKENDS = (
    "flashinfer",
    "triton",
    "torch_native",
    "fa3",
    "fa4",
    "flashmla",
    "cutlass_mla",
    "trtllm_mla",
    "trtllm_mha",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
)
# Unquoted in a systemd command line: no whitespace, quotes, backslash, `$` (env expansion),
# `%` (specifiers) or `;` (command separator).
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")
_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_ABS_PATH = re.compile(r"^/[^\s\"'\\$%;]*$")
_API_KEY = re.compile(r"^[A-Za-z0-9._~+/=:@-]+$")
API_KEY_MIN_LEN = 16
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|[0-9A-Fa-f:.]+)$")


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def _int(value: Any) -> int | None:
    """An int from an int or a decimal string; None when it is neither (bools are not ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "yes", "on", "1"):
            return True
        if low in ("false", "no", "off", "0"):
            return False
    if isinstance(value, int):
        return bool(value) if value in (0, 1) else None
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _check_spec(cfg: Mapping[str, Any], errors: list[str]) -> dict[str, Any]:  # noqa: PLR0912, PLR0915 - one check per input, flat on purpose
    """Resolve preset + explicit overrides into the speculative settings."""
    presets: Mapping[str, Any] = cfg.get("presets") or {}
    preset = cfg.get("preset")
    spec: dict[str, Any] = {
        "preset": preset,
        "speculative": False,
        "algorithm": None,
        "num_steps": None,
        "eagle_topk": None,
        "num_draft_tokens": None,
        "spec_v2": False,
    }
    if not isinstance(preset, str) or preset not in presets:
        errors.append(
            f"sglang_service_preset (sglang_preset)={_show(preset)} is not a known preset; allowed: "
            f"{', '.join(presets)}"
        )
        return spec
    allowed = cfg.get("presets_allowed")
    if allowed and preset not in allowed:
        errors.append(
            f"sglang_service_preset (sglang_preset)={preset!r} is not allowed here; allowed: "
            f"{', '.join(allowed)}"
        )
        return spec
    base: Mapping[str, Any] = presets[preset] or {}
    unknown = sorted(set(base) - set(PRESET_KEYS))
    if unknown:
        errors.append(
            f"sglang_service_presets.{preset} has unknown keys {unknown}; allowed: {', '.join(PRESET_KEYS)}"
        )
    spec["speculative"] = bool(_bool(base.get("speculative", False)))
    explicit_v2 = cfg.get("spec_v2")
    if _unset(explicit_v2):
        v2 = _bool(base.get("spec_v2", False))
    else:
        v2 = _bool(explicit_v2)
        if v2 is None:
            errors.append(
                f"sglang_service_spec_v2 (sglang_spec_v2)={_show(explicit_v2)} is not a boolean; "
                "allowed: true, false, ''"
            )
    spec["spec_v2"] = bool(v2)
    if not spec["speculative"]:
        if spec["spec_v2"]:
            errors.append(
                f"sglang_service_spec_v2 (sglang_spec_v2)=true with preset {preset!r}: spec v2 "
                "(SGLANG_ENABLE_SPEC_V2) needs "
                "speculative decoding; allowed: false or a speculative preset (production, tree)"
            )
        return spec

    spec["algorithm"] = str(base.get("algorithm") or "EAGLE3")
    resolved: dict[str, int | None] = {}
    for key, var in (
        ("num_steps", "sglang_service_speculative_num_steps (sglang_speculative_num_steps)"),
        ("eagle_topk", "sglang_service_speculative_eagle_topk (sglang_speculative_eagle_topk)"),
        (
            "num_draft_tokens",
            "sglang_service_speculative_num_draft_tokens (sglang_speculative_num_draft_tokens)",
        ),
    ):
        raw = cfg.get(key)
        if _unset(raw):
            resolved[key] = _int(base.get(key)) if not _unset(base.get(key)) else None
            continue
        num = _int(raw)
        if num is None or num < 1:
            errors.append(f"{var}={_show(raw)} is not a positive integer; allowed: an integer >= 1 or ''")
        resolved[key] = num
    steps, topk, draft = resolved["num_steps"], resolved["eagle_topk"], resolved["num_draft_tokens"]
    if steps is None:
        errors.append(
            "sglang_service_speculative_num_steps (sglang_speculative_num_steps) is unset and the "
            "preset has none; allowed: >= 1"
        )
    if topk is None:
        errors.append(
            "sglang_service_speculative_eagle_topk (sglang_speculative_eagle_topk) is unset and the "
            "preset has none; allowed: >= 1"
        )
    if steps is not None and topk is not None:
        if topk == 1 and _unset(cfg.get("num_draft_tokens")):
            draft = steps + 1  # chain: steps+1, whatever the preset says for its own steps
        if draft is None:
            errors.append(
                "sglang_service_speculative_num_draft_tokens (sglang_speculative_num_draft_tokens) "
                "is unset and the preset has none "
                f"(topk={topk}); allowed: an integer >= 2"
            )
        elif topk == 1 and draft != steps + 1:
            errors.append(
                "sglang_service_speculative_num_draft_tokens "
                f"(sglang_speculative_num_draft_tokens)={draft} with eagle_topk=1 and num_steps={steps}: "
                f"chain speculation drafts steps+1 tokens; allowed: {steps + 1}"
            )
        elif topk > 1 and draft < 2:
            errors.append(
                "sglang_service_speculative_num_draft_tokens "
                f"(sglang_speculative_num_draft_tokens)={draft} with eagle_topk={topk}; allowed: >= 2"
            )
        if spec["spec_v2"] and topk != 1:
            errors.append(
                f"sglang_service_speculative_eagle_topk (sglang_speculative_eagle_topk)={topk} with "
                "spec v2 (sglang_service_spec_v2 (sglang_spec_v2)=true, "
                f"preset {preset!r}): SGLang's overlap worker rejects topk > 1; allowed: eagle_topk=1, "
                "or sglang_service_spec_v2 (sglang_spec_v2)=false (v1 worker, e.g. preset tree)"
            )
    spec.update(num_steps=steps, eagle_topk=topk, num_draft_tokens=draft)
    return spec


def sglang_service_resolve(cfg: Mapping[str, Any]) -> dict[str, Any]:  # noqa: PLR0912, PLR0915 - one check per input
    """Validate the role inputs and resolve the speculative settings."""
    errors: list[str] = []
    spec = _check_spec(cfg, errors)

    name = cfg.get("name")
    if not isinstance(name, str) or not _UNIT_NAME.match(name) or name.endswith(".service"):
        errors.append(
            f"sglang_service_name={_show(name)} is not a unit name; allowed: letters, digits, : _ . @ - "
            "(without the .service suffix)"
        )
    for var, key in (("sglang_service_user", "user"), ("sglang_service_group", "group")):
        val = cfg.get(key)
        if not isinstance(val, str) or not _USER_NAME.match(val) or val == "root":
            errors.append(
                f"{var}={_show(val)} is not a system account name (and not root); allowed: [a-z_][a-z0-9_-]*"
            )

    paths = [
        ("sglang_service_model_path (sglang_model_path)", cfg.get("model_path"), True),
        ("sglang_service_python", cfg.get("python"), True),
        ("sglang_service_nccl_env_file", cfg.get("nccl_env_file"), True),
        ("sglang_service_api_key_file", cfg.get("api_key_file"), True),
        ("sglang_service_launch_args_file", cfg.get("launch_args_file"), True),
        ("sglang_service_cuda_home", cfg.get("cuda_home"), False),
        (
            "sglang_service_draft_model_path (sglang_draft_model_path)",
            cfg.get("draft_model_path"),
            spec["speculative"],
        ),
    ]
    for var, val, required in paths:
        if not required and _unset(val):
            continue
        if not isinstance(val, str) or not _ABS_PATH.match(val) or val.rstrip("/") == "":
            errors.append(
                f"{var}={_show(val)} is not an absolute path; allowed: /absolute/path without whitespace, "
                "quotes, backslash, $, % or ;"
            )
    path_dirs = cfg.get("path_dirs")
    if not isinstance(path_dirs, list) or not all(
        isinstance(p, str) and _ABS_PATH.match(p) and ":" not in p for p in path_dirs
    ):
        errors.append(f"sglang_service_path_dirs={_show(path_dirs)} is not a list of absolute directories")

    tp = _int(cfg.get("tp_size"))
    if tp is None or tp < 1:
        errors.append(
            f"sglang_service_tp_size (sglang_tp_size)={_show(cfg.get('tp_size'))} is not a positive "
            "integer; allowed: >= 1"
        )

    port = _int(cfg.get("port"))
    if port is None or not 1024 <= port <= 65535:
        errors.append(
            f"sglang_service_port={_show(cfg.get('port'))} is out of range; allowed: 1024-65535 "
            "(the service runs without CAP_NET_BIND_SERVICE)"
        )
    host = cfg.get("host")
    if not isinstance(host, str) or not host or not _HOST.match(host):
        errors.append(
            f"sglang_service_host={_show(host)} is not an IP address or host name; allowed: e.g. 127.0.0.1"
        )

    mem = cfg.get("mem_fraction_static")
    if not _unset(mem):
        memf = _float(mem)
        if memf is None or not 0.0 < memf < 1.0:
            errors.append(
                f"sglang_service_mem_fraction_static={_show(mem)}; allowed: a number in (0, 1) or ''"
            )
    bs = _int(cfg.get("cuda_graph_max_bs"))
    if bs is None or bs < 1:
        errors.append(
            f"sglang_service_cuda_graph_max_bs={_show(cfg.get('cuda_graph_max_bs'))}; allowed: >= 1"
        )
    backend = cfg.get("attention_backend")
    if backend not in ATTENTION_BACKENDS:
        errors.append(
            f"sglang_service_attention_backend={_show(backend)}; allowed: {', '.join(ATTENTION_BACKENDS)}"
        )
    thr = cfg.get("speculative_disable_batch_threshold")
    if not _unset(thr):
        thr_i = _int(thr)
        if thr_i is None or thr_i < 0:
            errors.append(
                f"sglang_service_speculative_disable_batch_threshold={_show(thr)}; allowed: an integer "
                ">= 0 or ''"
            )
    for var, key in (
        ("sglang_service_trust_remote_code (sglang_trust_remote_code)", "trust_remote_code"),
        ("sglang_service_enable_flashinfer_allreduce_fusion", "allreduce_fusion"),
        ("sglang_service_enable_torch_symm_mem", "torch_symm_mem"),
        ("sglang_api_key_required", "api_key_required"),
    ):
        if _bool(cfg.get(key)) is None:
            errors.append(f"{var}={_show(cfg.get(key))} is not a boolean; allowed: true, false")
    served = cfg.get("served_model_name")
    if not _unset(served) and (not isinstance(served, str) or any(c.isspace() for c in served)):
        errors.append(
            f"sglang_service_served_model_name (sglang_served_model_name)={_show(served)}; allowed: a "
            "name without whitespace"
        )

    key = cfg.get("api_key")
    if _unset(key):
        if _bool(cfg.get("api_key_required")):
            errors.append(
                "sglang_api_key is not set but sglang_api_key_required=true; allowed: a key of at least "
                f"{API_KEY_MIN_LEN} characters (put it in an ansible-vault file), or "
                "sglang_api_key_required=false"
            )
    elif not isinstance(key, str) or len(key) < API_KEY_MIN_LEN or not _API_KEY.match(key):
        # Never print the value of a secret.
        errors.append(
            f"sglang_api_key (value hidden) is invalid; allowed: at least {API_KEY_MIN_LEN} characters "
            "of A-Z a-z 0-9 . _ ~ + / = : @ -"
        )

    override = cfg.get("exec_override")
    if not isinstance(override, list) or (
        override
        and (
            not all(isinstance(w, str) and w and "\n" not in w for w in override)
            or not _ABS_PATH.match(str(override[0]))
        )
    ):
        errors.append(
            f"sglang_service_exec_override={_show(override)}; allowed: [] or a list of strings whose first "
            "item is an absolute executable path"
        )
    extra = cfg.get("extra_args")
    if not isinstance(extra, list) or not all(isinstance(w, str | int | float) and str(w) for w in extra):
        errors.append(f"sglang_service_extra_args={_show(extra)}; allowed: a list of strings")
    env = cfg.get("environment_extra")
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and _ENV_NAME.match(k) for k in env):
        errors.append(f"sglang_service_environment_extra={_show(env)}; allowed: a mapping NAME: value")
    for var, key2 in (
        ("sglang_service_timeout_start_sec", "timeout_start_sec"),
        ("sglang_service_health_timeout", "health_timeout"),
        ("sglang_service_restart_sec", "restart_sec"),
        ("sglang_service_start_limit_interval_sec", "start_limit_interval_sec"),
        ("sglang_service_start_limit_burst", "start_limit_burst"),
    ):
        num = _int(cfg.get(key2))
        if num is None or num < 1:
            errors.append(f"{var}={_show(cfg.get(key2))} is not a positive integer; allowed: >= 1")
    return {"spec": spec, "errors": errors}


def sglang_service_args(cfg: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """The server flags (everything after `python -m sglang.launch_server`)."""
    args = ["--model-path", str(cfg["model_path"]), "--tp-size", str(_int(cfg["tp_size"]))]
    if spec.get("speculative"):
        args += [
            "--speculative-algorithm", str(spec["algorithm"]),
            "--speculative-draft-model-path", str(cfg["draft_model_path"]),
            "--speculative-num-steps", str(spec["num_steps"]),
            "--speculative-eagle-topk", str(spec["eagle_topk"]),
            "--speculative-num-draft-tokens", str(spec["num_draft_tokens"]),
        ]  # fmt: skip
    args += ["--attention-backend", str(cfg["attention_backend"])]
    args += ["--cuda-graph-max-bs", str(_int(cfg["cuda_graph_max_bs"]))]
    if _bool(cfg.get("allreduce_fusion")):
        args.append("--enable-flashinfer-allreduce-fusion")
    if _bool(cfg.get("torch_symm_mem")):
        args.append("--enable-torch-symm-mem")
    if not _unset(cfg.get("mem_fraction_static")):
        args += ["--mem-fraction-static", str(cfg["mem_fraction_static"])]
    args += ["--host", str(cfg["host"]), "--port", str(_int(cfg["port"]))]
    if not _unset(cfg.get("served_model_name")):
        args += ["--served-model-name", str(cfg["served_model_name"])]
    if _bool(cfg.get("trust_remote_code")):
        args.append("--trust-remote-code")
    thr = cfg.get("speculative_disable_batch_threshold")
    if spec.get("speculative") and not _unset(thr):
        args += ["--speculative-disable-batch-threshold", str(_int(thr))]
    args += [str(w) for w in cfg.get("extra_args") or []]
    if not _unset(cfg.get("api_key")):
        args += ["--api-key", API_KEY_PLACEHOLDER]
    return args


def sglang_service_systemd_quote(word: Any, raw: Sequence[str] = (API_KEY_PLACEHOLDER,)) -> str:
    """Quote one word for a systemd command line (ExecStart=).

    `$` and `%` are doubled so systemd neither expands variables nor specifiers in them, except
    for the exact words listed in ``raw`` (the API key placeholder, expanded by systemd from the
    EnvironmentFile into exactly one argument).
    """
    text = str(word)
    if text in raw:
        return text
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"a systemd command line word cannot contain newlines or NUL: {text!r}")
    text = text.replace("$", "$$").replace("%", "%%")
    if _SAFE_WORD.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sglang_service_exec_start(argv: Sequence[Any], indent: str = "    ") -> str:
    """ExecStart value: launcher on the first line, then one flag (with its values) per line."""
    words = [str(w) for w in argv]
    if not words:
        raise ValueError("empty argv")
    first = 1
    # The launcher: `python -m module` stays on the first line.
    while first < len(words) and not words[first].startswith("--"):
        first += 1
    lines = [" ".join(sglang_service_systemd_quote(w) for w in words[:first])]
    group: list[str] = []
    for word in words[first:]:
        if word.startswith("--") and group:
            lines.append(" ".join(group))
            group = []
        group.append(sglang_service_systemd_quote(word))
    if group:
        lines.append(" ".join(group))
    return (" \\\n" + indent).join(lines)


def sglang_service_env_line(name: str, value: Any) -> str:
    """`"NAME=value"` for Environment=: quoted, `%` doubled (specifiers); `$` is literal there."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"not an environment variable name: {name!r}")
    text = f"{name}={value}"
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"environment value of {name} contains a newline or NUL")
    return '"' + text.replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"') + '"'


class FilterModule:
    """Ansible entry point."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "sglang_service_resolve": sglang_service_resolve,
            "sglang_service_args": sglang_service_args,
            "sglang_service_exec_start": sglang_service_exec_start,
            "sglang_service_systemd_quote": sglang_service_systemd_quote,
            "sglang_service_env_line": sglang_service_env_line,
        }
