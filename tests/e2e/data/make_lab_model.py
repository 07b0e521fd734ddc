#!/usr/bin/env python3
"""Test data: a tiny random model directory for the lab's model paths (the lab has no real model), so
that the real SGLang of tests/e2e/test_real_sglang_lab.py gets as far as it can without a GPU. Run
with the RELEASE venv's python (torch, transformers, safetensors; nothing is downloaded).

usage: make_lab_model.py DIR (target|eagle3) TOKENIZER_DIR    (prints {"changed": bool, ...})

target: a LlamaForCausalLM (2 layers, hidden 64) with random weights in model.safetensors;
eagle3: an EAGLE-3 drafter config (architectures LlamaForCausalLMEagle3, one layer) with random
weights under the names SGLang 0.5.9's llama_eagle3.py loads. Both get a copy of the tokenizer of
TOKENIZER_DIR (tests/e2e/data/make_lab_tokenizer.py). Idempotent: a DIR with a config.json is left
as it is (the lab may ship its own model there).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch  # type: ignore[import-not-found]
from safetensors.torch import save_file  # type: ignore[import-not-found]

HIDDEN = 64
HEADS = 4
LAYERS = 2
INTERMEDIATE = 128


def llama_config(vocab: int, layers: int, arch: str) -> dict[str, object]:
    return {
        "architectures": [arch],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": 2,
        "eos_token_id": 3,
    }


def layer_weights(prefix: str, qkv_in: int) -> dict[str, torch.Tensor]:
    head = HIDDEN // HEADS
    return {
        f"{prefix}.self_attn.q_proj.weight": torch.randn(HEADS * head, qkv_in),
        f"{prefix}.self_attn.k_proj.weight": torch.randn(HEADS * head, qkv_in),
        f"{prefix}.self_attn.v_proj.weight": torch.randn(HEADS * head, qkv_in),
        f"{prefix}.self_attn.o_proj.weight": torch.randn(HIDDEN, HEADS * head),
        f"{prefix}.mlp.gate_proj.weight": torch.randn(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.up_proj.weight": torch.randn(INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.down_proj.weight": torch.randn(HIDDEN, INTERMEDIATE),
        f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN),
    }


def target(vocab: int) -> tuple[dict[str, object], dict[str, torch.Tensor]]:
    weights = {
        "model.embed_tokens.weight": torch.randn(vocab, HIDDEN),
        "model.norm.weight": torch.ones(HIDDEN),
    }
    for i in range(LAYERS):
        weights.update(layer_weights(f"model.layers.{i}", HIDDEN))
    weights["lm_head.weight"] = torch.randn(vocab, HIDDEN)
    return llama_config(vocab, LAYERS, "LlamaForCausalLM"), weights


def eagle3(vocab: int) -> tuple[dict[str, object], dict[str, torch.Tensor]]:
    """The EAGLE-3 head: fc (3 target hidden states -> hidden), one decoder layer whose attention reads
    [embeds, hidden] (2 x hidden), its own norm and lm_head over the draft vocabulary (= the target's
    here, d2t all zeros: draft token i is target token i)."""
    config = llama_config(vocab, 1, "LlamaForCausalLMEagle3")
    config["draft_vocab_size"] = vocab
    weights = {
        "fc.weight": torch.randn(HIDDEN, 3 * HIDDEN),
        "norm.weight": torch.ones(HIDDEN),
        "lm_head.weight": torch.randn(vocab, HIDDEN),
        "d2t": torch.zeros(vocab, dtype=torch.int64),
        "t2d": torch.ones(vocab, dtype=torch.bool),
        "midlayer.hidden_norm.weight": torch.ones(HIDDEN),
    }
    weights.update(layer_weights("midlayer", 2 * HIDDEN))
    return config, weights


def main() -> int:
    out, kind, tokenizer = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    if (out / "config.json").exists():
        print(json.dumps({"changed": False, "dir": str(out)}))
        return 0
    vocab = len(json.loads((tokenizer / "tokenizer.json").read_text())["model"]["vocab"])
    torch.manual_seed(0)
    config, weights = target(vocab) if kind == "target" else eagle3(vocab)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tokenizer / name).exists() and tokenizer != out:
            shutil.copyfile(tokenizer / name, out / name)
    tensors = {
        k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()
    }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "model.safetensors").chmod(0o644)  # the service user reads it (save_file makes it 0600)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")  # last: marks the dir complete
    print(json.dumps({"changed": True, "dir": str(out), "kind": kind, "vocab": vocab}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
