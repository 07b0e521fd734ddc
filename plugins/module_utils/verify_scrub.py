"""Scrub a secret (the API key) out of benchmark artifacts before they are kept, fetched or rendered.

Pure Python, no Ansible import: the verify role's benchmark runner (``roles/verify/files/verify_bench.py``,
run with the release venv's python on the host) loads this very file by path, the filter
``sglang.deploy.verify_scrub`` uses it on the controller, and ``tests/test_verify_scrub.py`` tests it.
Which names are secret, and the mask, are the one rule of ``secret_names.py`` (copied beside this file
on the host, roles/verify/tasks/bench_exec.yml).

Why: ``sglang.bench_serving`` embeds ``/get_server_info`` in every line of its JSONL output, and
SGLang's server info carries ``api_key`` (and ``admin_api_key``) in clear.

Two passes, both needed:
* structural: every mapping key that names a secret (``secret_names.is_secret_field``: ``api_key``,
  ``admin_api_key``, ``hf_token``, ``password``...; not ``max_total_tokens`` or ``tokenizer_path``)
  gets the value ``MASK`` whatever its value (a key rotated since, or one the caller
  did not know);
* literal: every occurrence of each known secret value in any string (keys and values, at any depth;
  and in raw text) is replaced by ``MASK``.
"""

from __future__ import annotations

import json
from typing import Any

try:
    from ansible_collections.sglang.deploy.plugins.module_utils.secret_names import MASK, mask_data
except ImportError:  # on the host: verify_bench.py imports this file and secret_names.py from its dir
    from secret_names import MASK, mask_data  # type: ignore[import-not-found]

__all__ = ["MASK", "find_leaks", "scrub_data", "scrub_jsonl", "scrub_text"]
# Secrets shorter than this are not replaced literally (a 1-3 character "secret" would shred the text).
MIN_SECRET_LEN = 4


def _secrets(secrets: list[str] | tuple[str, ...] | str | None) -> list[str]:
    if secrets is None:
        return []
    if isinstance(secrets, str):
        secrets = [secrets]
    # longest first: a secret containing another is masked whole
    return sorted(
        {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True
    )


def scrub_text(text: str, secrets: list[str] | tuple[str, ...] | str | None) -> str:
    """``text`` with every occurrence of each secret replaced by MASK."""
    for secret in _secrets(secrets):
        text = text.replace(secret, MASK)
    return text


def scrub_data(data: Any, secrets: list[str] | tuple[str, ...] | str | None = None) -> Any:
    """A copy of JSON-like ``data`` with secret-named fields masked and secret values replaced (the one
    walk of secret_names.mask_data)."""
    known = _secrets(secrets)
    return mask_data(data, lambda node: scrub_text(node, known))


def scrub_jsonl(text: str, secrets: list[str] | tuple[str, ...] | str | None = None) -> str:
    """Scrub a JSONL document line by line (lines that are not JSON are scrubbed as text)."""
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            lines.append(line)
            continue
        try:
            parsed = json.loads(stripped)
        except ValueError:
            lines.append(scrub_text(line, secrets))
            continue
        lines.append(json.dumps(scrub_data(parsed, secrets), sort_keys=False))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def find_leaks(text: str, secrets: list[str] | tuple[str, ...] | str | None) -> list[str]:
    """The secrets (masked to their first 2 characters) still found in ``text``; [] when clean."""
    return [s[:2] + "..." for s in _secrets(secrets) if s in text]
