"""`sglang-deploy status`: parsing of SGLang's /metrics and the router's /workers, the replica
grouping, the health decision and exit code, the scrape-target file, the table."""

from __future__ import annotations

import argparse
import base64
import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module

from sglang_deploy import commands_status as cs
from sglang_deploy import host_history
from sglang_deploy.cli import build_parser
from sglang_deploy.runner import RunResult

multinode = load_module("multinode_status", REPO / "plugins" / "module_utils" / "multinode.py")
LABELS = 'engine_type="unified",model_name="lab",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
# what prometheus_client's generate_latest writes for SGLang's gauges (text format 0.0.4)
METRICS_TEXT = f"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{LABELS}}} 3.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{{LABELS}}} 1.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{{LABELS}}} 412.5
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{{LABELS}}} 2.75
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{LABELS}}} 0.1
"""
# the real sglang-router 0.3.2's GET /workers answer (recorded from the binary)
WORKERS = {
    "workers": [
        {
            "id": "301a1476-12f3-4d7f-8a0a-7a1f7673d44c",
            "url": "http://10.0.0.1:30000",
            "model_id": "m",
            "priority": 50,
            "cost": 1.0,
            "worker_type": "regular",
            "is_healthy": True,
            "load": 0,
            "connection_mode": "HTTP",
            "metadata": {"served_model_name": "m", "model_path": "m"},
            "disable_health_check": False,
        }
    ],
    "total": 1,
    "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 1},
}


def test_parse_metrics_reads_sglang_names_only() -> None:
    found = cs.parse_metrics(METRICS_TEXT + 'sglang:gen_throughput{dp_rank="1"} NaN\ngarbage line\n')
    assert found == {
        "sglang:num_running_reqs": [3.0],
        "sglang:num_queue_reqs": [1.0],
        "sglang:gen_throughput": [412.5],
        "sglang:spec_accept_length": [2.75],
    }


def test_server_metrics_sums_ranks_and_averages_accept_length() -> None:
    two_dp = METRICS_TEXT + f'sglang:gen_throughput{{{LABELS},dp_rank="1"}} 100\n'
    two_dp += f'sglang:spec_accept_length{{{LABELS},dp_rank="1"}} 2.25\n'
    m = cs.server_metrics(200, two_dp, "")
    assert m["sglang:gen_throughput"].value == 512.5
    assert m["sglang:spec_accept_length"].value == 2.5
    assert m["sglang:num_running_reqs"].show(0) == "3"


@pytest.mark.parametrize(
    ("status", "error", "why"),
    [
        (404, "", "/metrics 404: the server runs without --enable-metrics"),
        (-1, "Connection refused", "/metrics not reachable: Connection refused"),
        (503, "", "/metrics answered HTTP 503"),
    ],
)
def test_server_metrics_na_says_why(status: int, error: str, why: str) -> None:
    m = cs.server_metrics(status, "", error)
    assert {x.value for x in m.values()} == {None}
    assert {x.why for x in m.values()} == {why}
    assert m["sglang:num_queue_reqs"].show() == "n/a"


def test_missing_accept_length_is_na_with_reason() -> None:
    text = "\n".join(line for line in METRICS_TEXT.splitlines() if "spec_accept" not in line)
    m = cs.server_metrics(200, text, "")
    assert m["sglang:spec_accept_length"].value is None
    assert "no speculative decoding" in m["sglang:spec_accept_length"].why
    assert m["sglang:gen_throughput"].value == 412.5


def b64(data: Any) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def test_last_verdict() -> None:
    v = cs.last_verdict(
        b64({"status": "baseline recorded", "generated_at": "2026-12-01T18:00:00Z", "release_id": "r1"})
    )
    assert (v.status, v.at, v.release) == ("baseline recorded", "2026-12-01T18:00:00Z", "r1")
    assert cs.last_verdict("").status == "none"
    assert cs.last_verdict("!!!").status == "unreadable"
    assert cs.last_verdict(b64([1])).status == "unreadable"


def test_router_workers() -> None:
    workers, why = cs.router_workers({"status": 200, "body": json.dumps(WORKERS)})
    assert workers == {"http://10.0.0.1:30000": True}
    assert why == ""
    assert cs.router_workers({"status": -1, "error": "refused"}) == (None, "GET /workers: no answer: refused")
    assert cs.router_workers({"status": 401, "body": ""}) == (None, "GET /workers: HTTP 401")
    assert cs.router_workers({"status": 200, "body": "<html>"})[0] is None


def server(
    index: int, *, replica: str | None = None, active: bool = True, ip: str = "10.0.0.1"
) -> dict[str, Any]:
    return {
        "index": index,
        "replica": replica,
        "service": "sglang-kimi",
        "port": 30000,
        "worker_url": f"http://{ip}:30000",
        "unit": {
            "ActiveState": "active" if active else "inactive",
            "SubState": "running" if active else "dead",
            "LoadState": "loaded",
            "InvocationID": "abc",
            "ActiveEnterTimestamp": "Tue 2026-12-01 18:00:00 UTC",
        },
        "current": "releases/rel-1",
        "results_b64": b64({"status": "passed", "generated_at": "t", "release_id": "rel-1"}),
        "health_status": 200 if active else -1,
        "health_error": "" if active else "Connection refused",
        "metrics_status": 200 if active else -1,
        "metrics_text": METRICS_TEXT if active else "",
        "metrics_error": "" if active else "Connection refused",
    }


def router(workers: dict[str, Any] | None, status: int = 200) -> dict[str, Any]:
    body = json.dumps(workers) if workers is not None else ""
    return {
        "index": 0,
        "prometheus_target": "r1:29000",
        "workers": {"status": status, "body": body, "error": "" if status != -1 else "refused"},
        "readiness": {"status": 200, "body": "", "error": ""},
        "health": {"status": 200, "body": "OK", "error": ""},
    }


def two_workers(healthy_b: bool = True) -> dict[str, Any]:
    return {
        "workers": [
            {"url": "http://10.0.0.1:30000/", "is_healthy": True},
            {"url": "http://10.0.0.2:30000", "is_healthy": healthy_b},
        ]
    }


def stats(servers: dict[str, Any], routers: dict[str, Any] | None = None) -> dict[str, Any]:
    """set_stats as playbooks/status.yml hands them; the replicas grouped by the collection's rule
    (module_utils multinode.replica_groups, behind the filter sglang.deploy.roll_replicas)."""
    order = sorted(servers, key=lambda h: servers[h]["index"])
    groups = multinode.replica_groups(order, {h: servers[h]["replica"] for h in order})
    return {
        "sglang_status_servers": servers,
        "sglang_status_routers": routers or {},
        "sglang_status_replicas": groups,
    }


def test_replicas_as_the_playbook_groups_them() -> None:
    servers = {
        "c": server(2, replica="r2"),
        "a": server(0, replica="r1"),
        "b": server(1, replica="r1"),
        "d": server(3),
    }
    assert cs.replica_hosts(stats(servers)) == [("r1", ["a", "b"]), ("r2", ["c"]), ("d", ["d"])]


def test_a_host_that_did_not_answer_is_down() -> None:
    servers = {"s1": server(0), "s2": server(1, ip="10.0.0.2")}
    data = stats(servers, {"r1": router(two_workers())})
    del data["sglang_status_servers"]["s2"]  # unreachable: no set_stats from it
    up, down = cs.build_status(data)[0]
    assert up.healthy
    assert not down.healthy
    assert "s2: /health no answer" in down.problems


def test_healthy_fleet() -> None:
    servers = {"s1": server(0), "s2": server(1, ip="10.0.0.2")}
    replicas, routers = cs.build_status(stats(servers, {"r1": router(two_workers())}))
    assert [r.name for r in replicas] == ["s1", "s2"]
    assert all(r.healthy for r in replicas)
    assert replicas[0].routers[0].state == "healthy"
    assert replicas[0].rank0.release == "rel-1"
    assert replicas[1].verdict.status == "passed"
    assert routers["r1"]["workers"] == {"http://10.0.0.1:30000": True, "http://10.0.0.2:30000": True}


def test_stopped_unit_and_router_health() -> None:
    servers = {"s1": server(0), "s2": server(1, active=False, ip="10.0.0.2")}
    replicas, _routers = cs.build_status(stats(servers, {"r1": router(two_workers(healthy_b=False))}))
    up, down = replicas
    assert up.healthy
    assert not down.healthy
    assert down.problems == [
        "s2: unit inactive/dead",
        "s2: /health Connection refused",
        "router r1: unhealthy (the router's health check marks it unhealthy)",
    ]
    assert down.metrics["sglang:gen_throughput"].why == "/metrics not reachable: Connection refused"


def test_absent_from_router_and_router_down() -> None:
    only_a = {"workers": [{"url": "http://10.0.0.1:30000", "is_healthy": True}]}
    servers = {"s1": server(0), "s2": server(1, ip="10.0.0.2")}
    replicas, _routers = cs.build_status(
        stats(servers, {"r1": router(only_a), "r2": router(None, status=-1)})
    )
    assert replicas[1].routers[0].state == "absent"
    assert "not in the router's /workers" in replicas[1].routers[0].why
    assert replicas[0].routers[1].state == "unknown"
    assert not replicas[0].healthy


def test_no_router_group_is_fine() -> None:
    replicas, routers = cs.build_status(stats({"s1": server(0)}))
    assert routers == {}
    assert replicas[0].healthy
    assert replicas[0].routers == []


def test_scrape_targets_and_file(tmp_path: Path) -> None:
    servers = {"s1": server(0), "s1b": server(1, replica="s1", ip="10.0.0.9"), "s2": server(2, ip="10.0.0.2")}
    replicas, routers = cs.build_status(stats(servers, {"r1": router(two_workers())}))
    groups = cs.scrape_targets(replicas, routers)
    assert groups == [
        {"targets": ["10.0.0.1:30000"], "labels": {"replica": "s1", "role": "server"}},
        {"targets": ["10.0.0.2:30000"], "labels": {"replica": "s2", "role": "server"}},
        {"targets": ["r1:29000"], "labels": {"router": "r1", "role": "router"}},
    ]
    path = cs.targets_path("prom/targets.json", str(tmp_path))
    assert path == tmp_path / "prom" / "targets.json"
    cs.write_targets(path, groups)
    assert json.loads(path.read_text()) == groups
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["targets.json"]  # no temp file left
    assert cs.targets_path("", str(tmp_path)) is None
    assert cs.targets_path("/abs/t.json", str(tmp_path)) == Path("/abs/t.json")
    with pytest.raises(ValueError, match="sglang_prometheus_targets_file 'a\\\\nb'"):
        cs.targets_path("a\nb", str(tmp_path))


def test_render_table() -> None:
    servers = {"s1": server(0), "s2": server(1, active=False, ip="10.0.0.2")}
    replicas, routers = cs.build_status(stats(servers, {"r1": router(two_workers(healthy_b=False))}))
    out = io.StringIO()
    cs.render_table(replicas, routers, out)
    text = out.getvalue()
    assert "OK s1" in text
    assert "DOWN s2" in text
    assert "412.5" in text
    assert "2.75" in text
    assert "r1: healthy" in text
    assert "s2: n/a: /metrics not reachable: Connection refused" in text
    assert "s2: DOWN: s2: unit inactive/dead" in text
    assert "router r1: /health 200, /readiness 200, /workers answers" in text


def fake_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data: dict[str, Any], rc: int = 0
) -> argparse.Namespace:
    result = RunResult(
        rc=rc, status="successful", ident="id", artifact_dir=tmp_path, summary={"stats_data": data},
        run_dir=tmp_path, summary_path=tmp_path / "summary.json", junit_path=tmp_path / "junit.xml",
    )  # fmt: skip
    monkeypatch.setattr(cs, "execute", lambda request, args, title: result)
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all: {}\n")
    return build_parser().parse_args(["status", "-i", str(inventory), "--json", "--artifacts", str(tmp_path)])


def test_run_exit_codes_and_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy = stats({"s1": server(0), "s2": server(1, ip="10.0.0.2")}, {"r1": router(two_workers())})
    healthy["sglang_status_targets_file"] = "targets.json"
    healthy["sglang_status_inventory_dir"] = str(tmp_path)
    args = fake_run(monkeypatch, tmp_path, healthy)
    assert args.handler == "sglang_deploy.commands_status:run"
    assert cs.run(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "status"
    assert doc["healthy"] is True
    assert doc["targets_file"] == str(tmp_path / "targets.json")
    assert len(json.loads((tmp_path / "targets.json").read_text())) == 3

    down = stats(
        {"s1": server(0), "s2": server(1, active=False, ip="10.0.0.2")}, {"r1": router(two_workers())}
    )
    assert cs.run(fake_run(monkeypatch, tmp_path, down)) == cs.STATUS_DOWN_RC == 7
    doc = json.loads(capsys.readouterr().out)
    assert [r["healthy"] for r in doc["replicas"]] == [True, False]

    # a failed playbook keeps its own status (4: unreachable)
    assert cs.run(fake_run(monkeypatch, tmp_path, down, rc=4)) == 4
    capsys.readouterr()
    # no server answered at all: not healthy
    assert cs.run(fake_run(monkeypatch, tmp_path, {})) == 7


def test_a_history_change_point_is_printed_and_in_the_json_but_never_the_exit_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / host_history.HISTORY_DIR
    levels = [1000.0, 1008.0, 995.0, 1004.0, 998.0, 1006.0, 850.0, 858.0, 846.0, 853.0, 849.0, 855.0]
    for index, value in enumerate(levels):
        doc = {
            "generated_at": f"2026-11-{index + 1:02d}T00:00:00Z",
            "release_id": "r1",
            "results": {
                "bench": {"levels": [{"level": 16, "output_tps": value}]},
                "gate": {"status": "passed"},
            },
        }
        host_history.record_runs(history, {"s1": doc}, f"run-{index}")
    healthy = stats({"s1": server(0), "s2": server(1, ip="10.0.0.2")}, {"r1": router(two_workers())})
    assert cs.run(fake_run(monkeypatch, tmp_path, healthy)) == 0
    doc = json.loads(capsys.readouterr().out)
    [line] = doc["history_alarms"]["s1"]
    assert line.startswith("output_tps@16: -1")
    assert "from 2026-11-07T00:00:00Z on" in line
    assert "s2" not in doc["history_alarms"]
    args = fake_run(monkeypatch, tmp_path, healthy)
    args.json = False
    assert cs.run(args) == 0
    text = capsys.readouterr().out
    assert f"s1: HISTORY ALARM (verify runs, {history}): output_tps@16: -1" in text
