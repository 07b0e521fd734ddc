"""The subcommands drift, verify, releases, rollback, autotune and up's rolling options: argument
parsing, the drift exit codes and listing (real ansible-playbook runs on localhost through the CLI),
the diff summaries, the verify report (Markdown + PNG chart), the roll's batches and stop rule."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
import yaml

from sglang_deploy import cli
from sglang_deploy.commands_drift import drift_report, render_text
from sglang_deploy.commands_releases import host_listings
from sglang_deploy.commands_releases import render_text as releases_text
from sglang_deploy.diffs import change_summary
from sglang_deploy.options import Serial, parse_percent, parse_serial
from sglang_deploy.redact import MASK
from sglang_deploy.rollout import Rollout, batches, exceeds, failed_hosts, fleet_hosts
from sglang_deploy.runner import RunRequest, run_playbook
from sglang_deploy.verify_report import LAYERS, build_report, collect, render_chart, throughput_series

REPO = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "data" / "runner_project"
RESULTS = Path(__file__).parent / "data" / "verify_report" / "verify-results.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sglang_deploy(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "sglang-deploy"
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    return subprocess.run([str(exe), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip


# ---- argument parsing --------------------------------------------------------------------------
def test_new_subcommands_parse() -> None:
    parser = cli.build_parser()
    drift = parser.parse_args(["drift", "--json", "-l", "gpu-1", "-e", "a=1"])
    assert (drift.handler, drift.json, drift.limit, drift.extra_vars, drift.playbook) == (
        "sglang_deploy.commands_drift:run", True, "gpu-1", ["a=1"], "site.yml")  # fmt: skip
    verify = parser.parse_args(["verify", "--report-dir", "out"])
    assert (verify.handler, verify.report_dir, verify.json, verify.playbook) == (
        "sglang_deploy.commands_verify:run", Path("out"), False, "playbooks/verify.yml")  # fmt: skip
    rollback = parser.parse_args(["rollback", "--to", "0123456789ab", "--json"])
    assert (rollback.handler, rollback.to, rollback.json) == (
        "sglang_deploy.commands_rollback:run",
        "0123456789ab",
        True,
    )
    assert parser.parse_args(["rollback"]).to is None
    releases = parser.parse_args(["releases", "-i", "inv.yml"])
    assert (releases.handler, releases.inventory) == ("sglang_deploy.commands_releases:run", Path("inv.yml"))
    autotune = parser.parse_args(["autotune", "-e", "@tune.yml"])
    assert (autotune.handler, autotune.extra_vars) == ("sglang_deploy.commands_autotune:run", ["@tune.yml"])
    for command in (["drift"], ["verify"], ["releases"], ["rollback"], ["autotune"]):
        assert callable(cli.resolve_handler(parser.parse_args(command).handler))


def test_up_rolling_options() -> None:
    parser = cli.build_parser()
    plain = parser.parse_args(["up"])
    assert (plain.serial, plain.max_fail_percent) == (None, None)
    rolling = parser.parse_args(["up", "--serial", "2", "--max-fail-percent", "34"])
    assert (rolling.serial, rolling.max_fail_percent) == (Serial(2), 34.0)
    assert parser.parse_args(["up", "--serial", "50%"]).serial == Serial(50, percent=True)


BAD_ARGV = [
    ["up", "--serial", "0"], ["up", "--serial", "x"], ["up", "--serial", "101%"],
    ["up", "--max-fail-percent", "101"], ["up", "--max-fail-percent", "-1"],
    ["drift", "--check"], ["releases", "--tags", "x"],
]  # fmt: skip


@pytest.mark.parametrize("argv", BAD_ARGV)
def test_bad_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_serial_and_percent_types() -> None:
    assert parse_serial("3") == Serial(3)
    assert parse_serial("25%") == Serial(25, percent=True)
    assert parse_percent("0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match=r"allowed a number 0\.\.100"):
        parse_percent("abc")


# ---- rolling deployment ------------------------------------------------------------------------
def test_batches_in_inventory_order() -> None:
    hosts = ["h1", "h2", "h3", "h4", "h5"]
    assert batches(hosts, Serial(2)) == [["h1", "h2"], ["h3", "h4"], ["h5"]]
    assert batches(hosts, Serial(10)) == [hosts]
    assert batches(hosts, Serial(40, percent=True)) == [["h1", "h2"], ["h3", "h4"], ["h5"]]  # floor(2.0)
    assert batches(hosts, Serial(10, percent=True)) == [[h] for h in hosts]  # at least one host
    assert batches([], Serial(1)) == []


def test_stop_rule_is_ansibles() -> None:
    assert not exceeds(0, 2, 0)
    assert exceeds(1, 2, 0)
    assert not exceeds(1, 2, 50)  # exactly P% goes on
    assert exceeds(2, 3, 50)


def test_failed_hosts_of_a_batch() -> None:
    summary = {"hosts": {"a": {"status": "ok"}, "b": {"status": "failed"}, "c": {"status": "unreachable"}}}
    assert failed_hosts(summary, ["a", "b", "c"], 2) == ["b", "c"]
    assert failed_hosts({"hosts": {}}, ["a", "b"], 4) == ["a", "b"]  # no recap: the run failed early
    assert failed_hosts({"hosts": {}}, ["a"], 0) == []


def test_rollout_stops_before_the_next_batch() -> None:
    roll = Rollout(Serial(1), 0.0, ["h1", "h2", "h3"])
    plan = roll.plan()
    assert roll.record(plan[0], "r1", 0, {"hosts": {"h1": {"status": "ok"}}})
    assert not roll.record(plan[1], "r2", 2, {"hosts": {"h2": {"status": "failed"}}})
    report = roll.report()
    assert report["not_started"] == ["h3"]
    assert report["rc"] == 2
    assert "1 of 1 host(s) of batch 2 failed (h2)" in report["stopped"]
    tolerant = Rollout(Serial(2), 50.0, ["h1", "h2", "h3"])
    assert tolerant.record(
        ["h1", "h2"], "r1", 2, {"hosts": {"h1": {"status": "failed"}, "h2": {"status": "ok"}}}
    )


def test_fleet_hosts_reads_the_inventory(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yml"
    inventory.write_text(
        "all:\n  children:\n    sglang_servers:\n      hosts:\n"
        "        b-2: {}\n        a-1: {}\n        c-3: {}\n"
        "    other:\n      hosts:\n        x: {}\n"
    )
    assert fleet_hosts(inventory, None, REPO) == ["b-2", "a-1", "c-3"]
    assert fleet_hosts(inventory, "a-1,c-3", REPO) == ["a-1", "c-3"]
    assert fleet_hosts(tmp_path / "missing.yml", None, REPO) == []


# ---- diff summaries ----------------------------------------------------------------------------
def test_change_summary_of_text_dict_loop_and_no_log() -> None:
    env = "/etc/sglang/nccl.env"
    text = change_summary({"changed": True, "diff": [{"before": "a=1\nb=2\n", "after": "a=1\nb=3\n",
                           "before_header": env, "after_header": env}]})  # fmt: skip
    assert text.splitlines() == ["/etc/sglang/nccl.env: +1 -1 lines", "  -b=2", "  +b=3"]
    state = change_summary(
        {"diff": {"before": {"path": "/k", "state": "absent"}, "after": {"path": "/k", "state": "file"}}}
    )
    assert state == "/k: state: absent -> file"
    created = change_summary({"diff": {"before": "", "after": "x\ny\n", "after_header": "/u"}})
    assert created.splitlines() == ["/u: would be created (2 lines)", "  +x", "  +y"]
    loop = change_summary({"msg": "All items completed", "results": [
        {"changed": False, "item": "a"},
        {"changed": True, "item": "sglang", "msg": "drift: 2 files differ from the receipt"},
        {"changed": True, "_ansible_item_label": "key", "censored": "hidden"}]})  # fmt: skip
    assert loop.splitlines() == ["[sglang] changed", "  drift: 2 files differ from the receipt",
                                 "[key] (no_log: details hidden)"]  # fmt: skip
    assert change_summary({"censored": "the output has been hidden"}) == "(no_log: details hidden)"
    assert change_summary({"diff": {"prepared": "patch 0005 would apply"}}) == "patch 0005 would apply"
    many = "\n".join(f"l{i}" for i in range(20))
    lines = change_summary({"diff": {"before": "", "after": many + "\n", "after_header": "/f"}}).splitlines()
    assert lines[0] == "/f: would be created (20 lines)"
    assert len(lines) == 8  # the first 6 changed lines + "... 14 more changed lines"
    long_change = change_summary(
        {"diff": {"before": "x\n", "after": many, "after_header": "/f"}}
    ).splitlines()
    assert long_change[-1] == "  ... 15 more changed lines"


# ---- drift through the CLI ---------------------------------------------------------------------
def drift(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return sglang_deploy("drift", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path / "art"),
                         "--playbook", str((PROJECT / "cli_drift.yml").relative_to(REPO)),
                         "-e", f"fixture_dir={tmp_path}", *extra)  # fmt: skip


def test_drift_exit_codes_listing_and_junit(tmp_path: Path) -> None:
    managed = tmp_path / "managed.conf"
    managed.write_text("alpha=1\nbeta=3\n")
    found = drift(tmp_path)
    assert found.returncode == 2, found.stdout + found.stderr
    assert "DRIFT localhost: 1 task(s) would change the host" in found.stdout
    assert "  - Write the managed file" in found.stdout
    assert "+1 -1 lines" in found.stdout
    assert "drift: drift on 1 of 1 host(s), 1 task(s) (exit 2)" in found.stdout
    assert managed.read_text() == "alpha=1\nbeta=3\n"  # check mode: nothing written
    junit = ET.parse(tmp_path / "art" / "junit.xml").getroot()
    [failure] = junit.iter("failure")
    assert failure.get("type") == "drift"
    assert "+1 -1 lines" in str(failure.get("message"))
    assert junit.get("failures") == "1"

    as_json = drift(tmp_path, "--json")
    assert as_json.returncode == 2
    report = json.loads(as_json.stdout)  # stdout is the JSON document alone; progress on stderr
    assert (report["result"], report["rc"], report["drifted_tasks"]) == ("drift", 2, 1)
    [task] = report["hosts"]["localhost"]["drifted"]
    assert task["task"] == "Write the managed file"
    assert task["detail"].splitlines()[1:] == ["  -beta=3", "  +beta=2"]
    assert " TASK " in as_json.stderr or "TASK " in as_json.stderr

    managed.write_text("alpha=1\nbeta=2\n")
    clean = drift(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "no drift: localhost" in clean.stdout
    assert next(ET.parse(tmp_path / "art" / "junit.xml").getroot().iter("failure"), None) is None

    error = drift(tmp_path, "-e", "fixture_fail=true")
    assert error.returncode == 1
    assert "ERROR localhost: Fail on request: fixture failure on request" in error.stdout
    missing = drift(tmp_path, "-i", str(tmp_path / "nope.yml"))
    assert missing.returncode == 5


def test_drift_lists_changed_no_log_tasks(tmp_path: Path) -> None:
    """ansible-runner replaces a no_log task's result with {'censored': ...} (its `changed` lost):
    the drift listing must still name such a task, alone and as a loop, and count it."""
    (tmp_path / "managed.conf").write_text("alpha=1\nbeta=2\n")
    (tmp_path / "token-a").write_text("secret-token\n")
    (tmp_path / "token-a").chmod(0o600)
    found = drift(tmp_path, "-e", "fixture_no_log=true", "--json")
    assert found.returncode == 2, found.stdout + found.stderr
    report = json.loads(found.stdout)
    drifted = {t["task"]: t["detail"] for t in report["hosts"]["localhost"]["drifted"]}
    assert drifted == {
        "Write the token file (no_log)": "(no_log: details hidden)",
        "Write the token files (no_log loop)": "(no_log: details hidden)",
    }
    assert report["drifted_tasks"] == 2
    assert "secret-token" not in found.stdout + found.stderr
    (tmp_path / "token").write_text("secret-token\n")
    (tmp_path / "token-b").write_text("secret-token\n")
    for name in ("token", "token-b"):
        (tmp_path / name).chmod(0o600)
    clean = drift(tmp_path, "-e", "fixture_no_log=true")
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_drift_output_masks_secrets(tmp_path: Path) -> None:
    """A drifted file whose diff quotes the API key (-e): the key is masked in the listing, the JSON,
    junit.xml and summary.json."""
    (tmp_path / "managed.conf").write_text("alpha=1\nbeta=2\n")
    key = "sk-drift-5e0c7a91b2d4f6"
    found = drift(tmp_path, "-e", f"fixture_api_key={key}", "--json")
    assert found.returncode == 2, found.stdout + found.stderr
    report = json.loads(found.stdout)
    [task] = report["hosts"]["localhost"]["drifted"]
    assert task["task"] == "Write the key file (diff quotes a secret)"
    assert f"+SERVICE_KEY={MASK}" in task["detail"]
    for text in (found.stdout, found.stderr, *(p.read_text() for p in (tmp_path / "art").glob("*.*"))):
        assert key not in text
    assert not (tmp_path / "key.env").exists()


def test_drift_report_verdicts() -> None:
    changed = {"host": "h", "task": "t", "role": "r", "action": "copy", "detail": "d"}
    base: dict[str, Any] = {"hosts": {"h": {"ok": 3, "changed": 1, "failed": 0, "unreachable": 0}}}
    assert drift_report({**base, "changed_tasks": [changed], "failed_tasks": []}, 0)["rc"] == 2
    assert drift_report({**base, "changed_tasks": [], "failed_tasks": []}, 0)["rc"] == 0
    unreachable = {"hosts": {"h": {"unreachable": 1}}, "changed_tasks": [changed], "failed_tasks": []}
    report = drift_report(unreachable, 4)
    assert (report["rc"], report["hosts"]["h"]["status"]) == (1, "unreachable")
    assert (
        render_text(report)[-1] == "drift: error (ansible-playbook rc=4): the check did not complete (exit 1)"
    )
    assert drift_report({"hosts": {}, "changed_tasks": [], "failed_tasks": []}, 1)["rc"] == 1  # did not start


# ---- set_stats data (releases, rollback) -------------------------------------------------------
def test_stats_data_reaches_the_summary_redacted(tmp_path: Path) -> None:
    key = "sk-fixture-3b9c2f6d0e1a"
    request = RunRequest(project_dir=PROJECT, playbook="cli_stats.yml", inventory=PROJECT / "inventory.yml",
                         artifacts_dir=tmp_path, extra_vars=(f"fixture_api_key={key}",))  # fmt: skip
    result = run_playbook(request)
    assert result.rc == 0
    listing = host_listings(result.summary)["localhost"]
    assert listing["api_key"] == MASK
    assert key not in result.summary_path.read_text()
    lines = releases_text(host_listings(result.summary))
    assert lines[0] == "localhost: current -> bbbbbbbbbbbb  (/opt/sglang/releases)"
    assert lines[1].startswith(
        " * bbbbbbbbbbbb  2026-11-30T10:00:00Z  complete, checks ok; sglang 0.5.9, torch 2.9.1"
    )
    assert lines[2].startswith("   aaaaaaaaaaaa")


# ---- verify report -----------------------------------------------------------------------------
def fetched(tmp_path: Path, host: str = "gpu-1", data: dict[str, Any] | None = None) -> Path:
    dest = tmp_path / "fetched" / host / "var" / "lib" / "sglang-deploy"
    (dest / "bench").mkdir(parents=True)
    payload = data if data is not None else json.loads(RESULTS.read_text())
    (dest / "verify-results.json").write_text(json.dumps(payload))
    (dest / "production_v2.md").write_text("# production\n")
    (dest / "bench" / "c1.jsonl").write_text("{}\n")
    return tmp_path / "fetched"


def test_series_and_chart(tmp_path: Path) -> None:
    results = json.loads(RESULTS.read_text())["results"]
    series = throughput_series(results)
    assert series["this run"] == [(1, 151.2), (30, 2210.5), (100, 4890.0), (250, 6020.4)]
    assert series["baseline"] == [(1, 150.0), (30, 2250.0), (100, 5000.0), (250, 6100.0)]
    chart = tmp_path / "c.png"
    assert render_chart("gpu-1", series, chart)
    assert chart.read_bytes().startswith(PNG_MAGIC)
    assert chart.stat().st_size > 5000
    assert not render_chart("gpu-1", {"baseline": series["baseline"]}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_report_markdown_and_missing_hosts(tmp_path: Path) -> None:
    data = json.loads(RESULTS.read_text())
    data["results"]["gate"]["baseline"]["reason"] = "api_key=supersecretvalue1 | pipe"
    source = fetched(tmp_path, data=data)
    assert set(collect(source)) == {"gpu-1"}
    built = build_report(
        source, tmp_path, {"run_id": "r1", "rc": 0}, ["gpu-1", "gpu-2"], {"gpu-2": "unreachable"}
    )
    text = (tmp_path / "report.md").read_text()
    assert "# Verify report - run r1" in text
    assert "| gpu-1 | passed | 0123456789ab | passed |" in text
    assert "| gpu-2 | no results fetched | - | - |" in text
    assert "No verify-results.json was fetched: unreachable" in text
    assert "| 5 HTTP | passed |" in text
    assert "| 30 | 2210.5 | 2250.0 | -1.8% | - | - | ok |" in text  # a record without allowed/margin
    assert "![output tok/s against concurrency](throughput-gpu-1.png)" in text
    assert "- [production_v2.md](fetched/gpu-1/var/lib/sglang-deploy/production_v2.md)" in text
    assert "- [c1.jsonl](fetched/gpu-1/var/lib/sglang-deploy/bench/c1.jsonl)" in text
    assert "supersecretvalue1" not in text
    assert "\\| pipe" in text
    assert Path(built["charts"]["gpu-1"]).read_bytes().startswith(PNG_MAGIC)
    assert built["hosts"]["gpu-1"]["gate"] == "passed"


def test_report_repeats_the_documents_test_double_note(tmp_path: Path) -> None:
    """A host whose unit runs a test double (the production document's note): the report says so above
    its figures, so none passes for SGLang's; without the note, nothing is added."""
    source = fetched(tmp_path, "lab")
    doc = source / "lab" / "var" / "lib" / "sglang-deploy" / "production_v2.md"
    note = ["> **Test double, not SGLang**: the unit `sglang-kimi` runs `python double.py`", "> more."]
    doc.write_text("\n".join(["# production", "", *note, "", "## 1. Hardware"]) + "\n")
    with patch("sglang_deploy.verify_report.render_chart", wraps=render_chart) as chart:
        build_report(source, tmp_path, {"run_id": "r3"}, ["lab"], {})
    assert chart.call_args.kwargs == {"test_double": True}  # the chart's title says so too
    text = (tmp_path / "report.md").read_text()
    assert "\n".join(["## lab", "", *note, ""]) in text
    doc.write_text("# production\n")
    build_report(source, tmp_path, {"run_id": "r4"}, ["lab"], {})
    assert "Test double" not in (tmp_path / "report.md").read_text()


def test_report_without_a_benchmark(tmp_path: Path) -> None:
    data = json.loads(RESULTS.read_text())
    for key in ("bench", "gate"):
        del data["results"][key]
    data["results"]["http"] = {
        "status": "skipped",
        "reason": "sglang-kimi not running: not started in lab mode",
    }
    built = build_report(fetched(tmp_path, "lab", data), tmp_path, {"run_id": "r2"}, ["lab"], {})
    text = (tmp_path / "report.md").read_text()
    assert built["charts"] == {}
    assert "No benchmark figures in this run (layer 6 did not run): no chart." in text
    assert "| 5 HTTP | skipped | sglang-kimi not running: not started in lab mode |" in text


def test_verify_command_fetches_and_reports(tmp_path: Path) -> None:
    """`verify --playbook` with a stand-in for the role's fetch: the CLI hands verify_fetch_dir over,
    finds what landed there and writes the report and the chart."""
    proc = sglang_deploy("verify", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path / "art"),
                         "--playbook", str((PROJECT / "cli_verify.yml").relative_to(REPO)),
                         "--report-dir", str(tmp_path / "report"), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["report"] == str(tmp_path / "report" / "report.md")
    assert Path(out["charts"]["localhost"]).read_bytes().startswith(PNG_MAGIC)
    assert out["hosts"]["localhost"]["status"] == "passed"
    assert "| localhost | passed | 0123456789ab | passed |" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.parametrize(("verdict", "rc"), [("ungated", 6), ("passed", 0), ("baseline recorded", 0)])
def test_verify_exit_code_for_an_ungated_host(tmp_path: Path, verdict: str, rc: int) -> None:
    """ansible-playbook succeeded; a host whose verdict (the role's set_stats) is ungated makes the
    CLI exit 6 (UNGATED_RC), never 0; passed and baseline recorded stay 0."""
    proc = sglang_deploy("verify", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path / "art"),
                         "--playbook", str((PROJECT / "cli_verify.yml").relative_to(REPO)),
                         "--report-dir", str(tmp_path / "report"), "--json",
                         "-e", json.dumps({"fixture_verdict": verdict}))  # fmt: skip
    assert proc.returncode == rc, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["rc"] == rc
    assert out["ungated"] == (["localhost"] if verdict == "ungated" else [])


