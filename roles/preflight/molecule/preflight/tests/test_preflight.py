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
    doc, _end = json.JSONDecoder().raw_decode(stdout[start:])
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


# One row per rule: overrides, then substrings the failure must contain (variable, bad value,
# allowed values). Preflight runs every rule of the later roles too (their own validate.yml), so a
# rule any role applies to an input fails HERE, before a host is changed. All rows run in ONE
# ansible-playbook run: each row is its own inventory host (an alias of the scenario's container)
# carrying its overrides as host vars; the JSON callback gives each host's failure and recap.
BAD_INPUTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    # ports (the service has no CAP_NET_BIND_SERVICE)
    "port_80": ({"sglang_service_port": 80}, ["sglang_service_port=80", "allowed an integer 1024-65535"]),
    "port_70000": ({"sglang_service_port": 70000}, ["sglang_service_port=70000", "1024-65535"]),
    "port_not_a_number": (
        {"sglang_service_port": "http"},
        ["sglang_service_port", "'http'", "convert to int"],
    ),
    # API key rules (the value is never printed)
    "api_key_example_value": (
        {"sglang_api_key_required": True, "sglang_api_key": "change-me"},
        ["sglang_api_key (value not printed", "placeholder of vault.yml.example"],
    ),
    "api_key_short": (
        {"sglang_api_key_required": True, "sglang_api_key": "short-key"},
        ["sglang_api_key (value not printed; 9 characters)", "at least 16 characters"],
    ),
    "api_key_bad_chars": (
        {"sglang_api_key": "0123456789abcdef $(reboot)"},
        ["sglang_api_key (value not printed", "A-Z a-z 0-9 . _ ~ + / = : @ -"],
    ),
    "api_key_required_but_empty": (
        {"sglang_api_key_required": True, "sglang_api_key": ""},
        ["sglang_api_key is empty or unset", "sglang_api_key_required=true", "sglang_api_key_required false"],
    ),
    # tp size (on GPU hosts also against the GPU count: see the nvidia-smi double tests below)
    "tp_zero": ({"sglang_tp_size": 0}, ["sglang_tp_size=0", "allowed an integer 1-64"]),
    "tp_65": ({"sglang_tp_size": 65}, ["sglang_tp_size=65", "allowed an integer 1-64"]),
    # preset / topk / spec v2
    "topk_with_production": (
        {"sglang_speculative_eagle_topk": 4},
        ["sglang_speculative_eagle_topk=4", "sglang_preset='production'", "1 or null with spec v2"],
    ),
    "topk_with_spec_v2_forced": (
        {"sglang_preset": "tree", "sglang_spec_v2": True, "sglang_speculative_eagle_topk": 2},
        ["sglang_speculative_eagle_topk=2", "sglang_spec_v2=true", "overlap worker rejects topk > 1"],
    ),
    "spec_v2_on_baseline": (
        {"sglang_preset": "baseline", "sglang_spec_v2": True},
        ["sglang_spec_v2=true", "needs a speculative preset"],
    ),
    "draft_tokens_chain": (
        {"sglang_speculative_num_draft_tokens": 5},
        ["sglang_speculative_num_draft_tokens=5", "3 or null with eagle_topk 1 and num_steps 2"],
    ),
    "preset_unknown": (
        {"sglang_preset": "turbo"},
        ["sglang_preset", "got: turbo", "production, baseline, tree"],
    ),
    "preset_not_allowed_here": (
        {"sglang_presets_allowed": ["baseline"]},
        ["sglang_preset='production'", "one of sglang_presets_allowed: baseline"],
    ),
    "num_steps_zero": (
        {"sglang_speculative_num_steps": 0},
        ["sglang_speculative_num_steps=0", "positive integer"],
    ),
    "spec_v2_not_bool": ({"sglang_spec_v2": "maybe"}, ["sglang_spec_v2", "maybe", "bool"]),
    # model paths and strings that would break a unit, an env file or a shell command
    "model_path_relative": (
        {"sglang_model_path": "models/target"},
        ["sglang_model_path='models/target'", "absolute path"],
    ),
    "model_path_space": (
        {"sglang_model_path": "/opt/my model"},
        ["sglang_model_path='/opt/my model'", "absolute path"],
    ),
    "model_path_newline": (
        {"sglang_model_path": "/opt/a\nExecStartPre=/bin/sh"},
        # the one string rule (control characters, every input) answers first
        ["sglang_model_path='/opt/a\\nExecStartPre", "without control characters"],
    ),
    "model_path_quote": (
        {"sglang_model_path": '/opt/"m"'},
        ["sglang_model_path='/opt/\"m\"'", "absolute path"],
    ),
    "model_path_dollar": (
        {"sglang_model_path": "/opt/$HOME"},
        ["sglang_model_path='/opt/$HOME'", "absolute path"],
    ),
    "draft_path_semicolon": (
        {"sglang_draft_model_path": "/opt/d;rm -rf /"},
        ["sglang_draft_model_path='/opt/d;rm -rf /'", "absolute path"],
    ),
    "draft_missing_for_production": (
        {"sglang_draft_model_path": ""},
        ["sglang_draft_model_path=''", "required unless sglang_preset is baseline"],
    ),
    "served_name_space": (
        {"sglang_served_model_name": "my model"},
        ["sglang_served_model_name='my model'", "a name of"],
    ),
    "extra_arg_newline": (
        {"sglang_extra_args": ["--log-level\ninfo"]},
        ["sglang_extra_args[0]='--log-level\\ninfo'", "without control characters"],
    ),
    "extra_arg_managed": (
        {"sglang_extra_args": ["--port", "1"]},
        ["sglang_extra_args='--port'", "does not already set"],
    ),
    "launch_env_quote": (
        {"sglang_launch_environment": {"A": 'x"y'}},
        ["sglang_launch_environment.A='x\"y'", "double quotes"],
    ),
    "host_invalid": (
        {"sglang_service_host": "my host!"},
        ["sglang_service_host='my host!'", "IPv4/IPv6 address"],
    ),
    "root_relative": (
        {"sglang_root": "opt/sglang"},
        ['sglang_root="opt/sglang"', "allowed an absolute path"],
    ),
    "root_space": (
        {"sglang_root": "/opt/sg lang"},
        ['sglang_root="/opt/sg lang"', "absolute path other than / made of letters, digits"],
    ),
    # server flags
    "attention_backend": (
        {"sglang_attention_backend": "fast"},
        ["sglang_attention_backend", "got: fast", "flashinfer"],
    ),
    "mem_fraction": ({"sglang_mem_fraction_static": 1.5}, ["sglang_mem_fraction_static=1.5", "(0, 1)"]),
    # NCCL values (nccl_env's own rules, run by preflight)
    "nccl_profile_unknown": (
        {"sglang_nccl_profile": "infiniband"},
        ["sglang_nccl_profile", "got: infiniband", "auto, pcie, nvlink, none"],
    ),
    "nccl_proto_unknown": (
        {"nccl_env_extra": {"NCCL_PROTO": "Fast"}},
        ["NCCL_PROTO='Fast'", "LL, LL128, Simple"],
    ),
    "nccl_nthreads": ({"nccl_env_extra": {"NCCL_NTHREADS": 100}}, ["NCCL_NTHREADS='100'", "multiple of 64"]),
    "nccl_value_space": (
        {"nccl_env_extra": {"NCCL_DEBUG": "INFO WARN"}},
        ["NCCL_DEBUG='INFO WARN'", "bad characters"],
    ),
    "nccl_name": (
        {"nccl_env_extra": {"LD_PRELOAD": "/tmp/x.so"}},
        ["'LD_PRELOAD' is not allowed", "^NCCL_[A-Z0-9_]+$"],
    ),
    "nccl_file_elsewhere": (
        {"nccl_env_file": "/tmp/other.env"},
        ['nccl_env_file="/tmp/other.env"', "sglang_nccl_env_file"],
    ),
    # CUDA method and version (cuda_toolkit's own rules, run by preflight)
    "cuda_method": (
        {"cuda_toolkit_method": "conda"},
        ["cuda_toolkit_method", "got: conda", "auto, apt, wheel, existing"],
    ),
    "cuda_version_format": ({"sglang_cuda_version": "13.0"}, ['sglang_cuda_version="13.0"', "allowed X.Y.Z"]),
    "cuda_release_mismatch": (
        {"sglang_cuda_release": "12.8"},
        ['sglang_cuda_release="12.8"', "Allowed: sglang_cuda_release = major.minor"],
    ),
    "cuda_compile_archs": (
        {"cuda_toolkit_compile_archs": ["sm_90"]},
        ["cuda_toolkit_compile_archs", "sm_90", "digits"],
    ),
    # releases to keep and other stack inputs (sglang_stack's own rules, run by preflight)
    "keep_releases_zero": (
        {"sglang_stack_keep_releases": 0},
        ["sglang_stack_keep_releases=0", "integer >= 1"],
    ),
    "stack_source": (
        {"sglang_stack_source": "conda"},
        ["sglang_stack_source", "got: conda", "git, sdist, wheel"],
    ),
    # service-only inputs (sglang_service's own rules, run by preflight)
    "service_user_root": ({"sglang_service_user": "root"}, ["sglang_service_user='root'", "not root"]),
    # manifest and host
    "git_commit_format": (
        {"sglang_git_commit": "v0.5.9"},
        ['sglang_git_commit="v0.5.9"', "40 lower-case hex digits"],
    ),
    "git_commit_short": (
        {"sglang_git_commit": "bbe9c7eeb"},
        ['sglang_git_commit="bbe9c7eeb"', "the full commit id"],
    ),
    "python_version_format": ({"sglang_python_version": "3"}, ['sglang_python_version="3"', "allowed 3.Y"]),
    "gpu_required_not_bool": (
        {"sglang_gpu_required": "maybe"},
        ["sglang_gpu_required", "'maybe'", "Valid booleans"],
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


@pytest.fixture(scope="module")
def bad_input_run(
    tmp_path_factory: pytest.TempPathFactory, host: Any, baseline: str
) -> tuple[dict[str, Any], str]:
    """One playbooks/preflight.yml run over one alias host per BAD_INPUTS row (any_errors_fatal off,
    so every row reaches its own failure), JSON callback. Returns (the JSON doc, the snapshot after)."""
    inv = yaml.safe_load(INVENTORY_FILE.read_text())
    # every row reaches the same container (the docker connection takes the container's name from
    # ansible_host, else from the inventory name)
    connection = {**_hostvars(inv, HOSTS[0]), "ansible_host": HOSTS[0]}
    lab = json.loads(LAB_VARS.read_text())
    cases = {f"bad_{name}": {**connection, **lab, **over} for name, (over, _expected) in BAD_INPUTS.items()}
    tmp = tmp_path_factory.mktemp("bad")
    inventory = tmp / "bad.yml"
    inventory.write_text(json.dumps({"sglang_servers": {"hosts": cases}}))
    playbook = tmp / "preflight_all.yml"
    source = yaml.safe_load(PLAYBOOK.read_text())
    for play in source:
        play["any_errors_fatal"] = False  # every row must reach its own failure
    playbook.write_text(yaml.safe_dump(source))
    env = moltest.ansible_env("ansible.posix.json")
    env["ANSIBLE_ROLES_PATH"] = str(REPO / "roles")
    cmd = [
        "ansible-playbook",
        "-i",
        str(INVENTORY_FILE.parent),
        "-i",
        str(inventory),
        str(playbook),
        "-f",
        "8",
    ]
    cmd += ["--limit", "sglang_servers:!" + ":!".join(HOSTS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=900)
    assert proc.returncode != 0, proc.stdout[-3000:]
    return json_result(proc.stdout), str(host.check_output(SNAPSHOT))


def _hostvars(inv: Any, name: str) -> dict[str, Any]:
    if isinstance(inv, dict):
        hosts = inv.get("hosts") or {}
        if name in hosts:
            return dict(hosts[name] or {})
        for key, child in inv.items():
            if key != "hosts":
                found = _hostvars(child, name)
                if found:
                    return found
    return {}


def _host_failures(doc: dict[str, Any], name: str) -> str:
    messages: list[str] = []
    for play in doc["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(name)
            if result and result.get("failed"):
                for item in [result, *result.get("results", [])]:  # a loop's items carry their own msg
                    messages += [str(item.get("msg", "")), *map(str, item.get("argument_errors", []))]
    return "\n".join(messages)


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_rejected_in_preflight_and_changes_nothing(
    case: str, bad_input_run: tuple[dict[str, Any], str], baseline: str
) -> None:
    doc, after = bad_input_run
    name = f"bad_{case}"
    stats = doc["stats"][name]
    assert stats["failures"] == 1, stats
    assert stats["changed"] == 0, stats
    failure = _host_failures(doc, name)
    for text in BAD_INPUTS[case][1]:
        assert text in failure, f"{text!r} not in the failure of case {case}:\n{failure[:3000]}"
    assert after == baseline, "a bad-input run changed files on the host"
    assert "/etc/sglang " not in after
    assert "/opt/sglang " not in after


def test_every_rule_family_is_covered() -> None:
    names = {next(iter(overrides)) for overrides, _expected in BAD_INPUTS.values()}
    for needed in (
        "sglang_service_port", "sglang_api_key", "sglang_tp_size", "sglang_speculative_eagle_topk",
        "sglang_spec_v2", "sglang_model_path", "nccl_env_extra", "cuda_toolkit_method",
        "sglang_cuda_version", "sglang_stack_keep_releases", "sglang_extra_args",
    ):  # fmt: skip
        assert needed in names, needed


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
    # the lab model (prepare.yml) passes preflight's model checks: no finding, not even a warning
    assert "model LlamaForCausalLM bfloat16" in out
    assert "WARNING (lab host)" not in out
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


def test_nccl_env_interconnect_decides_the_exported_profile(
    nvidia_smi_double: Callable[[str, str], None], run_preflight: Runner
) -> None:
    """The inventory's nccl_env_interconnect overrides the detected NVLink in preflight's export and
    the launch spec, as it does in the nccl_env role's file (one decider: module_utils/nccl_profile.py)."""
    nvidia_smi_double("h200x2.query-gpu.csv", "h200x2-nvlink.topo-m.txt")
    proc = run_preflight({**GPU_HOST, "nccl_env_interconnect": "pcie"}, "--check", json_out=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json_result(proc.stdout)
    facts = next(iter(task_results(doc, "Export the preflight facts").values()))["ansible_facts"]
    assert facts["preflight_interconnect"] == "nvlink"
    assert facts["preflight_nccl_profile_resolved"] == "pcie"
    spec = next(iter(task_results(doc, "Export the launch spec").values()))["ansible_facts"]
    assert spec["preflight_launch_spec"]["nccl"]["resolved"] == "pcie"


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


def test_gpu_host_refuses_a_model_the_service_user_cannot_read(
    nvidia_smi_double: Callable[[str, str], None], run_preflight: Runner
) -> None:
    """The service user (not created yet on this host: judged by the 'other' bits) cannot read a
    weight file of mode 0600: refused in preflight, in check mode too, naming the file and the fix."""
    nvidia_smi_double("h200x2.query-gpu.csv", "h200x2-nvlink.topo-m.txt")
    weights = "/opt/models/lab-target/model.safetensors"
    _ansible("ansible.builtin.file", {"path": weights, "mode": "0600"})
    try:
        proc = run_preflight(GPU_HOST, "--check")
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0
        assert f"cannot read {weights} (mode 0600): chmod -R o+r /opt/models/lab-target" in out, out[-3000:]
        assert all(c["changed"] == 0 for c in recap(out).values())
    finally:
        _ansible("ansible.builtin.file", {"path": weights, "mode": "0644"})
