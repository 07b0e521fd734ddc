"""One secret-name rule (issue 33 item 4): plugins/module_utils/secret_names.py decides, for the CLI,
the host lock, the input checks, the benchmark scrubber, the process probe and the launch-spec hash;
no other file of plugins/ or src/ defines a mask or a secret-name regex of its own."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.sglang.deploy.plugins.module_utils import probe, verify_gate, verify_scrub
from ansible_collections.sglang.deploy.plugins.module_utils import secret_names as rule
from modload import REPO

from sglang_deploy import redact

SECRET = (
    "api_key", "admin_api_key", "SGLANG_API_KEY", "hf_token", "HF_TOKEN", "db_password", "passwd",
    "ansible_become_pass", "client_secret", "ssh_private_key", "GCP_CREDENTIALS", "tokenizer_hf_token",
)  # fmt: skip
NOT_SECRET = (
    "max_total_tokens", "max_new_tokens", "tokenizer_path", "tokenizer_mode", "skip_tokenizer_init",
    "bypass_cache", "passes", "model_path", "NCCL_IB_HCA", "NCCL_IB_PKEY",
)  # fmt: skip


@pytest.mark.parametrize("name", SECRET)
def test_secret_names(name: str) -> None:
    assert rule.is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET)
def test_not_secret_names(name: str) -> None:
    assert not rule.is_secret_name(name)
    assert not rule.is_secret_field(name)


def test_fields_are_the_text_words_a_credential_field_names_one() -> None:
    assert rule.is_secret_field("hf_token")
    assert rule.is_secret_field("admin_api_key")
    assert rule.is_secret_field("api_key")
    assert rule.is_secret_field("password")
    assert not rule.is_secret_field("credential")  # the verify document's LoadCredential= name
    assert verify_scrub.scrub_data({"tokenizer_path": "/m", "hf_token": "abc"}) == {
        "tokenizer_path": "/m",
        "hf_token": rule.MASK,
    }


def test_one_mask() -> None:
    assert verify_scrub.MASK is rule.MASK
    assert probe.MASK is rule.MASK
    assert redact.MASK == rule.MASK
    assert redact.SECRET_NAME.pattern == rule.SECRET_NAME.pattern


def test_process_argv_masking_follows_the_rule() -> None:
    argv = ["py", "--ssh-pass", "pw", "--max-total-tokens", "4096", "--db-password=x"]
    argv += ["--tokenizer-path", "/m"]
    assert probe.mask_argv(argv, [], {}) == [
        "py", "--ssh-pass", rule.MASK, "--max-total-tokens", "4096", f"--db-password={rule.MASK}",
        "--tokenizer-path", "/m",
    ]  # fmt: skip


def test_launch_spec_hash_hides_secret_names_and_stays_stable_for_token_names() -> None:
    def h(env: dict[str, str]) -> str:
        return str(verify_gate.launch_spec_hash({"server_args": ["--tp-size", "8"], "environment": env}))

    # secret values never change the hash; their names do
    assert h({"HF_TOKEN": "a"}) == h({"HF_TOKEN": "b"})
    assert h({"DB_PASS": "a"}) == h({"DB_PASS": "b"})  # the rule's `pass`: hidden now
    assert h({"SSH_PRIVATE_KEY": "a"}) == h({"SSH_PRIVATE_KEY": "b"})
    # names with `token` the hash always hid (recorded hashes stay comparable)
    clip = "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION"
    assert h({clip: "1"}) == h({clip: "2"})
    assert h({"TOKENIZERS_PARALLELISM": "false"}) == h({"TOKENIZERS_PARALLELISM": "true"})
    assert h({"NCCL_IB_HCA": "mlx5_0"}) != h({"NCCL_IB_HCA": "mlx5_1"})
    # a hash recorded before the rule was shared (realistic environment): unchanged
    env = {
        "NCCL_IB_HCA": "mlx5_0", "HF_TOKEN": "hf_x", "SGLANG_API_KEY": "k", "CUDA_VISIBLE_DEVICES": "0,1",
        "SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION": "4096", "TOKENIZERS_PARALLELISM": "false",
        "NCCL_SOCKET_IFNAME": "eth0", "HF_HOME": "/var/cache/hf",
    }  # fmt: skip
    spec = {"server_args": ["--model-path", "/m", "--tp-size", "8", "--api-key", "k"], "environment": env}
    recorded = "c4e269b249d8e6fc4aefe3e25909b5beb942a99deee33c850cc694df49c754e8"  # by the hash's own regex
    assert verify_gate.launch_spec_hash(spec) == recorded


def test_the_scrubber_runs_beside_its_rule_without_the_collection(tmp_path: Path) -> None:
    """On the host verify_bench.py imports verify_scrub.py and secret_names.py from its own dir."""
    for name in ("verify_scrub.py", "secret_names.py"):
        shutil.copy(REPO / "plugins/module_utils" / name, tmp_path)
    code = "import verify_scrub as s; print(s.scrub_data({'api_key': 'k', 'n': 1}))"
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); {code}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == "{'api_key': '********', 'n': 1}"


# the files allowed to spell the mask or a secret-name regex: the rule itself
_MASK_DEF = re.compile(r"^\s*MASK\s*=", re.M)
_NAME_REGEX = re.compile(r"""re\.compile\(\s*r?["'][^"'\n]*(?:token(?!izer)|passw|secret|api.?.?key)""")


def test_no_second_mask_or_secret_name_regex() -> None:
    offenders = []
    for path in [*(REPO / "plugins").rglob("*.py"), *(REPO / "src").rglob("*.py")]:
        if path.name == "secret_names.py":
            continue
        text = path.read_text(encoding="utf-8")
        if _MASK_DEF.search(text) or _NAME_REGEX.search(text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