def test_autotune_runs_its_playbook_with_the_extra_vars(tmp_path: Path) -> None:
    """`autotune` runs playbooks/autotune.yml with -e passed through (here on an inventory without
    sglang_servers: the play matches no host, nothing is measured); without the playbook: exit 5."""
    proc = sglang_deploy("autotune", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path),
                         "-e", "autotune_fixture_marker=marker-7f3a9c", "--progress", "plain")  # fmt: skip
    if not (REPO / "playbooks" / "autotune.yml").is_file():
        assert proc.returncode == 5
        assert "playbooks/autotune.yml does not exist" in proc.stderr
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sglang-deploy autotune: playbooks/autotune.yml on" in proc.stdout
    command = json.loads(next((tmp_path / "runner" / "artifacts").glob("*/command")).read_text())
    assert "playbooks/autotune.yml" in command["command"]
    extra = command["command"][command["command"].index("-e") + 1]
    assert extra.startswith("@")  # the value itself never on the command line
    assert "marker-7f3a9c" not in " ".join(command["command"])


def test_the_report_names_every_benchmark_the_role_runs() -> None:
    """The role's one list of benchmark keys (roles/verify/vars/main.yml) and the CLI report's layers
    agree: a benchmark added to the role shows in `sglang-deploy verify`'s report."""
    role_vars = yaml.safe_load((Path(__file__).parents[1] / "roles/verify/vars/main.yml").read_text())
    keys = role_vars["__verify_bench_keys"]
    assert keys[0] == "bench"
    assert set(keys) <= {key for key, _title in LAYERS}
