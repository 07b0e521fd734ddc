"""Pure tests of roles/sglang_service/filter_plugins/sglang_service.py (launch command builder)."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[1] / "roles" / "sglang_service"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "sglang_service_filters", ROLE / "filter_plugins" / "sglang_service.py"
    )
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


F = _load()
PRESETS: dict[str, Any] = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())[
    "sglang_service_presets"
]
KEY = "k" * 24


def cfg(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "sglang-kimi",
        "user": "sglang",
        "group": "sglang",
        "python": "/opt/sglang/current/venv/bin/python",
        "exec_override": [],
        "model_path": "/data/models/kimi",
        "draft_model_path": "/data/eagle3/output_100k_sglang/4",
        "served_model_name": "kimi",
        "trust_remote_code": True,
        "tp_size": 8,
        "host": "127.0.0.1",
        "port": 30000,
        "attention_backend": "flashinfer",
        "cuda_graph_max_bs": 128,
        "allreduce_fusion": True,
        "torch_symm_mem": True,
        "mem_fraction_static": 0.85,
        "speculative_disable_batch_threshold": "",
        "extra_args": [],
        "preset": "production",
        "presets": PRESETS,
        "presets_allowed": ["production", "baseline", "tree"],
        "num_steps": 2,
        "eagle_topk": "",
        "num_draft_tokens": "",
        "spec_v2": "",
        "api_key": KEY,
        "api_key_required": True,
        "api_key_file": "/etc/sglang/api-key.env",
        "launch_args_file": "/etc/sglang/launch-args.json",
        "nccl_env_file": "/etc/sglang/nccl.env",
        "cuda_home": "/usr/local/cuda",
        "path_dirs": ["/usr/local/cuda/bin"],
        "environment_extra": {},
        "timeout_start_sec": 1800,
        "health_timeout": 1800,
        "restart_sec": 10,
        "start_limit_interval_sec": 3600,
        "start_limit_burst": 5,
    }
    base.update(over)
    return base


def resolve(**over: Any) -> dict[str, Any]:
    result: dict[str, Any] = F.sglang_service_resolve(cfg(**over))
    return result


def test_production_is_the_seed_command() -> None:
    r = resolve()
    assert r["errors"] == []
    assert r["spec"] == {
        "preset": "production", "speculative": True, "algorithm": "EAGLE3", "num_steps": 2,
        "eagle_topk": 1, "num_draft_tokens": 3, "spec_v2": True,
    }  # fmt: skip
    args = F.sglang_service_args(cfg(), r["spec"])
    assert " ".join(args) == (
        "--model-path /data/models/kimi --tp-size 8 --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path /data/eagle3/output_100k_sglang/4 --speculative-num-steps 2 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --attention-backend flashinfer "
        "--cuda-graph-max-bs 128 --enable-flashinfer-allreduce-fusion --enable-torch-symm-mem "
        "--mem-fraction-static 0.85 --host 127.0.0.1 --port 30000 --served-model-name kimi "
        "--trust-remote-code --api-key ${SGLANG_API_KEY}"
    )
    assert KEY not in " ".join(args)


def test_baseline_has_no_speculation_and_tree_is_v1_topk4() -> None:
    base = resolve(preset="baseline", speculative_disable_batch_threshold=8)
    assert base["errors"] == []
    assert base["spec"]["spec_v2"] is False
    args = F.sglang_service_args(cfg(preset="baseline", speculative_disable_batch_threshold=8), base["spec"])
    assert not [a for a in args if a.startswith("--speculative")]
    tree = resolve(preset="tree")
    assert tree["errors"] == []
    assert (tree["spec"]["eagle_topk"], tree["spec"]["num_draft_tokens"], tree["spec"]["spec_v2"]) == (
        4,
        16,
        False,
    )


def test_explicit_knobs_override_the_preset() -> None:
    r = resolve(num_steps="3")
    assert r["errors"] == []
    assert r["spec"]["num_draft_tokens"] == 4
    r = resolve(preset="tree", num_draft_tokens=8, eagle_topk="2")
    assert r["errors"] == []
    assert (r["spec"]["eagle_topk"], r["spec"]["num_draft_tokens"]) == (2, 8)
    r = resolve(preset="production", spec_v2=False, eagle_topk=4, num_draft_tokens=16)
    assert r["errors"] == []
    assert r["spec"]["spec_v2"] is False


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        (
            {"eagle_topk": 4},
            "sglang_service_speculative_eagle_topk (sglang_speculative_eagle_topk)=4 with spec v2",
        ),
        ({"preset": "turbo"}, "sglang_service_preset (sglang_preset)='turbo' is not a known preset"),
        ({"port": 0}, "sglang_service_port=0 is out of range"),
        ({"port": "80"}, "sglang_service_port='80' is out of range"),
        ({"model_path": "models/kimi"}, "sglang_service_model_path (sglang_model_path)='models/kimi'"),
        ({"api_key": ""}, "sglang_api_key is not set but sglang_api_key_required=true"),
        ({"preset": "baseline", "spec_v2": True}, "sglang_service_spec_v2 (sglang_spec_v2)=true with preset"),
        ({"num_draft_tokens": 5}, "chain speculation drafts steps+1 tokens; allowed: 3"),
        ({"attention_backend": "fast"}, "sglang_service_attention_backend='fast'"),
        ({"mem_fraction_static": 1.5}, "sglang_service_mem_fraction_static=1.5"),
        (
            {"speculative_disable_batch_threshold": "x"},
            "sglang_service_speculative_disable_batch_threshold='x'",
        ),
        ({"exec_override": ["relative"]}, "sglang_service_exec_override"),
        ({"name": "sglang-kimi.service"}, "sglang_service_name='sglang-kimi.service'"),
        ({"user": "root"}, "sglang_service_user='root'"),
        ({"tp_size": 0}, "sglang_service_tp_size (sglang_tp_size)=0"),
        ({"draft_model_path": ""}, "sglang_service_draft_model_path (sglang_draft_model_path)=''"),
    ],
)
def test_bad_input_names_the_variable(over: dict[str, Any], needle: str) -> None:
    errors = resolve(**over)["errors"]
    assert any(needle in e for e in errors), errors


def test_bad_api_key_value_is_never_printed() -> None:
    errors = resolve(api_key="short secret$")["errors"]
    assert errors
    assert all("short secret" not in e for e in errors)


def test_no_key_not_required_omits_api_key() -> None:
    r = resolve(api_key="", api_key_required=False, preset="baseline", draft_model_path="")
    assert r["errors"] == []
    assert "--api-key" not in F.sglang_service_args(cfg(api_key="", preset="baseline"), r["spec"])


def test_threshold_only_when_set() -> None:
    r = resolve(speculative_disable_batch_threshold=32)
    args = F.sglang_service_args(cfg(speculative_disable_batch_threshold=32), r["spec"])
    assert args[args.index("--speculative-disable-batch-threshold") + 1] == "32"
    assert "--speculative-disable-batch-threshold" not in F.sglang_service_args(cfg(), resolve()["spec"])


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("/data/models/kimi", "/data/models/kimi"),
        ("a b", '"a b"'),
        ("50%", '"50%%"'),
        ("$HOME", '"$$HOME"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        (";", '";"'),
        ("${SGLANG_API_KEY}", "${SGLANG_API_KEY}"),
        ("${OTHER}", '"$${OTHER}"'),
    ],
)
def test_systemd_quote(word: str, quoted: str) -> None:
    assert F.sglang_service_systemd_quote(word) == quoted


def test_systemd_quote_rejects_newlines() -> None:
    with pytest.raises(ValueError, match="newlines"):
        F.sglang_service_systemd_quote("a\nb")


def _systemd_split(exec_start: str) -> list[str]:
    """Approximates systemd's parsing for the quoting used here (continuations, quotes, $$, %%)."""
    joined = exec_start.replace("\\\n", " ")
    return [w.replace("$$", "$").replace("%%", "%") for w in shlex.split(joined)]


def test_exec_start_one_flag_per_line_round_trips() -> None:
    argv = [
        "/opt/py",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m/a b",
        "--x",
        "--y",
        "1",
        "2",
        "--z",
        "50%",
    ]
    text = F.sglang_service_exec_start(argv)
    lines = text.split(" \\\n")
    assert lines[0] == "/opt/py -m sglang.launch_server"
    assert [ln.strip() for ln in lines[1:]] == ['--model-path "/m/a b"', "--x", "--y 1 2", '--z "50%%"']
    assert _systemd_split(text) == argv


def test_env_line() -> None:
    assert F.sglang_service_env_line("SGLANG_ENABLE_SPEC_V2", "1") == '"SGLANG_ENABLE_SPEC_V2=1"'
    assert F.sglang_service_env_line("A", 'x "y" 5%') == '"A=x \\"y\\" 5%%"'
    with pytest.raises(ValueError, match="not an environment variable name"):
        F.sglang_service_env_line("1BAD", "x")


def test_filter_module_exports() -> None:
    names = set(F.FilterModule().filters())
    assert {"sglang_service_resolve", "sglang_service_args", "sglang_service_exec_start"} <= names
