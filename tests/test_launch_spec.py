"""Pure tests of plugins/module_utils/launch_spec.py: the one resolved launch spec (argv, environment,
endpoint, auth) and its validation rules. The inputs mirror group_vars/all/sglang.yml, which is read
here so the tests follow the shipped defaults."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import load_module

REPO = Path(__file__).resolve().parents[1]


L = load_module("launch_spec", REPO / "plugins" / "module_utils" / "launch_spec.py")
G: dict[str, Any] = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())
KEY = "TestKey-0123456789-abcdefXYZ"  # test-only value


def cfg(**over: Any) -> dict[str, Any]:
    """The preflight role's input mapping (roles/preflight/vars/main.yml), with the shipped defaults."""
    base: dict[str, Any] = {
        "preset": G["sglang_preset"],
        "presets": G["sglang_presets"],
        "presets_allowed": G["sglang_presets_allowed"],
        "num_steps": G["sglang_speculative_num_steps"],
        "eagle_topk": G["sglang_speculative_eagle_topk"],
        "num_draft_tokens": G["sglang_speculative_num_draft_tokens"],
        "spec_v2": G["sglang_spec_v2"],
        "speculative_disable_batch_threshold": G["sglang_speculative_disable_batch_threshold"],
        "model_path": "/data/models/kimi",
        "draft_model_path": "/data/eagle3/output_100k_sglang/4",
        "served_model_name": "kimi",
        "trust_remote_code": G["sglang_trust_remote_code"],
        "tp_size": 8,
        "tp_size_max": 64,
        "host": G["sglang_service_host"],
        "port": G["sglang_service_port"],
        "attention_backend": G["sglang_attention_backend"],
        "cuda_graph_max_bs": G["sglang_cuda_graph_max_bs"],
        "allreduce_fusion": G["sglang_enable_flashinfer_allreduce_fusion"],
        "torch_symm_mem": G["sglang_enable_torch_symm_mem"],
        "mem_fraction_static": G["sglang_mem_fraction_static"],
        "extra_args": G["sglang_extra_args"],
        "environment": G["sglang_launch_environment"],
        "api_key": KEY,
        "api_key_required": G["sglang_api_key_required"],
        "api_key_file": G["sglang_api_key_file"],
        "python": "/opt/sglang/current/venv/bin/python",
        "nccl_profile": G["sglang_nccl_profile"],
        "nccl_profiles_allowed": G["sglang_nccl_profiles_allowed"],
        "nccl_env_file": G["sglang_nccl_env_file"],
        "interconnect": "pcie",
    }
    base.update(over)
    return base


def resolve(**over: Any) -> dict[str, Any]:
    result: dict[str, Any] = L.resolve(cfg(**over))
    return result


def spec(**over: Any) -> dict[str, Any]:
    r = resolve(**over)
    assert r["errors"] == []
    out: dict[str, Any] = r["spec"]
    return out


def test_production_is_the_seed_command() -> None:
    s = spec()
    assert s["launcher"] == ["/opt/sglang/current/venv/bin/python", "-m", "sglang.launch_server"]
    assert " ".join(s["server_args"]) == (
        "--model-path /data/models/kimi --tp-size 8 --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path /data/eagle3/output_100k_sglang/4 --speculative-num-steps 2 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --attention-backend flashinfer "
        "--cuda-graph-max-bs 128 --enable-flashinfer-allreduce-fusion --enable-torch-symm-mem "
        "--host 127.0.0.1 --port 30000 --served-model-name kimi --trust-remote-code --enable-metrics "
        "--config %d/sglang-config.yaml"
    )
    assert s["argv"] == s["launcher"] + s["server_args"]
    assert s["environment"] == {"SGLANG_ENABLE_SPEC_V2": "1"}
    # the key is a systemd credential (LoadCredential=), not an EnvironmentFile
    assert s["environment_files"] == ["/etc/sglang/nccl.env"]
    assert s["speculative"] == {
        "enabled": True, "algorithm": "EAGLE3", "num_steps": 2, "eagle_topk": 1,
        "num_draft_tokens": 3, "spec_v2": True,
    }  # fmt: skip
    assert s["endpoint"]["health_url"] == "http://127.0.0.1:30000/health"
    assert s["auth"] == {
        "enabled": True, "required": True, "delivery": "systemd-credential",
        "credential": "sglang-config.yaml", "config_arg": "%d/sglang-config.yaml",
        "config_key": "api-key", "key_file": "/etc/sglang/sglang-config.yaml",
    }  # fmt: skip
    assert "--api-key" not in s["server_args"]
    assert s["nccl"] == {
        "profile": "auto",
        "resolved": "pcie",
        "interconnect": "pcie",
        "reason": "auto -> pcie: preflight detected PCIe (preflight_interconnect)",
        "env_file": "/etc/sglang/nccl.env",
    }
    assert s["model"]["served_name"] == "kimi"
    # the production command does not set --mem-fraction-static (SGLang picks)
    assert "--mem-fraction-static" not in s["server_args"]


