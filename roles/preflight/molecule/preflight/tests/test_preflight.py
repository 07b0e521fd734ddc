"""Molecule verifier tests of the preflight role (testinfra; run by `molecule verify`).

They run the real stage playbook, playbooks/preflight.yml (any_errors_fatal, gather_facts off),
against the scenario's container, which a second inventory file puts into `sglang_servers`:
  * >= 10 distinct bad inputs each fail, naming the variable, the bad value and what is allowed,
    with PLAY RECAP changed=0 and /etc, /opt, /usr/local unchanged on the host;
  * the valid lab inputs pass with "no GPU: lab mode"; sglang_gpu_required=true without GPU fails;
  * with a named nvidia-smi TEST DOUBLE (prints the recorded 2x H200 NVLink samples of
    tests/data/nvidia-smi/) the GPU facts are gathered, also in --check, and tp 8 on 2 GPUs fails.
The double is installed inside the tests and removed after them (converge, idempotence and the
shared check-mode test see the real, GPU-less container).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import moltest
import pytest
import yaml

SCENARIO = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
REPO = SCENARIO.parents[3]
PLAYBOOK = REPO / "playbooks" / "preflight.yml"
LAB_VARS = SCENARIO / "lab_inputs.json"
INVENTORY_FILE = Path(os.environ["MOLECULE_INVENTORY_FILE"])
SAMPLES = REPO / "tests" / "data" / "nvidia-smi"
DOUBLE = "/usr/local/bin/nvidia-smi"

SNAPSHOT = "find /etc /opt /usr/local -xdev -printf '%p %y %s %m %T@\\n' 2>/dev/null | sort"


def _hosts(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        found += list((node.get("hosts") or {}).keys())
        for key, child in node.items():
            if key != "hosts":
                found += _hosts(child)
    return found


HOSTS = sorted(set(_hosts(yaml.safe_load(INVENTORY_FILE.read_text()))))


@pytest.fixture(scope="module")
def groups_inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Second inventory source: the molecule host(s) as members of sglang_servers."""
    path = tmp_path_factory.mktemp("inv") / "sglang_servers.yml"
    path.write_text(yaml.safe_dump({"sglang_servers": {"hosts": {h: {} for h in HOSTS}}}))
    return path


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def run_preflight(groups_inventory: Path, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    tmp = tmp_path_factory.mktemp("cases")

    def run(overrides: dict[str, Any] | None = None, *args: str, json_out: bool = False) -> Any:
        cmd = ["ansible-playbook", "-i", str(INVENTORY_FILE.parent), "-i", str(groups_inventory)]
        cmd += [str(PLAYBOOK), "-e", f"@{LAB_VARS}", *args]
        if overrides is not None:
            case = tmp / f"case{len(list(tmp.iterdir()))}.json"
            case.write_text(json.dumps(overrides))
            cmd += ["-e", f"@{case}"]
        env = moltest.ansible_env("ansible.posix.json" if json_out else "ansible.builtin.default")
        return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=600)

    return run


def recap(out: str) -> dict[str, dict[str, int]]:
    return moltest.recaps(out)


def failure_messages(out: str) -> str:
    """The decoded `msg` / `argument_errors` of every failed task result in default-callback output."""
    messages: list[str] = []
    for line in out.splitlines():
        if not (line.startswith(("fatal:", "failed:")) and " => {" in line):
            continue
        result = json.loads(line.split(" => ", 1)[1])
        messages += [str(result.get("msg", "")), *map(str, result.get("argument_errors", []))]
    return "\n".join(messages)


def json_result(stdout: str) -> dict[str, Any]:
    start = stdout.index("{\n")
    doc, _ = json.JSONDecoder().raw_decode(stdout[start:])
    assert isinstance(doc, dict)
    return doc


