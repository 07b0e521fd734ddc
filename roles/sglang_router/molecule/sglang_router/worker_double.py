"""sglang-worker-double: a TEST DOUBLE of an SGLang server (a GPU-less stand-in for the router's
workers in the molecule scenario sglang_router; the lab e2e uses playbooks/lab/sglang_protocol_double.py
behind the real sglang-kimi unit instead). Standard library only, so it runs in the bare test image.

It answers what sglang-router 0.3.2 asks a worker (seen against the real router: /health for its
health checks, /get_server_info and /get_model_info at registration, /generate and /v1/* for
requests) in SGLang's shapes, requires ``Authorization: Bearer <key>`` on everything but /health*
when started with a key (SGLang's add_api_key_middleware: 401 otherwise), and appends
"METHOD PATH AUTH" (AUTH = ok|none|bad, never the key) of every request to its log.

usage: worker_double.py PORT KEY_FILE|- LOG_FILE
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PORT = int(sys.argv[1])
KEY = "" if sys.argv[2] == "-" else Path(sys.argv[2]).read_text(encoding="utf-8").strip()
LOG = Path(sys.argv[3])
OPEN = ("/health", "/health_generate")


class Handler(BaseHTTPRequestHandler):
    def _auth(self) -> str:
        got = self.headers.get("Authorization", "")
        if not got:
            return "none"
        return "ok" if got == f"Bearer {KEY}" else "bad"

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        auth = self._auth()
        with LOG.open("a", encoding="utf-8") as fh:
            fh.write(f"{method} {path} {auth}\n")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path in OPEN:
            self._reply(200, {})
            return
        if KEY and auth != "ok":
            self._reply(401, {"error": "Unauthorized"})
            return
        if path in ("/get_server_info", "/server_info"):
            self._reply(200, {"model_path": "double", "tp_size": 1, "version": "0.5.9", "test_double": True})
        elif path in ("/get_model_info", "/model_info"):
            self._reply(200, {"model_path": "double", "is_generation": True, "model_type": "double"})
        elif path == "/v1/models":
            self._reply(200, {"object": "list", "data": [{"id": "double", "object": "model"}]})
        elif path == "/get_load":
            self._reply(200, [{"num_reqs": 0, "num_waiting_reqs": 0, "num_tokens": 0}])
        elif path == "/generate":
            body = json.loads(raw or b"{}")
            n = int((body.get("sampling_params") or {}).get("max_new_tokens") or 4)
            self._reply(
                200,
                {
                    "text": " ".join(f"t{i}" for i in range(n)),
                    "output_ids": list(range(n)),
                    "meta_info": {
                        "id": "double",
                        "prompt_tokens": 1,
                        "completion_tokens": n,
                        "finish_reason": {"type": "length", "length": n},
                    },
                },
            )
        else:
            self._reply(404, {"error": f"not served by the double: {path}"})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def log_message(self, *_args: object) -> None:
        return


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
