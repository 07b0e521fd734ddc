"""The rolling upgrade's pure rules: the replica grouping of the plays' filter (sglang.deploy.
roll_replicas) and of the CLI's batches (rollout.batches: --serial counts whole replicas), the
min-healthy decision on the real sglang-router 0.3.2 /workers answer, the in-flight count of SGLang's
Prometheus text, and the plays' filters through a real ansible-playbook (local connection)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from modload import REPO, load_module

from sglang_deploy.options import Serial
from sglang_deploy.rollout import Rollout, batches, replica_groups

roll = load_module("roll_utils", REPO / "plugins/module_utils/roll.py")
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

# GET /workers of the real sglang-router 0.3.2 (recorded from the binary, two workers registered)
WORKERS = {
    "workers": [
        {"id": "0bd0a595-8702-45d5-a327-da6459429599", "url": "http://gpu-2:30000", "model_id": "m",
         "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": True, "load": 0,
         "connection_mode": "HTTP", "metadata": {"model_path": "m"}, "disable_health_check": False},
        {"id": "b9121c96-7935-4e60-87a9-97a86b9f6269", "url": "http://gpu-1:30000", "model_id": "m",
         "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": True, "load": 3,
         "connection_mode": "HTTP", "metadata": {"model_path": "m"}, "disable_health_check": False},
        {"id": "5b0c1f3e-0000-4000-8000-000000000003", "url": "http://gpu-3:30000", "model_id": "m",
         "priority": 50, "cost": 1.0, "worker_type": "regular", "is_healthy": False, "load": 0,
         "connection_mode": "HTTP", "metadata": {"model_path": "m"}, "disable_health_check": False},
    ],
    "total": 3,
    "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 3},
}  # fmt: skip

# SGLang 0.5.9's /metrics (prometheus_client text), two TP ranks
METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="kimi",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.0
sglang:num_running_reqs{engine_type="unified",model_name="kimi",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 2.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="kimi",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 1.0
sglang:num_running_reqs_offline_batch{engine_type="unified",model_name="kimi",tp_rank="0"} 7.0
"""


PLAY = r"""
- hosts: n1
  gather_facts: false
  tasks:
    - ansible.builtin.debug:
        msg: "REPLICAS={{ groups['sglang_servers'] | sglang.deploy.roll_replicas(hostvars) | to_json }}"
    - ansible.builtin.debug:
        msg: >-
          PLAN={{ (lookup('ansible.builtin.file', 'workers.json') | from_json
          | sglang.deploy.roll_drain_plan(['http://gpu-1:30000', 'http://gpu-2:30000'], 1)).msg }}
    - ansible.builtin.debug:
        msg: >-
          INFLIGHT={{ lookup('ansible.builtin.file', 'metrics.txt') | sglang.deploy.roll_in_flight }}
"""


def test_every_host_is_its_own_replica_by_default() -> None:
    assert roll.replicas(["a", "b"], {"a": {}, "b": {}}) == {"a": ["a"], "b": ["b"]}


def test_the_hosts_of_a_replica_in_inventory_order_rank_0_first() -> None:
    hostvars = {
        "n1": {"sglang_replica": "r1"},
        "n2": {"sglang_replica": "r1"},
        "n3": {},
        "n4": {"sglang_replica": ""},
    }
    assert roll.replicas(["n1", "n3", "n2", "n4"], hostvars) == {
        "r1": ["n1", "n2"],
        "n3": ["n3"],
        "n4": ["n4"],
    }
    assert roll.replica_of("n2", roll.replicas(["n1", "n2"], hostvars)) == "r1"
    with pytest.raises(ValueError, match="in no replica"):
        roll.replica_of("x", {"r1": ["n1"]})


def test_cli_batches_count_whole_replicas() -> None:
    hosts = ["n1", "n2", "n3", "n4", "n5"]
    replica_of = {"n1": "r1", "n2": "r1", "n4": "r2", "n5": "r2"}
    assert replica_groups(hosts, replica_of) == [["n1", "n2"], ["n3"], ["n4", "n5"]]
    assert batches(hosts, Serial(1), replica_of) == [["n1", "n2"], ["n3"], ["n4", "n5"]]
    assert batches(hosts, Serial(2), replica_of) == [["n1", "n2", "n3"], ["n4", "n5"]]
    assert batches(hosts, Serial(50, percent=True), replica_of) == [["n1", "n2"], ["n3"], ["n4", "n5"]]
    # one host = one replica: the old host batches
    assert batches(hosts, Serial(2)) == [["n1", "n2"], ["n3", "n4"], ["n5"]]
    rollout = Rollout(Serial(1), 0.0, hosts, replica_of=replica_of)
    assert rollout.replicas() == 3
    assert rollout.report()["replicas"] == [["n1", "n2"], ["n3"], ["n4", "n5"]]