def test_the_key_is_never_in_the_spec() -> None:
    assert KEY not in repr(spec())


@pytest.mark.parametrize("preset", ["production", "baseline", "tree"])
def test_every_flag_has_a_reason_and_the_command_round_trips(preset: str) -> None:
    s = spec(preset=preset)
    assert all(f["reason"] for f in s["flags"])
    assert [f["flag"] for f in s["flags"]] == [w for w in s["server_args"] if w.startswith("--")]
    # the copy-paste command parses back to the spec's env + argv; --config names the key's source
    # file where the unit names its credential (%d/sglang-config.yaml)
    last = s["command"].splitlines()[len(s["environment_files"]) :]
    words = shlex.split(" ".join(line.rstrip("\\") for line in last))
    env_words = [f"{k}={v}" for k, v in s["environment"].items()]
    argv = ["/etc/sglang/sglang-config.yaml" if w == "%d/sglang-config.yaml" else w for w in s["argv"]]
    assert words == env_words + argv
    assert "%d" not in s["command"]


def test_presets_are_the_rows_of_the_seed_table() -> None:
    base = spec(preset="baseline", speculative_disable_batch_threshold=8)
    assert not [a for a in base["server_args"] if a.startswith("--speculative")]
    assert base["environment"] == {}
    tree = spec(preset="tree")
    sp = tree["speculative"]
    assert (sp["eagle_topk"], sp["num_draft_tokens"], sp["spec_v2"]) == (4, 16, False)
    assert "SGLANG_ENABLE_SPEC_V2" not in tree["environment"]


def test_explicit_knobs_override_the_preset() -> None:
    assert spec(num_steps=3)["speculative"]["num_draft_tokens"] == 4
    sp = spec(preset="tree", num_draft_tokens=8, eagle_topk=2)["speculative"]
    assert (sp["eagle_topk"], sp["num_draft_tokens"]) == (2, 8)
    assert spec(spec_v2=False, eagle_topk=4, num_draft_tokens=16)["speculative"]["spec_v2"] is False


def test_optional_flags() -> None:
    s = spec(
        speculative_disable_batch_threshold=32, mem_fraction_static=0.85, extra_args=["--log-level", "info"]
    )
    args = s["server_args"]
    assert args[args.index("--speculative-disable-batch-threshold") + 1] == "32"
    assert args[args.index("--mem-fraction-static") + 1] == "0.85"
    assert args[-4:] == ["--log-level", "info", "--config", "%d/sglang-config.yaml"]
    off = spec(api_key=None, api_key_required=False)
    assert "--config" not in off["server_args"]
    assert off["environment_files"] == ["/etc/sglang/nccl.env"]
    assert off["auth"]["enabled"] is False


