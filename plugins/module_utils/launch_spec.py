"""The one resolved launch spec of an SGLang deployment: inputs -> argv, environment, endpoint, auth.

Pure Python (no Ansible import). The filter ``sglang.deploy.launch_spec`` (plugins/filter/launch_spec.py)
exposes :func:`resolve`; the preflight role calls it once, after validating the inputs, and exports the
result as the fact ``preflight_launch_spec``. Every later consumer reads that fact and nothing else builds
flags: the stack role's parser check, the systemd unit, ``launch-args.json``, the verify role and the
production document.

:func:`resolve` returns ``{"spec": {...}, "errors": [...]}``. Every error names the variable, its bad
value (never the API key) and what is allowed. The spec never holds the API key: with auth on, the argv
ends in ``--config %d/sglang-config.yaml``, SGLang's own YAML flag file (``api-key: <key>``) that systemd
hands the service through ``LoadCredential=`` in its private credentials directory (``%d``): the key is
on no command line, in no environment and in no unit.
"""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils import multinode
from ansible_collections.sglang.deploy.plugins.module_utils.choices import (
    ATTENTION_BACKENDS,
    INTERCONNECTS,
    NCCL_PROFILES,
)
from ansible_collections.sglang.deploy.plugins.module_utils.convert import PORT_ALLOWED, as_port, valid_host
from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_bool as _bool
from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_float as _float
from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_int as _int
from ansible_collections.sglang.deploy.plugins.module_utils.convert import show as _show
from ansible_collections.sglang.deploy.plugins.module_utils.convert import unset as _unset
from ansible_collections.sglang.deploy.plugins.module_utils.nccl_profile import resolve_profile
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_argv import describe as _argv_describe
from ansible_collections.sglang.deploy.plugins.module_utils.sglang_argv import parse_errors as _argv_errors
from ansible_collections.sglang.deploy.plugins.module_utils.text_checks import (
    CONTROL,
    DOTDOT_ALLOWED,
    has_dotdot,
)

SCHEMA = 1
API_KEY_ENV = "SGLANG_API_KEY"  # no longer set anywhere; refused in sglang_launch_environment
# The key travels in SGLang's own flag file (``--config FILE.yaml``; its ConfigArgumentMerger wants a
# .yaml/.yml name and turns ``api-key: K`` into ``--api-key K`` inside the process, never in argv),
# delivered by systemd's LoadCredential= under this credential name; %d = the credentials directory.
CONFIG_CREDENTIAL = "sglang-config.yaml"
CONFIG_ARG = "%d/" + CONFIG_CREDENTIAL
CONFIG_KEY = "api-key"
CONFIG_SUFFIXES = (".yaml", ".yml")
API_KEY_MIN_LEN = 16
API_KEY_MAX_LEN = 256
API_KEY_CHARS = "A-Z a-z 0-9 . _ ~ + / = : @ -"
# The one API key rule (the service's sglang_api_key here, the router's sglang_router_api_key through the
# Jinja test sglang.deploy.api_key): a key starting with `-` is read by SGLang's argparse as an option
# (`--api-key -k...` -> "expected one argument") and the server refuses to start.
API_KEY_ALLOWED = (
    f"at least {API_KEY_MIN_LEN} characters (at most {API_KEY_MAX_LEN}) of {API_KEY_CHARS}, "
    "not starting with - (SGLang's parser would take the key for an option)"
)
API_KEY_PLACEHOLDER_PREFIX = "CHANGE-ME"  # inventory/example/.../vault.yml.example
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
LAUNCH_MODULE = "sglang.launch_server"
PRESET_KEYS = ("speculative", "algorithm", "num_steps", "eagle_topk", "num_draft_tokens", "spec_v2")
TP_SIZE_MAX = 64
DRAFT_VAR = "sglang_speculative_num_draft_tokens"
ROOT_VAR = "sglang_root (launcher <sglang_root>/current/venv/bin/python)"

