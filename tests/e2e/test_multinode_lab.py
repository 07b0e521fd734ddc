"""Multi-node tensor parallel on two lab containers (sglang-lab-mn-1/2, created in parallel, removed at
the end) as ONE replica (`sglang_replica: mn`), each with a named nvidia-smi TEST DOUBLE (no GPU can
exist here) printing the recorded 2x H200 NVLink samples of tests/data/nvidia-smi/.

The real stage playbook (playbooks/preflight.yml) runs against both, with the json stdout callback, so
the test reads the launch spec each node exported (preflight_launch_spec):

* the argv of each node: `--tp-size 4 --nnodes 2 --node-rank 0|1 --dist-init-addr <rank 0's address>:20000`
  right after --tp-size, the rest identical on both nodes (--host/--port too: SGLang 0.5.9 starts a
  dummy health server there on rank > 0), only rank 0 `serves_http`; changed=0;
* rejections before any change (changed=0 on every host, the message naming variable, value, host):
  one node's double showing 1 GPU (GPU counts differ), `NCCL_SOCKET_IFNAME=eth9` (no such interface
  on the nodes), and the dist-init port taken on rank 0 (a transient unit listening on it).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import REPO, cli, docker_host, lab_exec, lab_group_vars, login_shell_env, venv_bin, write_yaml

pytestmark = pytest.mark.e2e

HOSTS = ["sglang-lab-mn-1", "sglang-lab-mn-2"]
SAMPLES = REPO / "tests" / "data" / "nvidia-smi"
SMI = "/usr/local/bin/nvidia-smi"
PLAYBOOK = REPO / "playbooks" / "preflight.yml"
PORT = 20000
IFACE = "eth0"  # the containers' interface on docker's bridge


def smi_double(query: str, topo: str) -> str:
    return (
        "#!/bin/sh\n"
        "# TEST DOUBLE of nvidia-smi, installed by tests/e2e/test_multinode_lab.py in its own containers\n"
        "# (removed with them). Prints the recorded samples of tests/data/nvidia-smi/.\n"
        'case "$*" in\n'
        "  '--query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,nounits')\n"
        f"    printf '%s' {shlex.quote(query)} ;;\n"
        "  'topo -m')\n"
        f"    printf '%s' {shlex.quote(topo)} ;;\n"
        '  *) echo "nvidia-smi test double: unsupported arguments: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )


X2 = smi_double(
    (SAMPLES / "h200x2.query-gpu.csv").read_text(), (SAMPLES / "h200x2-nvlink.topo-m.txt").read_text()
)
X1 = smi_double((SAMPLES / "h200x1.query-gpu.csv").read_text(), (SAMPLES / "h200x1.topo-m.txt").read_text())


def install_smi(name: str, script: str) -> None:
    lab_exec("sh", "-c", f"printf '%s' {shlex.quote(script)} > {SMI} && chmod 0755 {SMI}", name=name)


def address(name: str) -> str:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert out, name
    return out[0]


def write_inventory(dest: Path, addresses: dict[str, str]) -> Path:
    """Both containers in sglang_servers (inventory order = rank order), one replica, the lab's
    group_vars plus what a GPU host needs here (the containers' OS, python3.11)."""
    hosts = {
        name: docker_host(name, sglang_replica="mn", sglang_replica_address=addresses[name]) for name in HOSTS
    }
    (dest / "group_vars").mkdir(parents=True)
    write_yaml(dest / "hosts.yml", {"all": {"children": {"sglang_servers": {"hosts": hosts}}}})
    lab = lab_group_vars(
        sglang_gpu_required=True,  # the doubles show GPUs: no lab mode
        sglang_os_distribution="Debian",  # the containers' OS
        sglang_os_version="12",
        sglang_tp_size=4,  # 2 nodes x 2 GPUs
        sglang_launch_environment={"NCCL_SOCKET_IFNAME": IFACE, "GLOO_SOCKET_IFNAME": IFACE},
    )
    write_yaml(dest / "group_vars" / "sglang_servers.yml", lab)
    (dest / "group_vars" / "all").symlink_to(REPO / "group_vars" / "all")
    return dest / "hosts.yml"


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(len(HOSTS)) as pool:
            made = list(pool.map(lambda name: cli("lab", "create", "--name", name), HOSTS))
        assert all(proc.returncode == 0 for proc in made), [proc.stderr for proc in made]
        print(f"replica of {len(HOSTS)} containers created in {time.monotonic() - started:.1f}s")
        for name in HOSTS:
            install_smi(name, X2)
        addresses = {name: address(name) for name in HOSTS}
        yield write_inventory(tmp_path_factory.mktemp("multinode"), addresses), addresses
    finally:
        for name in HOSTS:
            subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True, check=False)


