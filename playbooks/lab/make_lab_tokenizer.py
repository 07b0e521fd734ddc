"""Lab only (playbooks/lab/install_double.yml): a tiny local tokenizer for the lab's model path (the
lab has no model; bench_serving and the protocol double need a tokenizer there). Run with the
RELEASE venv's python (tokenizers + transformers from PyPI; nothing is downloaded).

usage: make_lab_tokenizer.py DIR PROMPTS_JSONL    (prints {"changed": bool, "vocab": N})
A WordLevel tokenizer over the words of the shipped coding prompts plus a few hundred filler words,
saved with PreTrainedTokenizerFast.save_pretrained (AutoTokenizer.from_pretrained(DIR) loads it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers  # type: ignore[import-not-found]
from transformers import PreTrainedTokenizerFast  # type: ignore[import-not-found]


def main() -> int:
    out = Path(sys.argv[1])
    prompts = Path(sys.argv[2])
    if (out / "tokenizer.json").exists():
        print(json.dumps({"changed": False, "dir": str(out)}))
        return 0
    words: list[str] = ["[UNK]", "[PAD]", "<s>", "</s>"]
    for line in prompts.read_text(encoding="utf-8").splitlines():
        if line.strip():
            for word in re.findall(r"\w+|[^\w\s]", json.loads(line)["prompt"]):
                if word not in words:
                    words.append(word)
    words += [f"w{i}" for i in range(512)]
    vocab = {word: i for i, word in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>", eos_token="</s>"
    )
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    print(json.dumps({"changed": True, "dir": str(out), "vocab": len(vocab)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
