"""Layer 5's script (roles/verify/files/verify_http.py) against a named local test double of the
server's HTTP surface (stdlib http.server on 127.0.0.1: /health, /v1/models, /generate behind a
Bearer key, answering 401 without it). Check mode (spec generate=false) sends no /generate at all,
not even the refused one; a normal run sends both and passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from http_double import JsonHandler, serving
from modload import REPO, load_module

verify_http = load_module("verify_http", REPO / "roles/verify/files/verify_http.py")
KEY = "TestOnlyKey-0123456789abcdef"


class ServerDouble(JsonHandler):
    """Test double of an SGLang server's HTTP endpoints (what layer 5 calls)."""

    seen: ClassVar[list[str]] = []

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {KEY}"

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        if self.path == "/health":
            self._answer(200, {})
        elif not self._authorized():
            self._answer(401, {"error": "unauthorized"})
        else:
            self._answer(200, {"data": [{"id": "/models/m"}]})

    def do_POST(self) -> None:
        self.seen.append(f"POST {self.path}")
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self._authorized():
            self._answer(401, {"error": "unauthorized"})
        else:
            self._answer(200, {"text": " return n", "meta_info": {"completion_tokens": 3}})


@pytest.fixture
def server() -> Iterator[str]:
    ServerDouble.seen = []
    with serving(ServerDouble) as url:
        yield url


def spec(base: str, **more: Any) -> dict[str, Any]:
    return {"base_url": base, "health_url": base + "/health", "served_name": "/models/m", "auth": True,
            "timeout_s": 5, "wait_s": 0, **more}  # fmt: skip


def test_check_mode_sends_no_generate(server: str) -> None:
    result = verify_http.check(spec(server, generate=False), KEY)
    assert result["status"] == "passed", result
    assert "no /generate (check mode: read-only)" in result["reason"]
    assert not [r for r in ServerDouble.seen if "/generate" in r]
    assert "GET /v1/models" in ServerDouble.seen


def test_check_mode_without_a_key_file_asks_only_what_needs_no_key(server: str) -> None:
    """Check mode brings no key file to the host (tasks/http.yml): /health, and the refusal of a request
    without the key; /v1/models with the key is not asked, nothing generates."""
    result = verify_http.check(spec(server, generate=False), "")
    assert result["status"] == "passed", result
    assert "/v1/models not asked (check mode: no key on the host)" in result["reason"]
    assert result["checks"]["without_key"] == {"/v1/models": 401}
    assert not [r for r in ServerDouble.seen if "/generate" in r]
    # a real run (it generates) that was given no key is a failure, never a pass
    failed = verify_http.check(spec(server), "")
    assert failed["status"] == "failed"
    assert "auth is on but no key_file was given" in failed["reason"]


def test_a_run_generates_and_checks_the_key(server: str) -> None:
    result = verify_http.check(spec(server), KEY)
    assert result["status"] == "passed", result
    assert ServerDouble.seen.count("POST /generate") == 2  # with the key, and refused without it
    assert result["checks"]["without_key"] == {"/v1/models": 401, "/generate": 401}
