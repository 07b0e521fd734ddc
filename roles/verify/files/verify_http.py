"""Layer 5 (HTTP): the deployed server answers SGLang's HTTP contract.

usage: verify_http.py SPEC_JSON    (host python, standard library only; prints one JSON document)
SPEC: {"base_url", "health_url", "served_name", "auth": bool, "max_new_tokens", "timeout_s", "wait_s",
       "key_file": path or ""}
The API key (auth on) is read from key_file, a 0600 file the task copied into a throw-away 0700
directory and removes after the run: never on a command line or in the environment (both are what
`ps` and Ansible's remote `sh -c` show), never printed.

Passes when: GET /health is 200 (polled for up to wait_s seconds first: a server restarted a moment
ago is still loading) (no key: SGLang leaves /health open); GET /v1/models (with the key)
lists the served model name; one POST /generate (with the key) returns non-empty text; and, with an
API key configured, GET /v1/models and POST /generate WITHOUT it are refused (401/403).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any


def call(url: str, key: str | None, body: dict[str, Any] | None, timeout: float) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read().decode("utf-8", errors="replace")
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw = exc.read().decode("utf-8", errors="replace")
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        return -1, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    try:
        return status, json.loads(raw) if raw.strip() else None
    except ValueError:
        return status, raw[:300]


def check(spec: dict[str, Any], key: str) -> dict[str, Any]:
    base = spec["base_url"].rstrip("/")
    timeout = float(spec.get("timeout_s", 60))
    served = spec["served_name"]
    errors: list[str] = []
    checks: dict[str, Any] = {}

    deadline = time.monotonic() + float(spec.get("wait_s", 0))
    status, _body = call(spec["health_url"], None, None, timeout)
    while status != 200 and time.monotonic() < deadline:
        time.sleep(2)
        status, _body = call(spec["health_url"], None, None, timeout)
    checks["health"] = status
    if status != 200:
        errors.append(f"GET /health answered {status}, want 200")

    # check mode (generate=false) brings no key file to the host: with auth on, what needs the key is
    # not asked; a real run without the key it needs is a failure
    generate = bool(spec.get("generate", True))
    keyless = bool(spec.get("auth")) and not key
    if keyless and generate:
        errors.append("auth is on but no key_file was given")
    if keyless:
        checks["models"] = "not asked: check mode (no key on the host)"
    else:
        errors += _models(checks, base + "/v1/models", key, served, timeout)

    gen_body = {
        "text": "def fibonacci(n):",
        "sampling_params": {"max_new_tokens": int(spec.get("max_new_tokens", 16)), "temperature": 0.0},
    }
    # check mode (spec generate=false) is read-only on the server too: no request that generates,
    # not even one the key check expects to be refused
    if generate:
        errors += _generate(checks, base + "/generate", key, gen_body, timeout)
    else:
        checks["generate"] = "not sent: check mode (read-only)"

    if spec.get("auth"):
        probes = (("/v1/models", None), ("/generate", gen_body)) if generate else (("/v1/models", None),)
        errors += _without_key(checks, base, probes, timeout)
    else:
        checks["without_key"] = "not checked: no API key configured"

    if errors:
        return {"status": "failed", "reason": "; ".join(errors), "checks": checks}
    auth = "a request without the API key is refused" if spec.get("auth") else "no API key configured"
    said = (
        f"/generate returned {checks['generate']['completion_tokens']} token(s) of text"
        if generate
        else "no /generate (check mode: read-only)"
    )
    listed = f"/v1/models lists {served!r}"
    if keyless:
        listed = "/v1/models not asked (check mode: no key on the host)"
    return {
        "status": "passed",
        "reason": f"/health 200, {listed}, {said}, {auth}",
        "checks": checks,
    }


def _without_key(
    checks: dict[str, Any], base: str, probes: tuple[tuple[str, Any], ...], timeout: float
) -> list[str]:
    """Each probe WITHOUT the key must be refused (401/403); its errors returned."""
    refused: dict[str, int] = {}
    errors: list[str] = []
    for path, payload in probes:
        status, _body = call(base + path, None, payload, timeout)
        refused[path] = status
        if status not in (401, 403):
            errors.append(f"{path} without the API key answered {status}, want 401")
    checks["without_key"] = refused
    return errors


def _models(checks: dict[str, Any], url: str, key: str, served: str, timeout: float) -> list[str]:
    """GET /v1/models (with the key when there is one) must list the served name; its errors returned."""
    status, body = call(url, key or None, None, timeout)
    ids = [m.get("id") for m in body.get("data", [])] if status == 200 and isinstance(body, dict) else []
    checks["models"] = {"status": status, "ids": ids}
    if status != 200:
        return [f"GET /v1/models answered {status}, want 200"]
    if served not in ids:
        return [f"GET /v1/models lists {ids}, not the served name {served!r}"]
    return []


def _generate(checks: dict[str, Any], url: str, key: str, body: dict[str, Any], timeout: float) -> list[str]:
    """One POST /generate with the key; its figures into checks["generate"], its errors returned."""
    status, answer = call(url, key or None, body, timeout)
    text = answer.get("text") if isinstance(answer, dict) else None
    meta = answer.get("meta_info", {}) if isinstance(answer, dict) else {}
    checks["generate"] = {
        "status": status,
        "chars": len(text) if isinstance(text, str) else None,
        "completion_tokens": meta.get("completion_tokens") if isinstance(meta, dict) else None,
    }
    if status != 200:
        return [f"POST /generate answered {status}, want 200: {str(answer)[:200]}"]
    if not isinstance(text, str) or not text:
        return ["POST /generate returned no text"]
    return []


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    key_file = spec.get("key_file") or ""
    key = ""
    if key_file:
        with open(key_file, encoding="utf-8") as fh:
            key = fh.read().strip()
    result = check(spec, key)
    text = json.dumps(result)
    if key:
        text = text.replace(key, "********")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
