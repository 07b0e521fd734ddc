"""The lab's tiny model (src/sglang_deploy/data/lab-model, made by scripts/make-lab-model): what is
shipped is what the script makes, in the real safetensors format, with the tensor names and shapes
a Llama checkpoint and SGLang 0.5.9's EAGLE-3 drafter (llama_eagle3.py) have, its vocabulary the
tokenizer's (playbooks/lab/make_lab_tokenizer.py's output, shipped beside it)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "src" / "sglang_deploy" / "data" / "lab-model"
SIZES = {"BF16": 2, "I64": 8, "BOOL": 1}


def _header(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header: dict[str, Any] = json.loads(raw[8 : 8 + length])
    data = len(raw) - 8 - length
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, stop = info["data_offsets"]
        count = 1
        for dim in info["shape"]:
            count *= dim
        assert stop - start == count * SIZES[info["dtype"]], name
        end = max(end, stop)
    assert end == data  # the data section is exactly the tensors
    return header


def test_shipped_files_are_what_the_script_makes(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    shutil.copy(LAB / "target" / "tokenizer.json", tmp_path / "target" / "tokenizer.json")
    subprocess.run([sys.executable, str(REPO / "scripts" / "make-lab-model"), str(tmp_path)], check=True)
    for sub in ("target", "eagle3"):
        for name in ("config.json", "model.safetensors"):
            assert (tmp_path / sub / name).read_bytes() == (LAB / sub / name).read_bytes(), f"{sub}/{name}"


def test_every_file_is_small() -> None:
    for file in LAB.rglob("*"):
        assert not file.is_file() or file.stat().st_size < 1024 * 1024, file


def test_target_is_a_llama_checkpoint_of_the_tokenizers_vocabulary() -> None:
    config = json.loads((LAB / "target" / "config.json").read_text())
    vocab = json.loads((LAB / "target" / "tokenizer.json").read_text())["model"]["vocab"]
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["vocab_size"] == len(vocab)
    assert config["bos_token_id"] == vocab["<s>"]
    assert config["eos_token_id"] == vocab["</s>"]
    assert config["torch_dtype"] == "bfloat16"
    assert config["tie_word_embeddings"] is False
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                "num_hidden_layers", "max_position_embeddings", "rms_norm_eps", "rope_theta"):  # fmt: skip
        assert key in config, key
    h, inter, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
    header = _header(LAB / "target" / "model.safetensors")
    shapes = {k: i["shape"] for k, i in header.items() if k != "__metadata__"}
    want = {"model.embed_tokens.weight": [v, h], "lm_head.weight": [v, h], "model.norm.weight": [h]}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        want |= {
            p + "input_layernorm.weight": [h],
            p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [h, h],
            p + "self_attn.k_proj.weight": [kv, h],
            p + "self_attn.v_proj.weight": [kv, h],
            p + "self_attn.o_proj.weight": [h, h],
            p + "mlp.gate_proj.weight": [inter, h],
            p + "mlp.up_proj.weight": [inter, h],
            p + "mlp.down_proj.weight": [h, inter],
        }
    assert shapes == want
    assert {i["dtype"] for k, i in header.items() if k != "__metadata__"} == {"BF16"}


def test_drafter_is_an_eagle3_checkpoint_sglang_loads() -> None:
    config = json.loads((LAB / "eagle3" / "config.json").read_text())
    target = json.loads((LAB / "target" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["num_hidden_layers"] == 1  # llama_eagle3.py: "EAGLE3 currently only supports 1 layer"
    assert config["vocab_size"] == target["vocab_size"]
    assert config["target_hidden_size"] == target["hidden_size"]
    h, dv = config["hidden_size"], config["draft_vocab_size"]
    header = _header(LAB / "eagle3" / "model.safetensors")
    shapes = {k: i["shape"] for k, i in header.items() if k != "__metadata__"}
    assert shapes["fc.weight"] == [h, 3 * config["target_hidden_size"]]
    assert shapes["midlayer.self_attn.q_proj.weight"] == [h, 2 * h]  # attention over [embeds, hidden]
    assert shapes["lm_head.weight"] == [dv, h]
    assert shapes["d2t"] == [dv]
    assert shapes["t2d"] == [config["vocab_size"]]
    assert header["d2t"]["dtype"] == "I64"
    assert header["t2d"]["dtype"] == "BOOL"
    assert "midlayer.hidden_norm.weight" in shapes


@pytest.mark.parametrize("sub", ["target", "eagle3"])
def test_the_probe_and_decider_accept_it(sub: str) -> None:
    import modload  # noqa: F401, PLC0415 - puts the collection on sys.path
    from ansible_collections.sglang.deploy.plugins.module_utils.model_dir import inspect_dir  # noqa: PLC0415

    report = inspect_dir(str(LAB / sub))
    assert report["config_present"]
    assert report["weights"]["files"] == ["model.safetensors"]
    assert bool(report["tokenizer"]) is (sub == "target")
