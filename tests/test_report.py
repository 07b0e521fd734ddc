"""Event -> summary/JUnit aggregation, replaying real ansible-runner events (tests/data/runner_events,
captured from runs of tests/data/runner_project/{pass,fail}.yml on localhost)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sglang_deploy.events import HostResult, HostStart, PlayStart, Stats, TaskStart, parse_event
from sglang_deploy.known_secrets import VarsReader
from sglang_deploy.redact import MASK, Redactor, secret_env_values
from sglang_deploy.report import (
    NO_ROLE,
    UNGATED_RC,
    RunRecorder,
    ungated_hosts,
    up_closing,
    verdict_rc,
    write_reports,
)

DATA = Path(__file__).parent / "data" / "runner_events"
T0 = datetime(2026, 11, 29, 12, 0, 0)
T1 = datetime(2026, 11, 29, 12, 0, 42)


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines() if line]


def replay(name: str, raws: list[dict[str, Any]] | None = None) -> RunRecorder:
    recorder = RunRecorder(redact=Redactor())
    for raw in raws if raws is not None else load(name):
        event = parse_event(raw)
        if event is not None:
            recorder.feed(event)
    return recorder


def summarize(recorder: RunRecorder, rc: int, status: str) -> dict[str, Any]:
    return recorder.summary(rc=rc, status=status, started=T0, finished=T1, meta={"playbook": "x.yml"})


def test_parse_event_types() -> None:
    kinds = [type(parse_event(raw)).__name__ for raw in load("pass")]
    assert kinds.count("PlayStart") == 1
    assert kinds.count("TaskStart") == 5
    assert kinds.count("HostStart") == 5
    assert kinds.count("HostResult") == 5  # item results of the loop are not separate results
    assert kinds.count("Stats") == 1
    events = [parse_event(raw) for raw in load("pass")]
    tasks = [e for e in events if isinstance(e, TaskStart)]
    assert tasks[0].label == "demo : Report ok"
    assert tasks[-1].label == "Play task after the role"
    assert isinstance(events[1], PlayStart)
    assert events[1].name == "Fixture - passing play"
    starts = [e for e in events if isinstance(e, HostStart)]
    assert {s.host for s in starts} == {"localhost"}


def test_outcomes_and_durations() -> None:
    results = [e for e in map(parse_event, load("fail")) if isinstance(e, HostResult)]
    assert [r.outcome for r in results] == ["ok", "changed", "skipped", "ok", "failed"]
    assert all(r.duration >= 0 for r in results)
    assert results[1].duration > 0
    assert results[-1].action == "ansible.builtin.assert"
    assert "demo_port must be 1-65535, got 0" in results[-1].message


def test_summary_of_passing_run() -> None:
    summary = summarize(replay("pass"), 0, "successful")
    assert summary["hosts"] == {
        "localhost": {
            "ok": 4, "changed": 1, "failed": 0, "skipped": 1, "unreachable": 0,
            "rescued": 0, "ignored": 0, "status": "ok",
        }
    }  # fmt: skip
    assert summary["roles"]["demo"]["tasks"] == 4
    assert summary["roles"][NO_ROLE]["tasks"] == 1
    assert summary["roles"]["demo"]["elapsed_s"] > 0
    assert summary["failed_tasks"] == []
    assert summary["rc"] == 0
    assert summary["status"] == "successful"
    assert summary["duration_s"] == 42.0
    assert summary["playbook"] == "x.yml"


def test_summary_of_failing_run_names_task_and_masks_secret() -> None:
    summary = summarize(replay("fail"), 2, "failed")
    host = summary["hosts"]["localhost"]
    assert (host["ok"], host["changed"], host["failed"], host["status"]) == (3, 1, 1, "failed")
    [failed] = summary["failed_tasks"]
    assert failed["task"] == "Validate the port"
    assert failed["role"] == ""
    assert failed["message"].startswith("demo_port must be 1-65535, got 0")
    assert "tok-abcdef123456" not in json.dumps(summary)
    assert f"token={MASK})" in failed["message"]


def test_counts_without_recap() -> None:
    """A run that dies before the recap still gets counts, computed the way the recap counts."""
    raws = [raw for raw in load("fail") if raw["event"] != "playbook_on_stats"]
    summary = summarize(replay("fail", raws), 2, "failed")
    host = summary["hosts"]["localhost"]
    assert (host["ok"], host["changed"], host["failed"], host["skipped"]) == (3, 1, 1, 1)


def test_unreachable_and_ignored() -> None:
    """Real failed event, re-labelled as unreachable / ignored failure."""
    raws = load("fail")
    failed = next(raw for raw in raws if raw["event"] == "runner_on_failed")
    unreachable = {**failed, "event": "runner_on_unreachable"}
    unreachable["event_data"] = {
        **failed["event_data"],
        "res": {"msg": "ssh: connect refused", "unreachable": True},
    }
    ignored = {**failed, "event_data": {**failed["event_data"], "ignore_errors": True}}
    event_u = parse_event(unreachable)
    event_i = parse_event(ignored)
    assert isinstance(event_u, HostResult)
    assert event_u.outcome == "unreachable"
    assert event_u.message == "ssh: connect refused"
    assert isinstance(event_i, HostResult)
    assert event_i.outcome == "ignored"
    recorder = replay(
        "x", [r for r in raws if r is not failed and r["event"] != "playbook_on_stats"] + [unreachable]
    )
    summary = summarize(recorder, 4, "failed")
    assert summary["hosts"]["localhost"]["status"] == "unreachable"
    assert summary["failed_tasks"][0]["outcome"] == "unreachable"
    root = recorder.junit("x.yml").getroot()
    assert root.get("errors") == "1"
    assert root.get("failures") == "0"


def test_stats_event() -> None:
    stats = parse_event(load("pass")[-1])
    assert isinstance(stats, Stats)
    assert stats.hosts["localhost"]["ok"] == 4


def test_junit(tmp_path: Path) -> None:
    recorder = replay("fail")
    summary = summarize(recorder, 2, "failed")
    write_reports(recorder, summary, [tmp_path / "latest", tmp_path / "runs" / "r1"])
    for directory in (tmp_path / "latest", tmp_path / "runs" / "r1"):
        assert json.loads((directory / "summary.json").read_text()) == summary
    root = ET.parse(tmp_path / "latest" / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("5", "1", "1")
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "localhost"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "demo : Report ok",
        "demo : Report changed",
        "demo : Skip always",
        "demo : Loop over items",
        "Validate the port",
    ]
    failure = cases[-1].find("failure")
    assert failure is not None
    assert "demo_port must be 1-65535" in (failure.get("message") or "")
    assert "tok-abcdef123456" not in (tmp_path / "latest" / "junit.xml").read_text()
    assert cases[2].find("skipped") is not None
    assert float(cases[1].get("time") or 0) > 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--api-key sk-123456 --port 1", f"--api-key {MASK} --port 1"),
        ("--api-key=sk-123456", f"--api-key={MASK}"),
        ("sglang_api_key: abcdefgh", f"sglang_api_key: {MASK}"),
        ('{"hf_token": "hf_abcdef"}', f'{{"hf_token": "{MASK}"}}'),
        ("Authorization: Bearer abcdef123456", f"Authorization: Bearer {MASK}"),
        ("port 30000 is fine", "port 30000 is fine"),
        # counts named *_tokens are not secrets
        ("--speculative-num-draft-tokens 4", "--speculative-num-draft-tokens 4"),
        ("drift: /etc/sglang/api-key.env: missing", "drift: /etc/sglang/api-key.env: missing"),
        ("SGLANG_API_KEY=abcdef123", f"SGLANG_API_KEY={MASK}"),
        ("max_new_tokens: 16, hf_token=hf_abcdef", f"max_new_tokens: 16, hf_token={MASK}"),
    ],
)
def test_redact_patterns(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_redact_known_values() -> None:
    redactor = Redactor(["s3cr3t-value", "abc"])  # too short values are not masked (noise)
    redactor.add("another-secret")
    assert redactor("x s3cr3t-value y another-secret abc") == f"x {MASK} y {MASK} abc"


def test_error_before_any_play_lands_in_output_tail() -> None:
    """A playbook ansible refuses to load (real events): no task ran, the reason is in the summary."""
    summary = summarize(replay("error"), 4, "failed")
    assert summary["hosts"] == {}
    assert summary["failed_tasks"] == []
    assert any("couldn't resolve module/action 'no.such.module'" in line for line in summary["output_tail"])
    assert summarize(replay("error"), 0, "successful")["output_tail"] == []


def test_callback_chatter_is_not_output() -> None:
    """Lines of callbacks such as profile_tasks during the play are not kept, warnings are."""
    raws = load("fail")
    chatter = {"event": "verbose", "stdout": "Sunday 29 November 2026  18:46:36 +0000 (0:00:00.155) *****"}
    warning = {"event": "verbose", "stdout": "[WARNING]: something to know"}
    raws = [*raws[:3], chatter, warning, *raws[3:], chatter]
    summary = summarize(replay("x", raws), 2, "failed")
    assert summary["output_tail"] == ["[WARNING]: something to know"]


def test_real_unreachable_host() -> None:
    """Real events of a run where one host (a missing container) is unreachable: ansible rc 4."""
    recorder = replay("unreachable")
    summary = summarize(recorder, 4, "failed")
    assert summary["hosts"]["localhost"]["status"] == "ok"
    gone = summary["hosts"]["sgd-no-such-container"]
    assert (gone["unreachable"], gone["status"]) == (1, "unreachable")
    [failed] = summary["failed_tasks"]
    assert (failed["host"], failed["outcome"], failed["role"]) == (
        "sgd-no-such-container",
        "unreachable",
        "demo",
    )
    assert "Failed to create temporary directory" in failed["message"]
    root = recorder.junit("pass.yml").getroot()
    assert (root.get("errors"), root.get("failures")) == ("1", "0")


def test_secret_env_values() -> None:
    env = {
        "HF_TOKEN": "hf_abcdefghijk",
        "USE_TOKEN": "true",
        "VAULT_PASSWORD_FILE": "/root/.vault-pass",
        "HOME": "/x",
    }
    assert secret_env_values(env) == ["hf_abcdefghijk"]


def test_secret_values_of_vars_skip_paths_flags_and_counts() -> None:
    """What the run learns from its vars: the key, not the key file's path (masking it would hide
    /etc/sglang everywhere), nor a short mode word ("systemd"), a boolean or a count of tokens."""
    data = {
        "sglang_api_key": "k3y-0123456789abcdef",
        "sglang_api_key_file": "/etc/sglang/api-key.env",
        "sglang_api_key_source": "systemd",
        "sglang_api_key_required": True,
        "verify_http_max_new_tokens": 160000000,
        "hf_token": "{{ vault_hf_token }}",
        "nested": {"db_password": "correct-horse-battery"},
    }
    assert list(VarsReader().secret_values(data)) == ["k3y-0123456789abcdef", "correct-horse-battery"]


def test_ungated_verdict_gets_its_own_exit_code() -> None:
    """verify's set_stats verdicts: an ungated host turns ansible-playbook's 0 into UNGATED_RC; a
    failed run keeps its own code; passed and baseline recorded stay 0."""
    summary = {"stats_data": {"verify_verdicts": {"b": "ungated", "a": "passed", "c": "ungated"}}}
    assert ungated_hosts(summary) == ["b", "c"]
    assert verdict_rc(0, summary) == UNGATED_RC == 6
    assert verdict_rc(2, summary) == 2
    fine = {"stats_data": {"verify_verdicts": {"a": "passed", "b": "baseline recorded"}}}
    assert verdict_rc(0, fine) == 0
    assert verdict_rc(0, {"stats_data": {}}) == 0
    assert ungated_hosts({"stats_data": {"verify_verdicts": "ungated"}}) == []


def _result(host: str, action: str, res: dict[str, Any], kind: str = "runner_on_ok") -> dict[str, Any]:
    """A runner event of a task result as ansible-runner writes it (the fields parse_event reads)."""
    data = {"host": host, "task": "t", "task_uuid": "u", "resolved_action": action, "res": res}
    return {"event": kind, "event_data": data}


LAB_RUN = [
    _result("lab1", "ansible.builtin.set_fact", {"ansible_facts": {"preflight_lab_mode": True, "__x": 1}}),
    _result(
        "lab1",
        "ansible.builtin.set_fact",
        {
            "ansible_facts": {
                "sglang_stack_release_id": "r1",
                "sglang_stack_release_dir": "/opt/sglang/releases/r1",
                "nccl_env_file": "/etc/sglang/nccl.env",
                "nccl_env_profile_resolved": "none",
                "sglang_service_unit_path": "/etc/systemd/system/sglang-kimi.service",
                "sglang_service_will_start": False,
            }
        },
    ),
    _result("lab1", "sglang.deploy.sglang_service_probe", {"probe": {"active": "inactive"}}),
    _result(
        "lab1",
        "ansible.builtin.set_fact",
        {"ansible_facts": {"sglang_service_unit_state": {"enabled": "enabled", "active": "inactive"}}},
    ),
    _result("lab1", "ansible.builtin.set_fact", {"ansible_facts": {"verify_results": {}}}),
    _result(
        "lab1",
        "ansible.builtin.set_fact",
        {
            "ansible_facts": {
                "verify_results": {
                    "gpu": {"status": "skipped", "reason": "no GPU (lab mode)", "gpus": []},
                    "nccl": {"status": "skipped", "reason": "no GPU (lab mode)"},
                    "http": {
                        "status": "skipped",
                        "reason": "sglang-kimi not running: not started in lab mode",
                    },
                }
            }
        },
    ),
    _result(
        "lab1",
        "ansible.builtin.set_fact",
        {
            "ansible_facts": {
                "verify_verdict": {
                    "status": "skipped",
                    "reason": "not gated: the benchmark and the gate did not run",
                    "failed": [],
                }
            }
        },
    ),
    _result(
        "gpu1",
        "ansible.builtin.set_fact",
        {
            "ansible_facts": {
                "preflight_lab_mode": False,
                "sglang_stack_release_id": "r2",
                "sglang_service_will_start": True,
                "verify_results": {
                    "gpu": {"status": "passed", "reason": "8 GPUs"},
                    "bench": {"status": "passed"},
                },
                "verify_verdict": {"status": "passed", "reason": "gate passed"},
            }
        },
    ),
    _result("gpu1", "sglang.deploy.sglang_service_probe", {"probe": {"active": "inactive"}}),
    _result(
        "gpu1",
        "ansible.builtin.set_fact",
        {"ansible_facts": {"sglang_service_unit_state": {"enabled": "enabled", "active": "active"}}},
    ),
]


def test_deployed_comes_from_the_exported_facts_the_last_value_winning() -> None:
    summary = summarize(replay("", LAB_RUN), 0, "successful")
    lab = summary["deployed"]["lab1"]
    assert lab["lab_mode"] is True
    assert (lab["release_id"], lab["unit_enabled"], lab["unit_active"]) == ("r1", "enabled", "inactive")
    assert lab["unit_will_start"] is False
    assert lab["verify_layers"]["gpu"] == {
        "status": "skipped",
        "reason": "no GPU (lab mode)",
    }  # figures dropped
    assert lab["verdict"]["status"] == "skipped"
    assert "__x" not in json.dumps(summary["deployed"])  # only the exported facts of KEPT_FACTS
    assert summary["deployed"]["gpu1"]["os"] is None  # a fact the run did not set: None, not a guess


def test_up_closing_says_what_the_lab_host_could_not_do() -> None:
    lines = [
        text
        for text, _style in up_closing(summarize(replay("", LAB_RUN), 0, "successful"), "inventory/lab.yml")
    ]
    text = "\n".join(lines)
    assert "  lab1: release r1 (/opt/sglang/releases/r1)" in lines
    assert (
        "    unit sglang-kimi.service (/etc/systemd/system/sglang-kimi.service): enabled, inactive" in lines
    )
    assert "  lab1: no GPU (lab mode): unit installed (enabled, inactive), not started" in lines
    assert "  lab1: verify gpu, nccl skipped: no GPU (lab mode)" in lines
    assert "  lab1: verify http skipped: sglang-kimi not running: not started in lab mode" in lines
    assert any(line.startswith("  lab1: benchmark and gate not run: verdict skipped") for line in lines)
    # the GPU host did everything: it is deployed, and named in no limit
    assert "  gpu1: release r2 (-)" in lines
    assert "    unit (unit unknown) (-): enabled, active" in lines
    limits = text.split("what could not be done here:")[1].split("next:")[0]
    assert "gpu1" not in limits
    assert "# each host's releases and which one is current\n  make demo    # no GPU here: " in text
    assert lines[-1].endswith("(sglang-deploy lab demo: a gated benchmark, its chart, a rollback)")
    for command in ("drift", "verify", "releases"):
        assert f"  sglang-deploy {command} -i inventory/lab.yml    # " in text


def test_up_closing_without_facts_says_so() -> None:
    assert up_closing({"deployed": {}}, "inv.yml") == [
        ("deployed: the run reported no deployment facts (see summary.json)", "bold")
    ]


def test_an_inconclusive_verdict_is_its_own_exit_code() -> None:
    """verify's inconclusive verdict (the same-window pair at its cap; the play fails it) exits
    INCONCLUSIVE_RC when every failed host is an inconclusive one, and never 0."""
    from sglang_deploy.report import INCONCLUSIVE_RC  # noqa: PLC0415

    summary: dict[str, Any] = {
        "stats_data": {"verify_verdicts": {"a": "inconclusive", "b": "passed"}},
        "hosts": {"a": {"failed": 1, "unreachable": 0}, "b": {"failed": 0, "unreachable": 0}},
    }
    assert verdict_rc(2, summary) == INCONCLUSIVE_RC == 7
    assert verdict_rc(0, summary) == INCONCLUSIVE_RC
    other = {**summary, "hosts": {**summary["hosts"], "b": {"failed": 1, "unreachable": 0}}}
    assert verdict_rc(2, other) == 2  # another host failed for another reason
    assert verdict_rc(4, summary) == 4
