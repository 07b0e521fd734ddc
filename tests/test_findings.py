"""The collection's one judge of a decider's answer (action sglang.deploy.findings): every error fails at
once, warnings are the task's warnings, errors let through on a lab host are marked as such."""

from __future__ import annotations

from modload import REPO, load_module

findings = load_module("findings_action", REPO / "plugins" / "action" / "findings.py")


def test_errors_fail_at_once_after_what() -> None:
    result = findings.judge({"errors": ["a is bad", "b is bad"], "warnings": ["w"]}, "invalid input")
    assert result["failed"] is True
    assert result["msg"] == "invalid input: a is bad | b is bad"
    assert result["errors"] == ["a is bad", "b is bad"]
    assert result["decided"]["warnings"] == ["w"]


def test_no_error_passes_with_the_warnings_and_the_answer() -> None:
    result = findings.judge({"errors": [], "warnings": ["WARNING: old driver"], "summary": "ok"})
    assert "failed" not in result
    assert result["warnings"] == ["WARNING: old driver"]
    assert result["decided"]["summary"] == "ok"
    assert result["changed"] is False
    # the summary is the task's message, printed without -v as an assert's success_msg is
    assert (result["msg"], result["_ansible_verbose_always"]) == ("ok", True)
    assert "warnings" not in findings.judge({"errors": []})
    assert "msg" not in findings.judge({"errors": []})


def test_errors_as_warnings_name_why() -> None:
    result = findings.judge({"errors": ["no config.json"], "warnings": []}, errors_as_warnings="lab host")
    assert "failed" not in result
    assert result["warnings"] == ["WARNING (lab host): no config.json"]


def test_an_answer_without_an_errors_list_fails() -> None:
    bads: list[object] = [None, [], {"warnings": []}, {"errors": "x"}]
    for bad in bads:
        result = findings.judge(bad)
        assert result["failed"] is True
        assert "decided must be a mapping with a list `errors`" in result["msg"]