def test_tp_per_node_is_tp_over_the_nodes_of_the_replica() -> None:
    """verify and autotune size their tp group from tp_per_node (GPUs 0..n-1 of this host); they keep no
    derivation of their own."""
    assert (spec()["tp_size"], spec()["tp_per_node"]) == (8, 8)
    assert spec(tp_size=1)["tp_per_node"] == 1
    servers = ["gpu-a1", "gpu-a2"]
    for host in servers:
        section = {
            "host": host, "servers": servers, "replicas": {"gpu-a1": "a", "gpu-a2": "a"},
            "addresses": {"gpu-a1": "10.0.0.11", "gpu-a2": "10.0.0.12"}, "port": 20000,
        }  # fmt: skip
        s = spec(tp_size=16, multinode=section)
        assert (s["multinode"]["nnodes"], s["tp_size"], s["tp_per_node"]) == (2, 16, 8)
    single = spec(tp_size=4, multinode={**section, "host": "solo", "servers": [*servers, "solo"]})
    assert (single["multinode"]["nnodes"], single["tp_per_node"]) == (1, 4)


def test_endpoint_urls() -> None:
    assert spec(host="0.0.0.0")["endpoint"]["probe_url"] == "http://127.0.0.1:30000"
    assert spec(host="::1")["endpoint"]["base_url"] == "http://[::1]:30000"


def test_nccl_profile_resolution() -> None:
    assert spec(interconnect="nvlink")["nccl"]["resolved"] == "nvlink"
    assert spec(nccl_profile="none")["nccl"]["resolved"] == "none"
    # nothing known: what the nccl_env role renders then (module_utils/nccl_profile.py decides both)
    assert spec(interconnect="")["nccl"]["resolved"] == "none"
    assert spec(interconnect="nvlink", nccl_interconnect="pcie")["nccl"]["resolved"] == "pcie"


