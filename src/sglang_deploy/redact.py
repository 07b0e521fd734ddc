"""Keep secrets out of what we print and write: known secret values and secret-looking patterns."""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from .paths import load_plugin_file

# The one secret-name rule (plugins/module_utils/secret_names.py; the host lock and the input checks use
# the same file).
_RULE = load_plugin_file("plugins/module_utils/secret_names.py", "sglang_deploy._secret_names")
MASK: str = _RULE.MASK
# Names of variables/env vars that hold secrets (api keys, tokens, passwords, Ansible's connection and
# become passwords, vault passwords): the one rule, plugins/module_utils/secret_names.py.
SECRET_NAME: re.Pattern[str] = _RULE.SECRET_NAME
_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")
JSON_DEPTH = 3  # a module result (JSON) in the callback's display (JSON) in a runner event (JSON)


def _slashed(text: str) -> str:
    return text.replace("/", "\\/")


def encoded_forms(secret: str) -> set[str]:
    """The forms a value takes in what we print and write besides itself: `/` escaped as `\\/` (as
    some JSON encoders emit it), each of those JSON-escaped up to JSON_DEPTH times (ASCII or not,
    `/` escaped or not: runner's job_events hold a module's JSON output inside the displayed JSON
    inside the event's JSON), Python repr, shell-quoted, URL-encoded (`%3A`, `%40`, `%2F`; `+` for
    a space)."""
    level = {secret, _slashed(secret)}
    forms = set(level)
    for _depth in range(JSON_DEPTH):
        escaped = {json.dumps(text)[1:-1] for text in level}
        escaped |= {json.dumps(text, ensure_ascii=False)[1:-1] for text in level}
        level = escaped | {_slashed(text) for text in escaped}
        forms |= level
    forms |= {repr(secret)[1:-1], shlex.quote(secret)}
    encoded = {
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
    }
    # %-escapes in lower case are the same URL (RFC 3986 2.1), and some encoders write them so
    forms |= encoded | {_PERCENT_ESCAPE.sub(lambda m: m.group(0).lower(), text) for text in encoded}
    return forms


class Redactor:
    """Replaces known secret values (longest first) and secret-looking `name=value` pairs."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(*secrets)

    def add(self, *secrets: str) -> None:
        """Each value (of at least 4 characters) in every form of `encoded_forms`."""
        forms = {form for s in secrets if len(s) >= 4 for form in encoded_forms(s)}
        self._secrets = sorted({*self._secrets, *forms}, key=len, reverse=True)

    def mask_known(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def __call__(self, text: str) -> str:
        masked: str = _RULE.mask_text(self.mask_known(text))
        return masked

    def data(self, value: Any) -> Any:
        """JSON-like ``value`` masked as data (the one walk, secret_names.mask_data): secret-named
        fields whatever their value, every other string as text. Valid JSON in, valid JSON out."""
        return _RULE.mask_data(value, self)


SECRET_MIN_LENGTH = 8  # shorter values of secret-named variables are flags ("true", "1", "systemd")
# A secret-named variable whose name ends like this names where a secret is, not the secret:
# sglang_api_key_file=/etc/sglang/api-key.env, ansible_ssh_private_key_file, VAULT_PASSWORD_FILE.
LOCATION_NAME = re.compile(r"[_-](file|path|dir|directory|home)\Z", re.IGNORECASE)


def looks_like_secret(value: str, name: str = "") -> bool:
    """Whether the value of the secret-named variable `name` is worth masking everywhere it appears:
    not a short flag or mode, and not a path held by a variable named as a location (masking
    /etc/sglang/api-key.env would hide every path under it). A value starting with `/` of any other
    secret-named variable is a secret like any other (`/` is in the key's character set)."""
    if len(value) < SECRET_MIN_LENGTH:
        return False
    return not (value.startswith("/") and LOCATION_NAME.search(name))


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """Values of environment variables whose name says they are secret (and that look like one)."""
    return [
        value for name, value in env.items() if SECRET_NAME.search(name) and looks_like_secret(value, name)
    ]