def preflight(inventory: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """playbooks/preflight.yml with the json stdout callback: (process, its JSON document)."""
    env = {
        **login_shell_env(),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_FORCE_COLOR": "false",
        "ANSIBLE_NOCOLOR": "1",
    }
    started = time.monotonic()
    proc = subprocess.run(
        [str(venv_bin() / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    print(
        f"$ ansible-playbook preflight.yml {' '.join(args)}  "
        f"(rc={proc.returncode}, {time.monotonic() - started:.1f}s)"
    )
    start = proc.stdout.find("{")
    assert start >= 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc: dict[str, Any] = json.JSONDecoder().raw_decode(proc.stdout[start:])[0]  # a summary line may follow
    return proc, doc


def facts(doc: dict[str, Any], task: str) -> dict[str, dict[str, Any]]:
    """Per host the ansible_facts the task of that name set."""
    for play in doc["plays"]:
        for entry in play["tasks"]:
            if entry["task"]["name"].split(" : ", 1)[-1] == task:  # "role : name"
                return {h: r.get("ansible_facts", {}) for h, r in entry["hosts"].items()}
    raise AssertionError(f"task {task!r} did not run")


def failures(doc: dict[str, Any]) -> dict[str, str]:
    """Per failed host the message of its failed task."""
    out: dict[str, str] = {}
    for play in doc["plays"]:
        for entry in play["tasks"]:
            for host, result in entry["hosts"].items():
                if result.get("failed"):  # a loop's message is its failed items'
                    items = [str(r.get("msg", "")) for r in result.get("results", []) if r.get("failed")]
                    out[host] = " | ".join(items) if items else str(result.get("msg", ""))
    return out


def assert_nothing_changed(doc: dict[str, Any]) -> None:
    for host in HOSTS:
        assert doc["stats"][host]["changed"] == 0, doc["stats"]


def test_each_node_renders_its_rank(replica: tuple[Path, dict[str, str]]) -> None:
    inventory, addresses = replica
    proc, doc = preflight(inventory)
    assert proc.returncode == 0, json.dumps(failures(doc))[-3000:] + proc.stderr[-2000:]
    assert_nothing_changed(doc)
    specs = {h: f["preflight_launch_spec"] for h, f in facts(doc, "Export the launch spec").items()}
    head_addr = f"{addresses[HOSTS[0]]}:{PORT}"
    argvs = {}
    for rank, host in enumerate(HOSTS):
        spec = specs[host]
        args = spec["server_args"]
        at = args.index("--tp-size")
        assert args[at : at + 8] == [
            "--tp-size", "4", "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", head_addr,
        ], args  # fmt: skip
        assert spec["multinode"] == {
            "replica": "mn",
            "rank": rank,
            "nnodes": 2,
            "hosts": HOSTS,
            "head": HOSTS[0],
            "head_address": addresses[HOSTS[0]],
            "dist_init_port": PORT,
            "dist_init_addr": head_addr,
            "addresses": [addresses[h] for h in HOSTS],  # the unit's IPAddressAllow= lets them in
            "serves_http": rank == 0,
        }
        assert spec["argv"] == spec["launcher"] + args
        assert spec["environment"]["GLOO_SOCKET_IFNAME"] == IFACE
        argvs[host] = args[: at + 5] + args[at + 6 :]  # without the rank's value
    assert argvs[HOSTS[0]] == argvs[HOSTS[1]]  # the nodes differ only in --node-rank
    assert "--host" in argvs[HOSTS[1]]  # rank 1 keeps --host/--port: SGLang's dummy /health binds there


def test_mismatched_gpu_counts_fail_before_any_change(replica: tuple[Path, dict[str, str]]) -> None:
    inventory, _hosts = replica
    install_smi(HOSTS[1], X1)
    try:
        proc, doc = preflight(inventory)
    finally:
        install_smi(HOSTS[1], X2)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert_nothing_changed(doc)
    msgs = failures(doc)
    assert set(msgs) == set(HOSTS), msgs  # each node refuses: the replica deploys as one unit
    for host in HOSTS:
        assert f"(host {host})" in msgs[host], msgs
        assert (
            f"GPU count differs between the nodes of sglang_replica='mn' ({HOSTS[0]}: 2, {HOSTS[1]}: 1)"
            in msgs[host]
        ), msgs


def test_a_missing_interface_fails_before_any_change(
    replica: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    inventory, _hosts = replica
    extra = tmp_path / "eth9.json"
    extra.write_text(
        json.dumps({"sglang_launch_environment": {"NCCL_SOCKET_IFNAME": "eth9", "GLOO_SOCKET_IFNAME": IFACE}})
    )
    proc, doc = preflight(inventory, "-e", f"@{extra}")
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert_nothing_changed(doc)
    msgs = failures(doc)
    assert set(msgs) == set(HOSTS), msgs
    for host in HOSTS:
        assert re.search(
            rf'NCCL_SOCKET_IFNAME="eth9" names no network interface of host {host} ', msgs[host]
        ), msgs
        assert "allowed one interface that exists on every node" in msgs[host]
        assert IFACE in msgs[host]  # what the host has


def test_a_taken_dist_init_port_fails_on_rank0(replica: tuple[Path, dict[str, str]]) -> None:
    inventory, _hosts = replica
    unit = "mn-port-holder"  # a listener on the dist-init port that is not the service
    lab_exec("systemd-run", f"--unit={unit}", "--", "python3", "-m", "http.server", str(PORT), name=HOSTS[0])
    try:
        for _attempt in range(50):
            if f":{PORT:04X} " in lab_exec("cat", "/proc/net/tcp", name=HOSTS[0]).upper():
                break
            time.sleep(0.2)
        proc, doc = preflight(inventory, "--check")
    finally:
        lab_exec("systemctl", "stop", f"{unit}.service", name=HOSTS[0], check=False)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert_nothing_changed(doc)
    msgs = failures(doc)
    assert f"sglang_dist_init_port={PORT} is taken on host {HOSTS[0]}" in msgs[HOSTS[0]], msgs
