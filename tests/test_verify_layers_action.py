"""The verify role's script layers in one task (action sglang.deploy.verify_layers): a script's result is
its last JSON line, a script that gives none fails its layer saying why (the API key masked), each layer
is reported in the role's words, and the controller's results file is scrubbed and 0644. The action's run
over a real host is the verify molecule scenario's and the e2e lab's."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from modload import REPO, load_module

action = load_module("verify_layers_action", REPO / "plugins" / "action" / "verify_layers.py")

KEY = "TestKey-0123456789-layers"  # test-only value
LAYER = {"key": "gpu", "title": "1 (GPU)", "script": "verify_gpu.py", "executable": "/usr/bin/python3"}


def test_the_last_json_line_is_the_result() -> None:
    stdout = 'log line\n{"status": "failed", "reason": "early"}\n{"status": "passed", "reason": "8x H200"}\n'
    assert action.script_result({"stdout": stdout, "rc": 0}, LAYER, [KEY]) == {
        "status": "passed",
        "reason": "8x H200",
    }


def test_a_script_without_a_result_fails_its_layer_saying_why() -> None:
    run = {"failed": True, "rc": 1, "msg": "non-zero return code", "stderr": f"Traceback: bad key {KEY}\n"}
    got = action.script_result(run, LAYER, [KEY])
    assert got == {
        "status": "failed",
        "reason": "verify_gpu.py with /usr/bin/python3 gave no result: non-zero return code"
        " Traceback: bad key ********",
    }
    timed_out = action.script_result({**run, "rc": 124, "stderr": ""}, {**LAYER, "timeout_s": 600}, [])
    assert timed_out["reason"].endswith("gave no result: timed out after 600 s; non-zero return code")
    no_json = action.script_result({"stdout": "{not json\n", "rc": 0}, LAYER, [])
    assert no_json["reason"].endswith("gave no result: no JSON line on stdout")
    assert len(action.script_result({**run, "stderr": "x" * 5000}, LAYER, [])["reason"]) == 600


def test_report_lines_in_the_roles_words() -> None:
    assert action.line(LAYER, {"status": "passed", "reason": "ok"}, True) == "verify layer 1 (GPU) passed: ok"
    assert action.line(LAYER, {"status": "skipped", "reason": "no GPU"}, True) == (
        "verify layer 1 (GPU) skipped: no GPU"
    )
    assert action.line(LAYER, {"status": "failed", "reason": "1 GPU"}, False) == (
        "verify layer 1 (GPU) failed: 1 GPU (rollback follows)"
    )


def test_results_file_is_scrubbed_and_0644(tmp_path: Path) -> None:
    path = tmp_path / "verify-results.json"
    results = {"http": {"status": "failed", "reason": f"401 Bearer {KEY}", "server": {"api_key": "other"}}}
    action.write_results(str(path), "host-a", results, [KEY])
    text = path.read_text()
    assert KEY not in text
    assert "other" not in text
    assert json.loads(text)["results"]["http"]["reason"] == "401 Bearer ********"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["verify-results.json"]  # no temporary file left
