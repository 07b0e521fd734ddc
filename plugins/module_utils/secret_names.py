"""The one secret-name rule: which variable, option and environment names hold a secret, and the mask.

Used by the CLI (src/sglang_deploy/redact.py loads this file: plugins cannot import src/, so the rule
lives here and the CLI imports it) and by the collection's plugins (the host lock's recorded command,
plugins/module_utils/host_lock.py; the input checks' messages, text_checks.py; the benchmark
scrubber, verify_scrub.py; the running process' argv and environment, probe.py; the launch-spec
hash, verify_gate.py). One rule, so a name the CLI masks is masked in the lock record, in preflight's
messages and in verify's records too.

A name is secret when it holds one of the words of :data:`SECRET_WORDS` (case-insensitive, searched):
``api_key``/``api-key``/``apikey``, ``token`` (not ``tokens``: ``max_new_tokens`` is a count; not
``tokenizer``: ``--tokenizer-path`` names a directory),
``secret``, ``password``/``passwd``, ``pass`` as a word of its own (``ansible_become_pass``,
``ansible_ssh_pass``, ``vault_pass``; not ``bypass`` or ``passes``), ``private_key`` and
``credential``. Ansible's connection secrets (``ansible_password``, ``ansible_become_password``,
``ansible_become_pass``, ``ansible_ssh_pass``) are all covered.

Pure Python (no Ansible import); tests/test_cli_secrets.py and tests/test_host_lock.py test it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "********"
# The words that make a `name=value` / `name: value` in free text (logs, module output) a secret to
# mask (the CLI's text pattern, redact.py, is built from it): not `private_key` and `credential`, which
# in free text name where a secret is (`ansible_ssh_private_key_file: /root/.ssh/id`, a unit's
# `LoadCredential=sglang-config.yaml:/etc/...`), not the secret.
TEXT_SECRET_WORDS = r"api[_-]?key|token(?!s|izer)|secret|passw(?:or)?d|(?<![a-z])pass(?![a-z])"
# the words of a secret variable, option or environment name, as a regex alternation
SECRET_WORDS = TEXT_SECRET_WORDS + r"|private[_-]?key|credential"
SECRET_NAME = re.compile(f"(?:{SECRET_WORDS})", re.IGNORECASE)
TEXT_SECRET_NAME = re.compile(f"(?:{TEXT_SECRET_WORDS})", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether the variable, option or environment name ``name`` holds a secret."""
    return SECRET_NAME.search(name) is not None


def is_secret_field(name: str) -> bool:
    """Whether the field ``name`` of a record or a program's JSON output (SGLang's server info, the
    verify document's context) holds a secret: the words of :data:`TEXT_SECRET_WORDS`, as the CLI masks
    ``"name": "value"`` in what it prints (a ``credential`` field names a credential, it is none)."""
    return TEXT_SECRET_NAME.search(name) is not None


# The patterns of a secret in free text (logs, module output, a unit's journal), each with the part to
# keep as group 1 and the value as group 2: the CLI's redactor (src/sglang_deploy/redact.py) and the
# module service_health's journal excerpt use these. Name parts around the secret word are bounded
# ({0,64}): an unbounded `[\w.-]*` backtracks quadratically over long word-character runs (hashes,
# base64 in module output) and took minutes on a real stack-install artifact dir.
TEXT_PATTERNS = (
    # --api-key VALUE / --api-key=VALUE / --token VALUE
    re.compile(r"(--[\w-]{0,40}(?:" + TEXT_SECRET_WORDS + r")[\w-]{0,40}[ =])([^\s\\\"']+)", re.IGNORECASE),
    # name=value / name: value / "name": "value" / name='value' with a secret-looking name (not the last
    # part of a path: "/etc/sglang/api-key.env: missing" names a file, it quotes no secret)
    re.compile(
        r"""((?<![\w.\-/])["']?[\w.-]{0,64}(?:"""
        + TEXT_SECRET_WORDS
        + r""")[\w.-]{0,64}["']?\s*[:=]\s*["']?)([^\s"',})\]\\]+)""",
        re.IGNORECASE,
    ),
    # the key's own character set (A-Z a-z 0-9 . _ ~ + / = : @ -) plus %-escapes: a value with `:` or
    # `@` is masked whole, not up to its first `:`
    re.compile(r"((?:Bearer|Basic)\s+)([A-Za-z0-9._~+/=:@%-]{6,})", re.IGNORECASE),
)


def mask_text(text: str) -> str:
    """``text`` with the value of every secret-looking flag, ``name=value`` and Authorization header
    replaced by :data:`MASK` (known values are the caller's: replace them first)."""
    for pattern in TEXT_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def mask_data(data: Any, text: Callable[[str], str] = str) -> Any:
    """A copy of JSON-like ``data`` with the value of every secret-named field (:func:`is_secret_field`)
    replaced by :data:`MASK` whatever it is (unless None or empty), and every other string, keys
    included, passed through ``text`` (the caller's masking of known values and free-text patterns).
    The result is JSON-like again: a JSON document masked this way stays valid JSON, which masking its
    text does not (``"secret": false`` has no quotes for a text pattern to stop at)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out: dict[Any, Any] = {}
            for key, value in node.items():
                new_key = text(key) if isinstance(key, str) else key
                if isinstance(key, str) and is_secret_field(key) and value not in (None, ""):
                    out[new_key] = MASK
                else:
                    out[new_key] = walk(value)
            return out
        if isinstance(node, list | tuple):
            return [walk(item) for item in node]
        if isinstance(node, str):
            return text(node)
        return node

    return walk(data)
