"""sglang.deploy.verified_download (the sgl-kernel wheel's fetch, roles/sglang_stack/tasks/main.yml), run
as the role runs it: the collection's module through ansible, against a real HTTP server on loopback that
serves a file (a test double of the release asset's host, named as such). A file whose sha256 is one of
several accepted values is kept; one matching none is refused naming the file, the sha256 it got and the
accepted list, and leaves nothing behind; an accepted file already there is not fetched again."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from modload import run_module

WHEEL = "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"


class AssetHost(http.server.SimpleHTTPRequestHandler):
    """Test double of the release asset's host: serves files of one directory, counts the GETs."""

    gets: list[str] = []  # noqa: RUF012

    def do_GET(self) -> None:
        type(self).gets.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "served"
    root.mkdir()
    AssetHost.gets = []
    handler = functools.partial(AssetHost, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def run(args: dict[str, Any], check: bool = False) -> dict[str, Any]:
    return run_module("verified_download", args, *(["--check"] if check else []),
                      env={"no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"})  # fmt: skip


def test_one_of_several_accepted_sha256_is_kept_then_not_fetched_again(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = served
    body = os.urandom(300_000)
    (root / WHEEL).write_bytes(body)
    got = hashlib.sha256(body).hexdigest()
    dest = tmp_path / "wheels" / WHEEL
    dest.parent.mkdir()
    args = {"url": f"{url}/{WHEEL}", "dest": str(dest), "sha256": ["a" * 64, got, "b" * 64]}
    # check mode: nothing fetched, a real run would
    res = run(args, check=True)
    assert (res["changed"], res["downloaded"], dest.exists(), AssetHost.gets) == (True, False, False, [])
    res = run(args)
    assert res.get("failed") is not True, res
    assert (res["changed"], res["downloaded"], res["sha256"], res["size"]) == (True, True, got, len(body))
    assert dest.read_bytes() == body
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    assert AssetHost.gets == [f"/{WHEEL}"]
    # a rerun hashes the kept file and makes no request
    res = run(args)
    assert (res["changed"], res["downloaded"], res["sha256"]) == (False, False, got)
    assert AssetHost.gets == [f"/{WHEEL}"]
    assert sorted(p.name for p in dest.parent.iterdir()) == [WHEEL]


def test_a_wheel_matching_none_is_refused_and_nothing_is_left(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = served
    body = b"a sixth re-upload" * 1000
    (root / WHEEL).write_bytes(body)
    got = hashlib.sha256(body).hexdigest()
    dest = tmp_path / WHEEL
    accepted = ["c9a389f5eca00675c6e842faafb4c66f01edf49c8a4f58185978fa294f461822",
                "4be1313f82808f0fb6df8107e79f6b6cea07a4aa2b20139e0342eafe31eb28bd"]  # fmt: skip
    res = run({"url": f"{url}/{WHEEL}", "dest": str(dest), "sha256": accepted})
    assert res["failed"] is True
    msg = res["msg"]
    assert msg.startswith(
        f"{WHEEL}: sha256 {got} is none of the 2 accepted value(s): {accepted[0]}, {accepted[1]}"
    )
    assert "sglang_stack_sgl_kernel_sha256_extra" in msg
    assert list(tmp_path.iterdir()) == [root]  # no wheel, no temporary file
    # the operator adds the value (after checking it against SGLang's index): accepted
    res = run({"url": f"{url}/{WHEEL}", "dest": str(dest), "sha256": [*accepted, got]})
    assert (res["changed"], res["sha256"]) == (True, got)


def test_a_tampered_kept_file_is_replaced_and_bad_arguments_refused(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = served
    body = b"the published wheel"
    (root / WHEEL).write_bytes(body)
    dest = tmp_path / WHEEL
    dest.write_bytes(b"tampered")
    res = run({"url": f"{url}/{WHEEL}", "dest": str(dest), "sha256": [hashlib.sha256(body).hexdigest()]})
    assert (res["changed"], res["downloaded"]) == (True, True)
    assert dest.read_bytes() == body
    bad = run({"url": f"{url}/{WHEEL}", "dest": str(dest), "sha256": ["ABC"]})
    assert bad["failed"] is True
    assert "allowed a non-empty list of 64 lowercase hex" in bad["msg"]
    missing = run({"url": f"{url}/nope.whl", "dest": str(tmp_path / "nope.whl"), "sha256": ["a" * 64]})
    assert missing["failed"] is True
    assert "404" in missing["msg"]
    assert not (tmp_path / "nope.whl").exists()