# One row per rule: the input, the text the message must contain (variable and value), and a
# part of the "allowed" text. preflight's molecule scenario runs the same rules through Ansible.
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "port_80": ({"port": 80}, "sglang_service_port=80", "1024-65535"),
    "port_0": ({"port": 0}, "sglang_service_port=0", "1024-65535"),
    "port_high": ({"port": 70000}, "sglang_service_port=70000", "1024-65535"),
    "key_short": (
        {"api_key": "short-key"},
        "sglang_api_key (value not printed; 9 characters)",
        "at least 16",
    ),
    "key_chars": ({"api_key": "a" * 20 + " $x"}, "sglang_api_key (value not printed", "A-Z a-z 0-9"),
    # issue 32 item 5: SGLang's parser takes a key starting with - for an option and does not start
    "key_dash": (
        {"api_key": "-" + "a" * 20},
        "sglang_api_key (value not printed; 21 characters, starting with -)",
        "not starting with -",
    ),
    "key_long": ({"api_key": "a" * 257}, "sglang_api_key (value not printed; 257 characters)", "at most 256"),
    "key_placeholder": (
        {"api_key": "CHANGE-ME-openssl-rand-hex-32"},
        "placeholder of vault.yml.example",
        "your own",
    ),
    "key_missing": ({"api_key": None}, "sglang_api_key is empty or unset", "sglang_api_key_required false"),
    "tp_zero": ({"tp_size": 0}, "sglang_tp_size=0", "1-64"),
    "tp_huge": ({"tp_size": 128}, "sglang_tp_size=128", "1-64"),
    "preset_unknown": ({"preset": "turbo"}, "sglang_preset='turbo'", "production, baseline, tree"),
    "preset_not_allowed": (
        {"presets_allowed": ["production"], "preset": "tree"},
        "sglang_preset='tree'",
        "production",
    ),
    "topk_v2": ({"eagle_topk": 4}, "sglang_speculative_eagle_topk=4", "overlap worker rejects topk > 1"),
    "v2_baseline": ({"preset": "baseline", "spec_v2": True}, "sglang_spec_v2=true", "speculative preset"),
    "draft_chain": ({"num_draft_tokens": 5}, "sglang_speculative_num_draft_tokens=5", "3 or null"),
    "steps_zero": ({"num_steps": 0}, "sglang_speculative_num_steps=0", "positive integer"),
    "spec_v2_word": ({"spec_v2": "maybe"}, "sglang_spec_v2='maybe'", "true, false, or null"),
    "model_relative": ({"model_path": "models/kimi"}, "sglang_model_path='models/kimi'", "absolute path"),
    "model_space": ({"model_path": "/data/my model"}, "sglang_model_path='/data/my model'", "absolute path"),
    # issue 32 item 8: `..` components climb out of the place a path names
    "model_dotdot": ({"model_path": "/data/../etc"}, "sglang_model_path='/data/../etc'", "without '..'"),
    "model_dotdot_end": (
        {"model_path": "/data/models/.."},
        "sglang_model_path='/data/models/..'",
        "without '..'",
    ),
    "draft_dotdot": (
        {"draft_model_path": "/data/eagle3/../../root"},
        "sglang_draft_model_path='/data/eagle3/../../root'",
        "without '..'",
    ),
    "model_quote": ({"model_path": '/data/"kimi"'}, "sglang_model_path='/data/\"kimi\"'", "absolute path"),
    "model_dollar": ({"model_path": "/data/$HOME"}, "sglang_model_path='/data/$HOME'", "absolute path"),
    "model_semicolon": ({"model_path": "/data/a;rm"}, "sglang_model_path='/data/a;rm'", "absolute path"),
    "model_newline": ({"model_path": "/data/a\nb"}, "sglang_model_path='/data/a\\nb'", "absolute path"),
    "draft_missing": ({"draft_model_path": ""}, "sglang_draft_model_path=''", "required unless"),
    "served_space": ({"served_model_name": "my model"}, "sglang_served_model_name='my model'", "a name of"),
    "host_bad": ({"host": "bad host"}, "sglang_service_host='bad host'", "IPv4/IPv6"),
    "backend": ({"attention_backend": "fast"}, "sglang_attention_backend='fast'", "flashinfer"),
    "graph_bs": ({"cuda_graph_max_bs": 0}, "sglang_cuda_graph_max_bs=0", "1-4096"),
    "mem_fraction": ({"mem_fraction_static": 1.5}, "sglang_mem_fraction_static=1.5", "(0, 1)"),
    "threshold": (
        {"speculative_disable_batch_threshold": -1},
        "sglang_speculative_disable_batch_threshold=-1",
        ">= 0",
    ),
    "bool_word": (
        {"trust_remote_code": "sometimes"},
        "sglang_trust_remote_code='sometimes'",
        "true or false",
    ),
    "extra_newline": ({"extra_args": ["--x\ny"]}, "sglang_extra_args='--x\\ny'", "without newlines"),
    "extra_managed": ({"extra_args": ["--port", "1"]}, "sglang_extra_args='--port'", "does not already set"),
    "env_name": ({"environment": {"1BAD": "x"}}, "sglang_launch_environment='1BAD'", "variable names"),
    "env_quote": ({"environment": {"A": 'x"y'}}, "sglang_launch_environment.A='x\"y'", "double quotes"),
    "env_managed": (
        {"environment": {"SGLANG_ENABLE_SPEC_V2": "0"}},
        "SGLANG_ENABLE_SPEC_V2",
        "set by the spec",
    ),
    "root_space": ({"python": "/opt/my root/current/venv/bin/python"}, "sglang_root", "absolute path"),
    "nccl_file": (
        {"nccl_env_file": "/etc/sglang/nccl env"},
        "sglang_nccl_env_file='/etc/sglang/nccl env'",
        "absolute",
    ),
    "key_file": ({"api_key_file": "api-key.yaml"}, "sglang_api_key_file='api-key.yaml'", "absolute"),
    "key_file_not_yaml": (
        {"api_key_file": "/etc/sglang/api-key.env"},
        "sglang_api_key_file='/etc/sglang/api-key.env'",
        ".yaml or .yml",
    ),
    "extra_config": (
        {"extra_args": ["--config", "/tmp/other.yaml"]},
        "sglang_extra_args='--config'",
        "flags the spec does not already set",
    ),
    "nccl_profile": ({"nccl_profile": "fast"}, "sglang_nccl_profile='fast'", "auto, pcie, nvlink, none"),
    # one trailing newline passed `^...$` with re.match (issue 21): every pattern is full-matched now
    "model_trailing_newline": (
        {"model_path": "/data/kimi\n"},
        "sglang_model_path='/data/kimi\\n'",
        "absolute",
    ),
    "served_trailing_newline": (
        {"served_model_name": "kimi\n"},
        "sglang_served_model_name='kimi\\n'",
        "a name",
    ),
    "key_trailing_newline": ({"api_key": KEY + "\n"}, "sglang_api_key (value not printed", "A-Z a-z 0-9"),
    "env_name_trailing_newline": ({"environment": {"A\n": "x"}}, "sglang_launch_environment='A\\n'", "names"),
    "host_label_trailing_newline": ({"host": "gpu-1\n"}, "sglang_service_host='gpu-1\\n'", "IPv4/IPv6"),
    "draft_trailing_newline": ({"draft_model_path": "/d\n"}, "sglang_draft_model_path='/d\\n'", "absolute"),
    # sglang_extra_args: SGLang's aliases and abbreviations of the spec's flags (item 6)
    "extra_alias_tp": (
        {"extra_args": ["--tensor-parallel-size", "2"]},
        "--tensor-parallel-size",
        "sets --tp-size",
    ),
    "extra_alias_model": (
        {"extra_args": ["--model", "/m"]},
        "sglang_extra_args='--model'",
        "sets --model-path",
    ),
    "extra_abbrev_host": ({"extra_args": ["--hos", "0.0.0.0"]}, "sglang_extra_args='--hos'", "sets --host"),
    "extra_host_eq": (
        {"extra_args": ["--host=0.0.0.0"]},
        "sglang_extra_args='--host=0.0.0.0'",
        "sets --host",
    ),
    "extra_speculative": ({"extra_args": ["--speculative-foo", "1"]}, "--speculative-foo", "spec does not"),
    "extra_config_file": (
        {"extra_args": ["--config", "/f.yaml"]},
        "sglang_extra_args='--config'",
        "sets --config",
    ),
    # a non-loopback bind without authentication (item 7)
    "open_bind": (
        {"host": "0.0.0.0", "api_key": None, "api_key_required": False},
        "sglang_service_host='0.0.0.0' is not a loopback address and authentication is off",
        "sglang_allow_unauthenticated_bind true",
    ),
    "open_bind_name": (
        {"host": "gpu-1.example", "api_key": None, "api_key_required": False},
        "sglang_service_host='gpu-1.example'",
        "sglang_allow_unauthenticated_bind true",
    ),
    "allow_bind_word": (
        {"allow_unauthenticated_bind": "perhaps"},
        "sglang_allow_unauthenticated_bind='perhaps'",
        "true or false",
    ),
}