def task_results(doc: dict[str, Any], name: str) -> dict[str, Any]:
    for play in doc["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].endswith(name):
                return dict(task["hosts"])
    raise AssertionError(f"no task named {name!r} in the run")


@pytest.fixture(scope="module")
def baseline(host: Any) -> str:
    return str(host.check_output(SNAPSHOT))


# Each case: overrides, then substrings the failure output must contain (variable, bad value,
# allowed values).
BAD_INPUTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "tp_zero": ({"sglang_tp_size": 0}, ["sglang_tp_size=0", "allowed an integer 1-64"]),
    "topk_with_production": (
        {"sglang_speculative_eagle_topk": 4},
        [
            "sglang_speculative_eagle_topk=4",
            'sglang_preset="production"',
            "allowed sglang_speculative_eagle_topk 1",
        ],
    ),
    "topk_with_spec_v2_forced": (
        {"sglang_preset": "tree", "sglang_spec_v2": True, "sglang_speculative_eagle_topk": 2},
        ["sglang_speculative_eagle_topk=2", "sglang_spec_v2=true", "allowed sglang_speculative_eagle_topk 1"],
    ),
    "preset_unknown": (
        {"sglang_preset": "turbo"},
        ["sglang_preset", "got: turbo", "production, baseline, tree"],
    ),
    "preset_not_allowed_here": (
        {"sglang_presets_allowed": ["baseline"]},
        ['sglang_preset="production"', 'allowed sglang_presets_allowed=["baseline"]'],
    ),
    "nccl_profile_unknown": (
        {"sglang_nccl_profile": "infiniband"},
        ["sglang_nccl_profile", "got: infiniband", "auto, pcie, nvlink, none"],
    ),
    "port_out_of_range": (
        {"sglang_service_port": 70000},
        ["sglang_service_port=70000", "allowed an integer 1-65535"],
    ),
    "port_not_a_number": (
        {"sglang_service_port": "http"},
        ["sglang_service_port", "'http'", "convert to int"],
    ),
    "host_invalid": (
        {"sglang_service_host": "my host!"},
        ['sglang_service_host="my host!"', "allowed an IPv4/IPv6 address"],
    ),
    "model_path_relative": (
        {"sglang_model_path": "models/target"},
        ['sglang_model_path="models/target"', "allowed absolute paths"],
    ),
    "draft_missing_for_production": (
        {"sglang_draft_model_path": ""},
        ['sglang_draft_model_path=""', "required unless sglang_preset is baseline"],
    ),
    "api_key_required_but_empty": (
        {"sglang_api_key_required": True, "sglang_api_key": ""},
        ["sglang_api_key is empty or unset", "sglang_api_key_required=true", "allowed a non-empty string"],
    ),
    "cuda_version_format": ({"sglang_cuda_version": "13.0"}, ['sglang_cuda_version="13.0"', "allowed X.Y.Z"]),
    "git_commit_format": (
        {"sglang_git_commit": "v0.5.9"},
        ['sglang_git_commit="v0.5.9"', "7-40 lower-case hex"],
    ),
    "python_version_format": ({"sglang_python_version": "3"}, ['sglang_python_version="3"', "allowed 3.Y"]),
    "cuda_release_mismatch": (
        {"sglang_cuda_release": "12.8"},
        [
            'sglang_cuda_release="12.8"',
            'sglang_cuda_version="13.0.1"',
            "Allowed: sglang_cuda_release = major.minor",
        ],
    ),
    "num_steps_zero": (
        {"sglang_speculative_num_steps": 0},
        ["sglang_speculative_num_steps=0", "positive integer"],
    ),
    "spec_v2_not_bool": ({"sglang_spec_v2": "maybe"}, ['sglang_spec_v2="maybe"', "allowed true, false"]),
    "gpu_required_not_bool": (
        {"sglang_gpu_required": "maybe"},
        ["sglang_gpu_required", "'maybe'", "Valid booleans"],
    ),
    "root_relative": (
        {"sglang_root": "opt/sglang"},
        ['sglang_root="opt/sglang"', "allowed an absolute path"],
    ),
    "disk_too_small": (
        {"sglang_min_free_disk_gib": 1000000},
        [
            "sglang_min_free_disk_gib=1000000",
            'sglang_root="/opt/sglang"',
            "allowed free space >= 1000000 GiB",
        ],
    ),
    "os_not_in_lab_list": (
        {"sglang_os_lab_allowed": [{"distribution": "Ubuntu", "version": "24.04"}]},
        ["Debian", "not supported", 'sglang_os_distribution="Ubuntu"', "sglang_os_lab_allowed="],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_rejected_and_changes_nothing(
    case: str, run_preflight: Runner, host: Any, baseline: str
) -> None:
    overrides, expected = BAD_INPUTS[case]
    proc = run_preflight(overrides)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    failure = failure_messages(out)
    assert failure, out[-3000:]
    for text in expected:
        assert text in failure, f"{text!r} not in the failure of case {case}:\n{failure[:3000]}"
    stats = recap(out)
    assert stats, out[-3000:]
    for h, counts in stats.items():
        assert counts["changed"] == 0, f"{h}: {counts}"
        assert counts["failed"] == 1, f"{h}: {counts}"
    after = host.check_output(SNAPSHOT)
    assert after == baseline, f"case {case} changed files on the host"
    assert "/etc/sglang " not in after
    assert "/opt/sglang " not in after


def test_at_least_ten_distinct_variables_are_checked() -> None:
    names = {next(iter(overrides)) for overrides, _ in BAD_INPUTS.values()}
    assert len(BAD_INPUTS) >= 10
    assert len(names) >= 10, names


SECRET = "sk-preflight-SENTINEL-0123456789"


def test_api_key_is_never_printed_when_rejected(run_preflight: Runner) -> None:
    for overrides in (
        {"sglang_api_key_required": True, "sglang_api_key": SECRET, "sglang_service_port": 0},
        {"sglang_api_key": SECRET, "sglang_preset": "turbo"},  # fails in argument_specs
    ):
        proc = run_preflight(overrides, "-vvv")
        assert proc.returncode != 0
        assert SECRET not in proc.stdout + proc.stderr


def test_valid_lab_inputs_pass_in_lab_mode(run_preflight: Runner, host: Any, baseline: str) -> None:
    # Valid lab inputs with a required API key set: passes, in lab mode, and never prints the key.
    proc = run_preflight({"sglang_api_key_required": True, "sglang_api_key": SECRET}, "-vvv")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "no GPU: lab mode" in out
    assert "NCCL profile auto -> none" in out
    assert SECRET not in out
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in recap(out).values()), out[-3000:]
    assert host.check_output(SNAPSHOT) == baseline


def test_lab_mode_exports_an_unknown_driver_not_an_old_one(run_preflight: Runner) -> None:
    # Later stages (cuda_toolkit's driver gate) must read "no GPU" as unknown, never as branch 0.
    proc = run_preflight({}, json_out=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    results = task_results(json_result(proc.stdout), "Export the preflight facts")
    assert results
    for h, result in results.items():
        facts = result["ansible_facts"]
        assert facts["preflight_lab_mode"] is True, h
        assert facts["preflight_gpu_count"] == 0
        assert facts["preflight_driver_branch"] is None
        assert facts["preflight_cuda_driver_ok"] is False
        assert facts["preflight_interconnect"] == "none"


def test_gpu_required_without_gpu_fails_naming_it(run_preflight: Runner) -> None:
    proc = run_preflight({"sglang_gpu_required": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "sglang_gpu_required=true but this host has no usable NVIDIA GPU" in out
    assert "nvidia-smi not found" in out
    assert "no GPU: lab mode" not in out


# --- nvidia-smi test double ----------------------------------------------------------------


def _double_script(query: str, topo: str) -> str:
    """A shell script standing in for nvidia-smi: prints recorded samples, nothing else."""
    return (
        "#!/bin/sh\n"
        "# TEST DOUBLE of nvidia-smi, installed by roles/preflight/molecule/preflight/tests and\n"
        "# removed after them. Prints the recorded samples of tests/data/nvidia-smi/.\n"
        'case "$*" in\n'
        f"  '--query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,nounits')\n"
        f"    printf '%s' {shlex.quote(query)} ;;\n"
        f"  'topo -m')\n"
        f"    printf '%s' {shlex.quote(topo)} ;;\n"
        '  *) echo "nvidia-smi test double: unsupported arguments: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )


def _ansible(module: str, args: dict[str, Any]) -> None:
    proc = subprocess.run(
        ["ansible", "-i", str(INVENTORY_FILE.parent), "all", "-m", module, "-a", json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def nvidia_smi_double(host: Any) -> Iterator[Callable[[str, str], None]]:
    def install(query_sample: str, topo_sample: str) -> None:
        query = (SAMPLES / query_sample).read_text()
        topo = (SAMPLES / topo_sample).read_text()
        _ansible(
            "ansible.builtin.copy", {"dest": DOUBLE, "content": _double_script(query, topo), "mode": "0755"}
        )

    assert not host.file(DOUBLE).exists, f"{DOUBLE} exists before the test: not a GPU-less lab host"
    try:
        yield install
    finally:
        _ansible("ansible.builtin.file", {"path": DOUBLE, "state": "absent"})
    assert not host.file(DOUBLE).exists


GPU_HOST = {
    "sglang_gpu_required": True,
    "sglang_tp_size": 2,
    # The test container is Debian 12; a GPU host must run the production OS.
    "sglang_os_distribution": "Debian",
    "sglang_os_version": "12",
}


def test_gpu_facts_from_recorded_h200_nvlink_host(
    nvidia_smi_double: Callable[[str, str], None], run_preflight: Runner
) -> None:
    nvidia_smi_double("h200x2.query-gpu.csv", "h200x2-nvlink.topo-m.txt")
    proc = run_preflight(GPU_HOST, "--check", json_out=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json_result(proc.stdout)
    for h, result in task_results(doc, "Export the preflight facts").items():
        facts = result["ansible_facts"]
        assert facts["preflight_lab_mode"] is False, h
        assert facts["preflight_gpu_count"] == 2
        assert facts["preflight_gpu_names"] == ["NVIDIA H200", "NVIDIA H200"]
        assert facts["preflight_gpu_compute_capability"] == "9.0"
        assert facts["preflight_driver_version"] == "580.159.04"
        assert facts["preflight_driver_branch"] == 580
        assert facts["preflight_gpu_memory_mib"] == 143771
        assert facts["preflight_interconnect"] == "nvlink"
        assert facts["preflight_gpu_links"] == {"GPU0-GPU1": "NV18"}
        assert facts["preflight_nccl_profile_resolved"] == "nvlink"
        assert facts["preflight_cuda_driver_ok"] is True
    assert all(s["changed"] == 0 for s in doc["stats"].values()), doc["stats"]


def test_tp_size_8_on_a_2_gpu_host_fails(
    nvidia_smi_double: Callable[[str, str], None], run_preflight: Runner
) -> None:
    nvidia_smi_double("h200x2.query-gpu.csv", "h200x2-nvlink.topo-m.txt")
    proc = run_preflight({**GPU_HOST, "sglang_tp_size": 8})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "sglang_tp_size=8 does not fit the 2 GPU(s) of this host" in out
    assert "allowed 2" in out
    proc = run_preflight({**GPU_HOST, "sglang_tp_size": 8, "sglang_tp_size_must_equal_gpu_count": False})
    assert "allowed a divisor of 2: 1, 2" in proc.stdout + proc.stderr


def test_pcie_host_resolves_auto_to_pcie_and_old_driver_is_refused(
    nvidia_smi_double: Callable[[str, str], None], run_preflight: Runner, tmp_path: Path
) -> None:
    # The 8-GPU PCIe samples; then the same with the driver turned into an R570 one (in memory).
    old = (SAMPLES / "rtxpro6000x8.query-gpu.csv").read_text().replace("580.95.05", "570.172.08")
    nvidia_smi_double("rtxpro6000x8.query-gpu.csv", "rtxpro6000x8-pcie.topo-m.txt")
    proc = run_preflight({**GPU_HOST, "sglang_tp_size": 8}, json_out=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    facts = next(iter(task_results(json_result(proc.stdout), "Export the preflight facts").values()))
    assert facts["ansible_facts"]["preflight_interconnect"] == "pcie"
    assert facts["ansible_facts"]["preflight_nccl_profile_resolved"] == "pcie"
    assert facts["ansible_facts"]["preflight_gpu_compute_capability"] == "12.0"

    _ansible(
        "ansible.builtin.copy",
        {
            "dest": DOUBLE,
            "mode": "0755",
            "content": _double_script(old, (SAMPLES / "rtxpro6000x8-pcie.topo-m.txt").read_text()),
        },
    )
    proc = run_preflight({**GPU_HOST, "sglang_tp_size": 8})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "NVIDIA driver 570.172.08 (branch 570) is older than sglang_driver_min_branch=580" in out
    proc = run_preflight({**GPU_HOST, "sglang_tp_size": 8, "preflight_allow_old_driver": True})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "accepted because preflight_allow_old_driver=true" in out
