"""The router's worker list made equal to the inventory (role sglang_router, entry point workers): the pure
rules (plugins/module_utils/router_workers.py) and the module (plugins/modules/router_workers.py) run
through ansible-playbook against RouterDouble, a TEST DOUBLE of sglang-router's /workers admin API (the
0.3.2 protocol: GET {"workers": [{id, url, is_healthy}], "total"}, POST 202 and a background add, DELETE
by id, the admin key required). The real router runs in the sglang_router molecule scenario and the
fleet e2e."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from http_double import JsonHandler, serving
from modload import REPO, load_module

from sglang_deploy.commands_drift import ROUTER_DRIFT

rule = load_module("router_workers_rule", REPO / "plugins/module_utils/router_workers.py")
ADMIN = "Router-Admin-Test-Key-0123456789"  # test-only value
W1_KEY = "Worker-One-Test-Key-abcdef012345"  # test-only value


def server(host: str, url: str, *, wanted: bool, status: str = "passed", api_key: str = "") -> dict[str, Any]:
    return {"host": host, "url": url, "status": status, "wanted": wanted, "api_key": api_key}


def listed(*urls: str, healthy: bool = True) -> list[dict[str, Any]]:
    return [{"id": f"id-{n}", "url": url, "healthy": healthy} for n, url in enumerate(urls)]


def test_plan_registers_the_missing_and_prunes_the_extra() -> None:
    servers = [
        server("g1", "http://10.0.0.11:30000", wanted=True),
        server("g2", "http://10.0.0.12:30000", wanted=True),
        server("g3", "http://10.0.0.13:30000", wanted=False, status="rolled back"),
    ]
    now = listed("http://10.0.0.11:30000", "http://10.0.0.13:30000", "http://10.0.0.99:30000")
    plan = rule.plan(now, servers, router="r1", prune=True)
    assert plan["missing"] == [{"host": "g2", "url": "http://10.0.0.12:30000"}]
    assert plan["extra"] == [
        {"id": "id-1", "url": "http://10.0.0.13:30000"},
        {"id": "id-2", "url": "http://10.0.0.99:30000"},
    ]
    assert plan["messages"] == [
        "router r1: g3 (http://10.0.0.13:30000) is not registered: verify status 'rolled back'",
        "router r1: worker http://10.0.0.12:30000 (g2) missing: "
        "in the inventory and verified, not registered",
        "router r1: worker http://10.0.0.13:30000 registered but its verify has not passed",
        "router r1: worker http://10.0.0.99:30000 registered but not in the inventory",
    ]
    # `sglang-deploy drift` names exactly the drift lines (not the not-registered note)
    drift = [m for m in plan["messages"] if ROUTER_DRIFT.fullmatch(m)]
    assert drift == plan["messages"][1:]
    kept = rule.plan(now, servers, router="r1", prune=False)
    assert kept["extra"] == []
    assert not any("registered but" in m for m in kept["messages"])


def test_an_equal_list_is_no_change() -> None:
    servers = [server("g1", "http://a:1", wanted=True), server("g2", "http://b:1", wanted=True)]
    plan = rule.plan(listed("http://b:1", "http://a:1"), servers, router="r", prune=True)
    assert plan == {"missing": [], "extra": [], "messages": []}


def test_plan_removes_the_named_workers_once() -> None:
    """The roll's drain: `remove` takes a listed worker out whatever `servers` says, once even when pruning
    would remove it too; one not listed is no change."""
    now = listed("http://a:1", "http://b:1")
    plan = rule.plan(now, [], router="r1", prune=False, remove=["http://b:1", "http://gone:1"])
    assert plan["missing"] == []
    assert plan["extra"] == [{"id": "id-1", "url": "http://b:1"}]
    assert plan["messages"] == ["router r1: worker http://b:1 taken out of the router (drain)"]
    both = rule.plan(
        now, [server("a", "http://a:1", wanted=True)], router="r1", prune=True, remove=["http://b:1"]
    )
    assert both["extra"] == [{"id": "id-1", "url": "http://b:1"}]
    assert rule.plan(now, [], router="r1", prune=False, remove=["http://c:1"])["extra"] == []


def test_none_listed() -> None:
    now = listed("http://a:1")
    assert rule.none_listed(now, ["http://b:1"])
    assert not rule.none_listed(now, ["http://b:1", "http://a:1"])
    assert rule.none_listed([], [])


def test_all_healthy() -> None:
    assert rule.all_healthy(listed("http://a:1", "http://b:1"), ["http://a:1"])
    assert not rule.all_healthy(listed("http://a:1", healthy=False), ["http://a:1"])
    assert not rule.all_healthy(listed("http://a:1"), ["http://a:1", "http://b:1"])
    assert rule.all_healthy([], [])


class RouterDouble(JsonHandler):
    """TEST DOUBLE of sglang-router 0.3.2's /workers admin routes; the class holds its state."""

    workers: ClassVar[list[dict[str, Any]]] = []
    posted: ClassVar[list[dict[str, Any]]] = []
    lock = threading.Lock()

    def _admin(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {ADMIN}":
            return True
        self._answer(401, {"error": "unauthorized"})
        return False

    def do_GET(self) -> None:
        if self.path == "/workers" and self._admin():
            with self.lock:
                self._answer(200, {"workers": list(self.workers), "total": len(self.workers)})

    def do_POST(self) -> None:
        if self.path != "/workers" or not self._admin():
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.lock:
            self.posted.append(body)

        def add() -> None:  # the router's background job: listed healthy a moment later
            time.sleep(0.3)
            with self.lock:
                self.workers.append({"id": str(uuid.uuid4()), "url": body["url"], "is_healthy": True})

        threading.Thread(target=add, daemon=True).start()
        self._answer(202, {"status": "accepted"})

    def do_DELETE(self) -> None:
        if not self.path.startswith("/workers/") or not self._admin():
            return
        wid = self.path.removeprefix("/workers/")
        with self.lock:
            before = len(self.workers)
            self.workers[:] = [w for w in self.workers if w["id"] != wid]
            self._answer(200 if len(self.workers) < before else 404, {})


@pytest.fixture
def router() -> Iterator[str]:
    RouterDouble.workers = [
        {"id": "keep", "url": "http://10.0.0.11:30000", "is_healthy": True},
        {"id": "hand-added", "url": "http://10.0.0.99:30000", "is_healthy": True},
    ]
    RouterDouble.posted = []
    with serving(RouterDouble) as url:
        yield url


def play(
    tmp_path: Path, api_url: str, *extra: str, admin: str = ADMIN, **params: Any
) -> subprocess.CompletedProcess[str]:
    """The module through ansible-playbook; ``params`` replace its options (default: three servers)."""
    servers = [
        server("g1", "http://10.0.0.11:30000", wanted=True),
        server("g2", "http://10.0.0.12:30000", wanted=True, api_key=W1_KEY),
        server("g3", "http://10.0.0.13:30000", wanted=False, status="failed"),
    ]
    options = {
        "api_url": api_url, "admin_key": admin, "router": "r1", "servers": servers, "wait_s": 20,
        "wait_delay_s": 1, **params,
    }  # fmt: skip
    task = {"name": "Workers", "sglang.deploy.router_workers": options, "register": "out"}
    report = {"name": "Result", "ansible.builtin.debug": {"var": "out"}}
    book = tmp_path / "play.yml"
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task, report]}]))
    return subprocess.run(
        [str(REPO / ".venv/bin/ansible-playbook"), "-i", "localhost,", "-c", "local", str(book), *extra,
         "-e", f"ansible_python_interpreter={sys.executable}"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def result_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    match = re.search(r'"out": (\{.*?\n    \})', run.stdout, re.S)
    assert match, run.stdout[-3000:]
    parsed: dict[str, Any] = json.loads(match.group(1))
    return parsed


def test_check_mode_reads_and_reports_then_a_run_changes_then_nothing(router: str, tmp_path: Path) -> None:
    checked = play(tmp_path, router, "--check")
    assert checked.returncode == 0, checked.stdout[-3000:]
    out = result_of(checked)
    assert out["changed"] is True
    assert out["missing"] == [{"host": "g2", "url": "http://10.0.0.12:30000"}]
    assert out["removed"] == [{"id": "hand-added", "url": "http://10.0.0.99:30000"}]
    assert "router r1: worker http://10.0.0.99:30000 registered but not in the inventory" in out["msg"]
    assert RouterDouble.posted == []  # check mode only read
    assert {w["url"] for w in RouterDouble.workers} == {"http://10.0.0.11:30000", "http://10.0.0.99:30000"}

    applied = play(tmp_path, router)
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert result_of(applied)["changed"] is True
    assert RouterDouble.posted == [{"url": "http://10.0.0.12:30000", "api_key": W1_KEY}]
    assert {w["url"] for w in RouterDouble.workers} == {"http://10.0.0.11:30000", "http://10.0.0.12:30000"}
    assert W1_KEY not in applied.stdout + applied.stderr  # no_log option: the key is never shown
    assert ADMIN not in applied.stdout + applied.stderr

    again = play(tmp_path, router)
    assert again.returncode == 0, again.stdout[-3000:]
    assert result_of(again)["changed"] is False
    assert len(RouterDouble.posted) == 1


def test_a_router_that_does_not_answer(router: str, tmp_path: Path) -> None:
    gone = "http://127.0.0.1:9"  # nothing listens (discard port)
    checked = play(tmp_path, gone, "--check")
    assert checked.returncode == 0, checked.stdout[-3000:]
    out = result_of(checked)
    assert out["answered"] is False
    assert out["changed"] is True
    assert (
        out["msg"][0] == f"router r1: not answering on {gone} (check mode: not installed or not started yet)"
    )
    failed = play(tmp_path, gone)
    assert failed.returncode != 0
    assert f"router r1: {gone}/workers" in failed.stdout
    wrong_key = play(tmp_path, router, admin="not-the-admin-key")
    assert wrong_key.returncode != 0
    assert "answered 401" in wrong_key.stdout


def test_remove_takes_one_worker_out_and_waits_until_it_is_gone(router: str, tmp_path: Path) -> None:
    """The roll's drain through the module: check mode reads and reports; the run DELETEs the worker
    and returns once the router no longer lists it; the rerun changes nothing; the others stay."""
    drain: dict[str, Any] = {"servers": [], "prune": False, "remove": ["http://10.0.0.11:30000"]}
    checked = play(tmp_path, router, "--check", **drain)
    assert checked.returncode == 0, checked.stdout[-3000:]
    out = result_of(checked)
    assert out["changed"] is True
    assert out["removed"] == [{"id": "keep", "url": "http://10.0.0.11:30000"}]
    assert out["msg"] == ["router r1: worker http://10.0.0.11:30000 taken out of the router (drain)"]
    assert len(RouterDouble.workers) == 2  # check mode only read

    applied = play(tmp_path, router, **drain)
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert result_of(applied)["changed"] is True
    assert [w["url"] for w in RouterDouble.workers] == ["http://10.0.0.99:30000"]
    assert RouterDouble.posted == []
    again = play(tmp_path, router, **drain)
    assert again.returncode == 0, again.stdout[-3000:]
    assert result_of(again)["changed"] is False