# A path that goes unquoted into a unit, an env file and a shell command: no whitespace, quotes,
# backslash, `$` (expansion), `%` (systemd specifiers), `;`, `#`, backquote or control characters.
_SAFE_PATH = re.compile(r"/[A-Za-z0-9_@+=:,./-]*")
_SAFE_PATH_CHARS = "letters, digits and _ @ + = : , . / -"
_SERVED_NAME = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
_API_KEY = re.compile(r"[A-Za-z0-9._~+/=:@][A-Za-z0-9._~+/=:@-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL = CONTROL  # the one control-character rule (plugins/module_utils/text_checks.py)
# Bind addresses that only this host reaches: with authentication off anything else is refused unless
# sglang_allow_unauthenticated_bind (every client of the network could use the server).
LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost", "ip6-loopback")

# Why each flag is there (the production document's "Key Flags Explained"). The figures are the
# seed's measurements (8x RTX PRO 6000 Blackwell over PCIe, TP 8).
FLAG_REASONS = {
    "--model-path": "the target model served",
    "--tp-size": "tensor parallel across the GPUs of the host: every layer ends in an all-reduce",
    "--speculative-algorithm": (
        "EAGLE-3 speculative decoding: a small drafter proposes tokens the target verifies"
    ),
    "--speculative-draft-model-path": "the EAGLE-3 drafter trained for the target model",
    "--speculative-num-steps": "draft steps per verify step (2: the seed's measured optimum)",
    "--speculative-eagle-topk": (
        "1 = chain speculation: 3 draft tokens per step instead of a tree's 16, so the verify "
        "all-reduce stays small; required by the spec v2 overlap worker"
    ),
    "--speculative-num-draft-tokens": "tokens verified per step (chain: num_steps + 1)",
    "--speculative-disable-batch-threshold": (
        "patched flag: skip speculation above this running batch size, where verify no longer pays off"
    ),
    "--attention-backend": "flashinfer attention kernels: ~10% faster than triton in the seed's runs",
    "--cuda-graph-max-bs": (
        "CUDA graphs captured up to this batch size: 128 beat the default by 9% in the seed's runs"
    ),
    "--enable-flashinfer-allreduce-fusion": (
        "fuses all-reduce with the following RMSNorm (SM90/SM100 upstream; SM120 with patches 0001/0002)"
    ),
    "--enable-torch-symm-mem": "all-reduce through torch symmetric memory (SM120 with patch 0003)",
    "--mem-fraction-static": "share of GPU memory for weights + KV cache (unset: SGLang picks)",
    "--host": "address the HTTP server binds to",
    "--port": "HTTP port",
    "--served-model-name": "model name the API reports and accepts",
    "--trust-remote-code": "the model ships its own modelling code",
    "--enable-metrics": (
        "Prometheus /metrics (sglang:num_running_reqs, sglang:num_queue_reqs): a rolling upgrade drains "
        "a replica until both are 0 before it stops it"
    ),
    "--api-key": "every request must carry this key (never a flag here: it comes from --config)",
    "--config": (
        "SGLang's YAML flag file holding api-key, handed to the service by systemd LoadCredential= "
        "(private credentials directory %d): the key is on no command line"
    ),
}


class _Errors(list[str]):
    def bad(self, var: str, value: Any, allowed: str) -> None:
        self.append(f"{var}={_show(value)} is not valid: allowed {allowed}")


def _check_path(errors: _Errors, var: str, value: Any, *, required: bool = True) -> str:
    if _unset(value) and not required:
        return ""
    if not isinstance(value, str) or not _SAFE_PATH.fullmatch(value) or value.rstrip("/") == "":
        errors.bad(var, value, f"an absolute path other than / made of {_SAFE_PATH_CHARS}")
        return ""
    if has_dotdot(value):
        errors.bad(var, value, DOTDOT_ALLOWED)
        return ""
    return value


def _speculative(cfg: Mapping[str, Any], errors: _Errors) -> dict[str, Any]:  # noqa: PLR0912 - one check per knob
    """Preset + explicit knobs -> the speculative settings."""
    presets: Mapping[str, Any] = cfg.get("presets") or {}
    allowed = cfg.get("presets_allowed") or list(presets)
    preset = cfg.get("preset")
    off = {
        "enabled": False,
        "algorithm": None,
        "num_steps": None,
        "eagle_topk": None,
        "num_draft_tokens": None,
        "spec_v2": False,
    }
    if not isinstance(allowed, list) or not all(isinstance(p, str) and p in presets for p in allowed):
        names = ", ".join(presets)
        errors.bad(
            "sglang_presets_allowed", allowed, f"a list of preset names defined in sglang_presets ({names})"
        )
        return off
    if not isinstance(preset, str) or preset not in allowed:
        errors.bad("sglang_preset", preset, f"one of sglang_presets_allowed: {', '.join(allowed)}")
        return off
    base: Mapping[str, Any] = presets[preset] or {}
    unknown = sorted(set(base) - set(PRESET_KEYS))
    if unknown:
        keys = ", ".join(PRESET_KEYS)
        errors.bad(f"sglang_presets.{preset}", dict(base), f"the keys {keys} (unknown: {unknown})")
    enabled = bool(_bool(base.get("speculative", False)))
    raw_v2 = cfg.get("spec_v2")
    v2 = _bool(base.get("spec_v2", False)) if _unset(raw_v2) else _bool(raw_v2)
    if v2 is None:
        errors.bad("sglang_spec_v2", raw_v2, "true, false, or null (take it from the preset)")
        v2 = False
    if not enabled:
        if v2:
            errors.bad(
                "sglang_spec_v2",
                raw_v2,
                f"false or null with sglang_preset={preset!r} (spec v2 is the speculative overlap worker: "
                "it needs a speculative preset, production or tree)",
            )
        return off
    knobs: dict[str, int | None] = {}
    for key, var in (
        ("num_steps", "sglang_speculative_num_steps"),
        ("eagle_topk", "sglang_speculative_eagle_topk"),
        ("num_draft_tokens", "sglang_speculative_num_draft_tokens"),
    ):
        raw = cfg.get(key)
        if _unset(raw):
            knobs[key] = None if _unset(base.get(key)) else _int(base.get(key))
            continue
        num = _int(raw)
        if num is None or num < 1:
            errors.bad(var, raw, "a positive integer, or null to take it from sglang_preset")
        knobs[key] = num
    steps, topk, draft = knobs["num_steps"], knobs["eagle_topk"], knobs["num_draft_tokens"]
    if steps is None or topk is None:
        return {**off, "enabled": True}
    if topk == 1 and _unset(cfg.get("num_draft_tokens")):
        draft = steps + 1  # a chain drafts steps + 1 tokens, whatever the preset says
    if draft is None:
        errors.bad(DRAFT_VAR, cfg.get("num_draft_tokens"), ">= 2 (the preset has none)")
    elif topk == 1 and draft != steps + 1:
        errors.bad(
            DRAFT_VAR,
            cfg.get("num_draft_tokens"),
            f"{steps + 1} or null with eagle_topk 1 and num_steps {steps} "
            "(chain speculation drafts num_steps + 1 tokens)",
        )
    elif topk > 1 and draft < 2:
        errors.bad(DRAFT_VAR, cfg.get("num_draft_tokens"), f">= 2 with eagle_topk {topk}")
    if v2 and topk != 1:
        errors.bad(
            "sglang_speculative_eagle_topk",
            cfg.get("eagle_topk") if not _unset(cfg.get("eagle_topk")) else topk,
            f"1 or null with spec v2 (sglang_preset={preset!r}, sglang_spec_v2={_show(raw_v2)}): "
            "SGLang's overlap worker rejects topk > 1; for topk > 1 use sglang_preset tree (spec v2 off)",
        )
    return {
        "enabled": True,
        "algorithm": str(base.get("algorithm") or "EAGLE3"),
        "num_steps": steps,
        "eagle_topk": topk,
        "num_draft_tokens": draft,
        "spec_v2": bool(v2),
    }


def _check_inputs(cfg: Mapping[str, Any], errors: _Errors, speculative: bool) -> dict[str, Any]:  # noqa: PLR0912, PLR0915 - one check per input, flat on purpose
    out: dict[str, Any] = {}
    out["model_path"] = _check_path(errors, "sglang_model_path", cfg.get("model_path"))
    draft = cfg.get("draft_model_path")
    if speculative or not _unset(draft):
        if speculative and _unset(draft):
            errors.bad(
                "sglang_draft_model_path",
                draft,
                "an absolute path (required unless sglang_preset is baseline)",
            )
            out["draft_model_path"] = ""
        else:
            out["draft_model_path"] = _check_path(errors, "sglang_draft_model_path", draft)
    else:
        out["draft_model_path"] = ""
    served = cfg.get("served_model_name")
    if _unset(served):
        out["served_model_name"] = ""
    elif not isinstance(served, str) or not _SERVED_NAME.fullmatch(served):
        errors.bad(
            "sglang_served_model_name",
            served,
            f'null/"" (SGLang uses the model path) or a name of {_SAFE_PATH_CHARS}',
        )
        out["served_model_name"] = ""
    else:
        out["served_model_name"] = served
    tp = _int(cfg.get("tp_size"))
    tp_max = _int(cfg.get("tp_size_max")) or TP_SIZE_MAX
    if tp is None or not 1 <= tp <= tp_max:
        errors.bad(
            "sglang_tp_size",
            cfg.get("tp_size"),
            f"an integer 1-{tp_max} (on GPU hosts: the GPU count, or a divisor of it)",
        )
    out["tp_size"] = tp
    host = cfg.get("host")
    if not valid_host(host):
        errors.bad(
            "sglang_service_host",
            host,
            "an IPv4/IPv6 address (127.0.0.1, 0.0.0.0, ::1) or an RFC 1123 host name",
        )
    out["host"] = host
    port = as_port(cfg.get("port"))
    if port is None:
        errors.bad("sglang_service_port", cfg.get("port"), PORT_ALLOWED)
    out["port"] = port
    backend = cfg.get("attention_backend")
    if backend not in ATTENTION_BACKENDS:
        errors.bad("sglang_attention_backend", backend, f"one of {', '.join(ATTENTION_BACKENDS)}")
    out["attention_backend"] = backend
    bs = _int(cfg.get("cuda_graph_max_bs"))
    if bs is None or not 1 <= bs <= 4096:
        errors.bad("sglang_cuda_graph_max_bs", cfg.get("cuda_graph_max_bs"), "an integer 1-4096")
    out["cuda_graph_max_bs"] = bs
    mem = cfg.get("mem_fraction_static")
    if _unset(mem):
        out["mem_fraction_static"] = None
    else:
        memf = _float(mem)
        if memf is None or not math.isfinite(memf) or not 0.0 < memf < 1.0:
            errors.bad(
                "sglang_mem_fraction_static", mem, "null (SGLang picks) or a number in (0, 1), e.g. 0.85"
            )
        out["mem_fraction_static"] = memf
    thr = cfg.get("speculative_disable_batch_threshold")
    if _unset(thr):
        out["disable_batch_threshold"] = None
    else:
        thr_i = _int(thr)
        if thr_i is None or thr_i < 0:
            errors.bad(
                "sglang_speculative_disable_batch_threshold", thr, "null (not passed) or an integer >= 0"
            )
        out["disable_batch_threshold"] = thr_i
    for var, key in (
        ("sglang_trust_remote_code", "trust_remote_code"),
        ("sglang_enable_flashinfer_allreduce_fusion", "allreduce_fusion"),
        ("sglang_enable_torch_symm_mem", "torch_symm_mem"),
        ("sglang_api_key_required", "api_key_required"),
    ):
        val = _bool(cfg.get(key))
        if val is None:
            errors.bad(var, cfg.get(key), "true or false")
        out[key] = bool(val)
    out["python"] = _check_path(errors, ROOT_VAR, cfg.get("python"))
    out["nccl_env_file"] = _check_path(errors, "sglang_nccl_env_file", cfg.get("nccl_env_file"))
    out["api_key_file"] = _check_path(errors, "sglang_api_key_file", cfg.get("api_key_file"))
    return out


def _check_key(cfg: Mapping[str, Any], errors: _Errors, required: bool) -> bool:
    """Whether a key is configured; its value never reaches a message."""
    key = cfg.get("api_key")
    if _unset(key):
        if required:
            errors.append(
                "sglang_api_key is empty or unset (value not printed) while sglang_api_key_required=true: "
                f"allowed a key of {API_KEY_ALLOWED} (put it in an "
                "ansible-vault file, e.g. group_vars/sglang_servers/vault.yml), "
                "or sglang_api_key_required false"
            )
        return False
    if isinstance(key, str) and key.upper().startswith(API_KEY_PLACEHOLDER_PREFIX):
        errors.append(
            "sglang_api_key (value not printed) is still the placeholder of vault.yml.example: allowed a key "
            f"of your own, {API_KEY_ALLOWED} "
            "(e.g. `openssl rand -hex 32`)"
        )
    elif not valid_api_key(key):
        what = "not a string" if not isinstance(key, str) else f"{len(key)} characters"
        if isinstance(key, str) and key.startswith("-"):
            what += ", starting with -"
        errors.append(f"sglang_api_key (value not printed; {what}) is not valid: allowed {API_KEY_ALLOWED}")
    return True


def valid_api_key(key: Any) -> bool:
    """The one API key rule: API_KEY_MIN_LEN to API_KEY_MAX_LEN characters of API_KEY_CHARS, no leading -."""
    return (
        isinstance(key, str)
        and API_KEY_MIN_LEN <= len(key) <= API_KEY_MAX_LEN
        and _API_KEY.fullmatch(key) is not None
    )


def _check_key_file(cfg: Mapping[str, Any], errors: _Errors) -> None:
    """The key's YAML file: SGLang's --config (the shell command of the document) wants .yaml/.yml."""
    path = cfg.get("api_key_file")
    if isinstance(path, str) and not path.endswith(CONFIG_SUFFIXES):
        errors.bad(
            "sglang_api_key_file",
            path,
            "a path ending in .yaml or .yml (SGLang's --config reads only YAML files)",
        )


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


# SGLang 0.5.9's other option strings for flags the spec sets (server_args.py), and `--config` (a YAML
# file of flags merged into the argv): refused in sglang_extra_args like the flags themselves.
FLAG_ALIASES = {
    "--model": "--model-path",
    "--tensor-parallel-size": "--tp-size",
    "--speculative-draft-model": "--speculative-draft-model-path",
    "--config": "--config",
}


# --- multi-node section (plugins/module_utils/multinode.py holds the rules) ---------------------------
FLAG_REASONS.update(multinode.FLAG_REASONS)
FLAG_ALIASES.update(multinode.FLAG_ALIASES)


def _multinode(cfg: Mapping[str, Any], errors: _Errors, v: Mapping[str, Any]) -> dict[str, Any]:
    """The replica plan of this host (cfg["multinode"], see multinode.plan); one node without it."""
    section = cfg.get("multinode")
    if not isinstance(section, Mapping):
        return dict(multinode.single(None))
    result = multinode.plan(section)
    errors.extend(result["errors"])
    errors.extend(multinode.check_tp(result["plan"], v["tp_size"]))
    errors.extend(multinode.check_ports(result["plan"], v["port"]))
    return dict(result["plan"])


# --- end of the multi-node section ---------------------------------------------------------------


def _managed_flags() -> set[str]:
    return set(FLAG_REASONS)


def owned_flag(word: str) -> str | None:
    """The spec's flag an extra word would set, as far as preflight can tell without SGLang.

    Exact names, SGLang's aliases (FLAG_ALIASES), ``--flag=value``, any ``--speculative-*`` flag,
    and any prefix of an owned flag (SGLang's parser resolves unique abbreviations: ``--hos`` is
    ``--host``). The stack's launch check (roles/sglang_stack/files/stack_check.py) maps every
    extra flag to its destination with SGLang's own parser and is the authoritative check.
    """
    if not word.startswith("--") or word == "--":
        return None
    name = word.split("=", 1)[0]
    owned = _managed_flags() | set(FLAG_ALIASES)
    if name in owned:
        return FLAG_ALIASES.get(name, name)
    if name.startswith("--speculative-"):
        return name
    prefixed = sorted(flag for flag in owned if flag.startswith(name))
    return FLAG_ALIASES.get(prefixed[0], prefixed[0]) if prefixed else None


# SGLang's --admin-api-key: a secret that sglang_extra_args would put on the command line (the process
# list, the unit, the journal). The spec has no credential path for it (the --config credential holds
# api-key only), so it is refused; its prefixes count (SGLang's parser resolves `--admin-api` to it).
ADMIN_KEY_FLAG = "--admin-api-key"
ADMIN_KEY_MIN_PREFIX = "--admin"


def _admin_key_flag(word: str) -> bool:
    name = word.split("=", 1)[0]
    return name.startswith(ADMIN_KEY_MIN_PREFIX) and ADMIN_KEY_FLAG.startswith(name)


def _check_extra(cfg: Mapping[str, Any], errors: _Errors) -> tuple[list[str], dict[str, str]]:
    extra = cfg.get("extra_args")
    args: list[str] = []
    if extra is None:
        extra = []
    if not isinstance(extra, list) or not all(_scalar(w) for w in extra):
        errors.bad("sglang_extra_args", extra, "a list of strings (more server flags and their values)")
    else:
        for word in (str(w) for w in extra):
            if not word or _CONTROL.search(word):
                errors.bad("sglang_extra_args", word, "non-empty strings without newlines or control chars")
            elif _admin_key_flag(word):
                errors.append(
                    f"sglang_extra_args holds {word.split('=', 1)[0]} (value not printed): not allowed: "
                    "a key in sglang_extra_args would be on the server's command line (process list, "
                    "unit file, journal), and the deployment has no credential path for SGLang's admin "
                    "key (only sglang_api_key travels as a credential, in the --config file): leave it out"
                )
            elif owned_flag(word) is not None:
                errors.bad(
                    "sglang_extra_args",
                    word,
                    f"flags the spec does not already set (it sets {owned_flag(word)}: set that flag's "
                    "sglang_* variable instead; aliases and abbreviations count as the flag)",
                )
            else:
                args.append(word)
        if len(args) == len(extra):
            # every word passed the spec's own rules: now SGLang's parser, from its generated flag table
            for problem in _argv_describe(_argv_errors(args)):
                errors.append(f"sglang_extra_args {problem}")
    return args, _check_env(cfg, errors)


def _check_env(cfg: Mapping[str, Any], errors: _Errors) -> dict[str, str]:
    env_in = cfg.get("environment")
    env: dict[str, str] = {}
    if env_in is None:
        env_in = {}
    if not isinstance(env_in, Mapping):
        errors.bad("sglang_launch_environment", env_in, "a mapping NAME: value")
        return env
    for name, value in env_in.items():
        text = "1" if value is True else "0" if value is False else str(value)
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or name in (SPEC_V2_ENV, API_KEY_ENV):
            errors.bad(
                "sglang_launch_environment",
                name,
                f"variable names [A-Za-z_][A-Za-z0-9_]* other than {SPEC_V2_ENV} and {API_KEY_ENV} "
                "(set by the spec)",
            )
        elif not _scalar(value) or _CONTROL.search(text) or '"' in text or "\\" in text:
            errors.bad(
                f"sglang_launch_environment.{name}",
                value,
                "a scalar without newlines, control characters, double quotes or backslashes",
            )
        else:
            env[name] = text
    return env


def _server_args(
    v: Mapping[str, Any], spec: Mapping[str, Any], extra: Sequence[str], auth: bool
) -> list[str]:
    args = ["--model-path", v["model_path"], "--tp-size", str(v["tp_size"])]
    if spec["enabled"]:
        args += [
            "--speculative-algorithm", str(spec["algorithm"]),
            "--speculative-draft-model-path", v["draft_model_path"],
            "--speculative-num-steps", str(spec["num_steps"]),
            "--speculative-eagle-topk", str(spec["eagle_topk"]),
            "--speculative-num-draft-tokens", str(spec["num_draft_tokens"]),
        ]  # fmt: skip
        if v["disable_batch_threshold"] is not None:
            args += ["--speculative-disable-batch-threshold", str(v["disable_batch_threshold"])]
    args += ["--attention-backend", str(v["attention_backend"])]
    args += ["--cuda-graph-max-bs", str(v["cuda_graph_max_bs"])]
    if v["allreduce_fusion"]:
        args.append("--enable-flashinfer-allreduce-fusion")
    if v["torch_symm_mem"]:
        args.append("--enable-torch-symm-mem")
    if v["mem_fraction_static"] is not None:
        args += ["--mem-fraction-static", str(v["mem_fraction_static"])]
    args += ["--host", str(v["host"]), "--port", str(v["port"])]
    if v["served_model_name"]:
        args += ["--served-model-name", v["served_model_name"]]
    if v["trust_remote_code"]:
        args.append("--trust-remote-code")
    # the one place of the flag: every preset, every host (docs/rolling-upgrade.md, the drain)
    args.append("--enable-metrics")
    args += list(extra)
    if auth:
        args += ["--config", CONFIG_ARG]
    return args


def _flags(server_args: Sequence[str]) -> list[dict[str, Any]]:
    """[{flag, value, reason}] in argv order (value None for switches)."""
    out: list[dict[str, Any]] = []
    for word in server_args:
        if word.startswith("--"):
            reason = FLAG_REASONS.get(word, "operator-supplied (sglang_extra_args)")
            out.append({"flag": word, "value": None, "reason": reason})
        elif out and out[-1]["value"] is None:
            out[-1]["value"] = word
        elif out:
            out[-1]["value"] = f"{out[-1]['value']} {word}"
    return out


def _url_host(host: str, probe: bool) -> str:
    if probe and host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if probe and host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _nccl(cfg: Mapping[str, Any], errors: _Errors) -> dict[str, Any]:
    """The profile as the nccl_env role renders it: the one decider (module_utils/nccl_profile.py) with
    the inventory's nccl_env_interconnect (cfg nccl_interconnect) before preflight's detected class."""
    profile = cfg.get("nccl_profile")
    allowed = cfg.get("nccl_profiles_allowed") or list(NCCL_PROFILES)
    if not isinstance(allowed, list) or not all(p in NCCL_PROFILES for p in allowed):
        errors.bad("sglang_nccl_profiles_allowed", allowed, f"a list of {', '.join(NCCL_PROFILES)}")
    elif profile not in allowed:
        names = ", ".join(allowed)
        errors.bad("sglang_nccl_profile", profile, f"one of sglang_nccl_profiles_allowed: {names}")
    override = cfg.get("nccl_interconnect") or ""  # "" = not set
    interconnect = cfg.get("interconnect") or ""
    if interconnect and interconnect not in INTERCONNECTS:
        errors.bad("preflight_interconnect", interconnect, f"one of {', '.join(INTERCONNECTS)}")
    if override and override not in INTERCONNECTS:
        errors.bad("nccl_env_interconnect", override, f"'' (unknown) or one of {', '.join(INTERCONNECTS)}")
    decided = resolve_profile(str(profile), interconnect=override, preflight_interconnect=interconnect)
    return {
        "profile": profile,
        "resolved": decided["profile"],
        "interconnect": decided["interconnect"],
        "reason": decided["reason"],
    }


def shell_command(spec: Mapping[str, Any]) -> str:
    """A copy-paste shell command equal to the unit's: env files sourced, env set, argv quoted, one flag
    per line; the key stays in its YAML file: ``--config <key file>`` (root-readable, the source of the
    unit's credential) where the unit has ``--config %d/sglang-config.yaml``."""
    lines = [f"set -a; . {shlex.quote(path)}; set +a" for path in spec["environment_files"]]
    env = [f"{name}={shlex.quote(value)}" for name, value in spec["environment"].items()]
    groups: list[list[str]] = [env + [shlex.quote(w) for w in spec["launcher"]]]
    key_file = spec["auth"]["key_file"] or ""
    for word in spec["server_args"]:
        quoted = shlex.quote(key_file if word == CONFIG_ARG else word)
        if word.startswith("--"):
            groups.append([quoted])
        else:
            groups[-1].append(quoted)
    lines.append(" \\\n  ".join(" ".join(g) for g in groups))
    return "\n".join(lines)


def is_loopback(host: Any) -> bool:
    """A loopback address (127.0.0.0/8, ::1) or a loopback name; a wildcard or another name is not."""
    if not isinstance(host, str):
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_bind(cfg: Mapping[str, Any], errors: _Errors, auth: bool) -> None:
    """A non-loopback bind needs authentication, or the explicit sglang_allow_unauthenticated_bind."""
    raw = cfg.get("allow_unauthenticated_bind", False)
    allow = _bool(False if raw is None else raw)
    if allow is None:
        errors.bad("sglang_allow_unauthenticated_bind", raw, "true or false")
        return
    host = cfg.get("host")
    if auth or allow or not valid_host(host) or is_loopback(host):
        return
    errors.append(
        f"sglang_service_host={_show(host)} is not a loopback address and authentication is off (no "
        "sglang_api_key): every client that reaches this host could use the server; allowed a loopback "
        "address (127.0.0.1, ::1, localhost), an API key (sglang_api_key, sglang_api_key_required true), "
        "or sglang_allow_unauthenticated_bind true to accept an open server on purpose"
    )


def resolve(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the launch inputs and resolve them into the spec (see the module docstring)."""
    errors = _Errors()
    spec = _speculative(cfg, errors)
    v = _check_inputs(cfg, errors, spec["enabled"])
    auth = _check_key(cfg, errors, v["api_key_required"])
    _check_key_file(cfg, errors)
    _check_bind(cfg, errors, auth)
    extra, env_extra = _check_extra(cfg, errors)
    nccl = _nccl(cfg, errors)
    mn = _multinode(cfg, errors, v)
    if errors:
        return {"spec": {}, "errors": list(errors)}
    launcher = [v["python"], "-m", LAUNCH_MODULE]
    server_args = multinode.with_flags(_server_args(v, spec, extra, auth), mn)
    environment = {SPEC_V2_ENV: "1"} if spec["spec_v2"] else {}
    environment.update(env_extra)
    env_files = [v["nccl_env_file"]]
    base = f"http://{_url_host(v['host'], probe=False)}:{v['port']}"
    probe = f"http://{_url_host(v['host'], probe=True)}:{v['port']}"
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "preset": cfg.get("preset"),
        "speculative": spec,
        "model": {
            "path": v["model_path"],
            "draft_path": v["draft_model_path"] or None,
            "served_name": v["served_model_name"] or v["model_path"],
            "trust_remote_code": v["trust_remote_code"],
        },
        "tp_size": v["tp_size"],
        # this host's GPUs of the tp group (GPUs 0..n-1): tp / the nodes of its replica (SGLang splits tp
        # evenly; multinode.check_tp refused a tp the nodes do not divide); verify and autotune read it
        "tp_per_node": v["tp_size"] // int(mn.get("nnodes") or 1),
        "launcher": launcher,
        "server_args": server_args,
        "extra_args": list(extra),
        "argv": launcher + server_args,
        "environment": environment,
        "environment_files": env_files,
        "endpoint": {
            "host": v["host"],
            "port": v["port"],
            "base_url": base,
            "probe_url": probe,
            "health_url": probe + "/health",
        },
        "auth": {
            "enabled": auth,
            "required": v["api_key_required"],
            # how the key reaches SGLang: systemd LoadCredential=<credential>:<key_file> (0600 root, a
            # YAML file `api-key: <key>`), argv `--config <config_arg>`; never the key itself
            "delivery": "systemd-credential" if auth else None,
            "credential": CONFIG_CREDENTIAL if auth else None,
            "config_arg": CONFIG_ARG if auth else None,
            "config_key": CONFIG_KEY,
            "key_file": v["api_key_file"] if auth else None,
        },
        "nccl": {**nccl, "env_file": v["nccl_env_file"]},
        "flags": _flags(server_args),
        "multinode": mn,
    }
    result["command"] = shell_command(result)
    return {"spec": result, "errors": []}