def test_min_healthy_counts_the_healthy_workers_the_batch_removes() -> None:
    plan = roll.drain_plan(WORKERS, ["http://gpu-1:30000"], 1)
    assert plan["ok"]
    assert (plan["healthy"], plan["removing"], plan["left"]) == (2, ["http://gpu-1:30000"], 1)
    assert plan["ids"] == {"http://gpu-1:30000": "b9121c96-7935-4e60-87a9-97a86b9f6269"}
    refused = roll.drain_plan(WORKERS, ["http://gpu-1:30000", "http://gpu-2:30000"], 1)
    assert not refused["ok"]
    assert refused["msg"] == (
        "removing 2 healthy worker(s) (http://gpu-1:30000, http://gpu-2:30000) from the router leaves 0 of 2 "
        "healthy; sglang_router_min_healthy=1"
    )
    assert not roll.drain_plan(WORKERS, ["http://gpu-1:30000"], 2)["ok"]


def test_a_batch_that_removes_no_healthy_worker_is_never_refused() -> None:
    # an unhealthy worker and an unlisted one (a first deploy): the count does not drop
    assert roll.drain_plan(WORKERS, ["http://gpu-3:30000", "http://gpu-9:30000"], 5)["ok"]
    assert roll.drain_plan({"workers": [], "total": 0}, ["http://gpu-1:30000"], 1)["ok"]


def test_a_body_that_is_no_worker_list_is_refused() -> None:
    for body in ({}, {"workers": "x"}, {"workers": [{"id": "1"}]}, "OK", None):
        with pytest.raises(ValueError, match=r"/workers answer|without a url"):
            roll.drain_plan(body, ["http://gpu-1:30000"], 1)


def test_worker_lookup() -> None:
    assert roll.listed(WORKERS, "http://gpu-3:30000") == {
        "present": True, "healthy": False, "id": "5b0c1f3e-0000-4000-8000-000000000003"}  # fmt: skip
    assert roll.listed(WORKERS, "http://gpu-9:30000") == {"present": False, "healthy": False, "id": ""}


def test_in_flight_sums_running_and_queued_over_ranks_only() -> None:
    assert roll.in_flight(METRICS) == 5  # 2 + 2 running (two TP ranks) + 1 queued; not the offline gauge
    idle = METRICS.replace("} 2.0", "} 0.0").replace("} 1.0", "} 0.0")
    assert roll.in_flight(idle) == 0


def test_in_flight_refuses_metrics_without_the_gauges() -> None:
    with pytest.raises(ValueError, match="no sglang:num_running_reqs, sglang:num_queue_reqs"):
        roll.in_flight("# nothing\nprocess_cpu_seconds_total 1.0\n")
    with pytest.raises(ValueError, match="no sglang:num_queue_reqs"):
        roll.in_flight("sglang:num_running_reqs 0\n")
    with pytest.raises(ValueError, match="= -1"):
        roll.in_flight("sglang:num_running_reqs -1\nsglang:num_queue_reqs 0\n")
    with pytest.raises(ValueError, match="not text"):
        roll.in_flight(None)


def test_the_filters_in_a_real_playbook(tmp_path: Path) -> None:
    """The plays' filters by FQCN in ansible-playbook: the grouping from hostvars, a refusal's message."""
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    sglang_servers:\n      hosts:\n"
        "        n1: {ansible_connection: local, sglang_replica: r1}\n"
        "        n2: {ansible_connection: local, sglang_replica: r1}\n"
        "        n3: {ansible_connection: local}\n"
    )
    (tmp_path / "workers.json").write_text(json.dumps(WORKERS))
    (tmp_path / "metrics.txt").write_text(METRICS)
    (tmp_path / "play.yml").write_text(PLAY)
    env = {
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections"),
        "PATH": str(ANSIBLE_PLAYBOOK.parent) + ":/usr/bin:/bin",
        "ANSIBLE_NOCOLOR": "1",
        "LC_ALL": "C.UTF-8",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
        capture_output=True, text=True, check=False, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert (
        'REPLICAS={\\"r1\\": [\\"n1\\", \\"n2\\"], \\"n3\\": [\\"n3\\"]}' in out
        or '"r1": ["n1", "n2"]' in out
    ), out
    assert "leaves 0 of 2 healthy; sglang_router_min_healthy=1" in out
    assert "INFLIGHT=5" in out