@pytest.mark.parametrize(
    ("host", "key", "allow"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("127.0.0.2", None, False),
        ("0.0.0.0", KEY, False),
        ("10.0.0.5", KEY, False),
        ("0.0.0.0", None, True),
        ("::", None, True),
    ],
)
def test_bind_accepted_loopback_or_with_auth_or_allowed(host: str, key: str | None, allow: bool) -> None:
    over = {
        "host": host,
        "api_key": key,
        "api_key_required": key is not None,
        "allow_unauthenticated_bind": allow,
    }
    out = resolve(**over)
    assert out["errors"] == [], out["errors"]
    assert out["spec"]["endpoint"]["host"] == host


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_names_variable_value_and_allowed(case: str) -> None:
    over, needle, allowed = BAD[case]
    errors = resolve(**over)["errors"]
    assert any(needle in e and allowed in e for e in errors), errors
    assert resolve(**over)["spec"] == {}
    for e in errors:
        assert KEY not in e
        if "api_key" in over and isinstance(over["api_key"], str):
            assert over["api_key"] not in e


def test_filter_plugin_exports_the_resolver() -> None:
    text = (REPO / "plugins" / "filter" / "launch_spec.py").read_text()
    assert '"launch_spec": resolve' in text


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("127.0.0.1", True),
        ("0.0.0.0", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("localhost", True),
        ("gpu-01.example.org", True),
        ("gpu-01.example.org.", True),
        ("", False),
        ("256.1.1.1", False),
        ("1.2.3", False),
        ("-bad.example", False),
        ("bad_host", False),
        ("host name", False),
        (" 127.0.0.1", False),
        ("a" * 64, False),
        (30000, False),
        (None, False),
    ],
)
def test_valid_host(value: object, ok: bool) -> None:
    assert L.valid_host(value) is ok
