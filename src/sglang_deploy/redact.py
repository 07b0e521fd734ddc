"""Keep secrets out of what we print and write: known secret values and secret-looking patterns."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "********"
# Name parts around the secret word are bounded ({0,64}): an unbounded `[\w.-]*` backtracks
# quadratically over long word-character runs (hashes, base64 in module output) and took minutes
# on a real stack-install artifact dir.
# Names of variables/env vars that hold secrets (api keys, tokens, passwords, vault passwords).
# "token" but not "tokens": max_new_tokens, num_draft_tokens, output_tokens are counts, not secrets.
SECRET_NAME = re.compile(
    r"(api[_-]?key|token(?!s)|secret|passw(or)?d|vault_pass|private[_-]?key|credential)", re.IGNORECASE
)
_PATTERNS = (
    # --api-key VALUE / --api-key=VALUE / --token VALUE
    re.compile(
        r"(--[\w-]{0,40}(?:api[_-]?key|token(?!s)|password|secret)[\w-]{0,40}[ =])([^\s\\\"']+)", re.I
    ),
    # name=value / name: value / "name": "value" with a secret-looking name (not the last part of a
    # path: "/etc/sglang/api-key.env: missing" names a file, it quotes no secret)
    re.compile(
        r"""((?<![\w.\-/])["']?[\w.-]{0,64}(?:api[_-]?key|token(?!s)|secret|passw(?:or)?d)[\w.-]{0,64}["']?\s*[:=]\s*["']?)([^\s"',})\]\\]+)""",
        re.I,
    ),
    re.compile(r"((?:Bearer|Basic)\s+)([A-Za-z0-9._~+/=-]{6,})", re.I),
)


class Redactor:
    """Replaces known secret values (longest first) and secret-looking `name=value` pairs."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def add(self, *secrets: str) -> None:
        self._secrets = sorted({*self._secrets, *(s for s in secrets if len(s) >= 4)}, key=len, reverse=True)

    def mask_known(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def __call__(self, text: str) -> str:
        text = self.mask_known(text)
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        return text


SECRET_MIN_LENGTH = 8  # shorter values of secret-named variables are flags ("true", "1", "systemd")


def looks_like_secret(value: str) -> bool:
    """Whether the value of a secret-named variable is worth masking everywhere it appears: not a
    short flag or mode, not a path (sglang_api_key_file=/etc/... names where the key is, and masking
    it would hide every path under it)."""
    return len(value) >= SECRET_MIN_LENGTH and not value.startswith("/")


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """Values of environment variables whose name says they are secret (and that look like one)."""
    return [value for name, value in env.items() if SECRET_NAME.search(name) and looks_like_secret(value)]
