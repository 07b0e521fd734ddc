"""The real stage playbook (playbooks/preflight.yml) refuses, before any host is changed (issue 20
item 10, issue 21 item 7):

* bad `verify_*` and `autotune_*` values (preflight now runs those roles' validate.yml too);
* a `sglang_stack_python` the host does not have, on a GPU host (a named nvidia-smi TEST DOUBLE
  printing the recorded single-H200 sample stands in for the GPU, which cannot exist here), in check
  mode too; on a lab host (no GPU) a WARNING line instead;
* a non-loopback bind with authentication off unless `sglang_allow_unauthenticated_bind`.

`ansible-playbook` runs on the controller itself (`connection: local`, no container); every run must
end with changed=0.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import local_ansible_env
from test_validation_strings import LAB_INPUTS

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK = REPO / "playbooks" / "preflight.yml"
SAMPLES = REPO / "tests" / "data" / "nvidia-smi"
SHIPPED_MODEL = REPO / "src" / "sglang_deploy" / "data" / "lab-model"
# The GPU cases check the model directories for real, as the unit would see them: a checkout may live
# under /root, /home or /tmp (hidden by the unit's sandbox) or below a directory "other" cannot enter,
# so they read a copy of the shipped lab model installed where `sglang-deploy lab create` puts it on a
# lab host (root-owned, world-readable; install_lab_model, called by make_runner).
LAB_MODEL = Path("/opt/sglang-deploy-tests/lab-model")
GPU_MODEL = {
    "sglang_model_path": str(LAB_MODEL / "target"),
    "sglang_draft_model_path": str(LAB_MODEL / "eagle3"),
}
LAB: dict[str, Any] = {
    **LAB_INPUTS,
    # the controller's OS (the GPU cases are no lab mode: the production OS check applies)
    "sglang_os_distribution": "Debian",
    "sglang_os_version": "12",
}


def install_lab_model() -> None:
    """The shipped lab model at LAB_MODEL (root 0755/0644), copied again when it differs."""
    for kind in ("target", "eagle3"):
        src, dest = SHIPPED_MODEL / kind, LAB_MODEL / kind
        dest.mkdir(parents=True, exist_ok=True)
        for path in src.iterdir():
            if not (dest / path.name).is_file() or (dest / path.name).read_bytes() != path.read_bytes():
                shutil.copyfile(path, dest / path.name)
            (dest / path.name).chmod(0o644)
    for folder in (LAB_MODEL.parent, LAB_MODEL, LAB_MODEL / "target", LAB_MODEL / "eagle3"):
        folder.chmod(0o755)


def make_runner(tmp: Path) -> Any:
    """The harness: run the stage playbook on the controller with these inputs (also used by
    tests/test_preflight_model_pcie.py)."""
    install_lab_model()
    inventory = tmp / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "sglang_servers": {
                    "hosts": {
                        "val": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                    }
                }
            }
        )
    )
    # TEST DOUBLE of nvidia-smi (no GPU here): prints the recorded single-H200 host's answers
    double = tmp / "nvidia-smi"
    query = (SAMPLES / "h200x1.query-gpu.csv").read_text()
    double.write_text(
        "#!/bin/sh\n# TEST DOUBLE of nvidia-smi (tests/test_validation_preflight.py): recorded H200 sample\n"
        f"case \"$*\" in\n  --query-gpu=*) printf '%s' {shlex.quote(query)} ;;\n  *) exit 2 ;;\nesac\n"
    )
    double.chmod(0o755)
    env = local_ansible_env()

    def _run(
        over: dict[str, Any],
        *args: str,
        gpu: bool = False,
        smi: Path | None = None,
        playbook: Path = PLAYBOOK,
    ) -> subprocess.CompletedProcess[str]:
        # a GPU host checks the model directories for real: the repository's shipped lab model
        values = {**LAB, **(GPU_MODEL if gpu else {}), **over}
        values["preflight_nvidia_smi_candidates"] = (
            [str(smi or double)] if gpu else [str(tmp / "no-nvidia-smi")]
        )
        values.setdefault("preflight_lspci_candidates", [str(tmp / "no-lspci")])
        if gpu:
            values["sglang_gpu_required"] = True
        case = tmp / f"case{len(list(tmp.glob('case*')))}.json"
        case.write_text(json.dumps(values))
        cmd = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(playbook)]
        cmd += ["-e", f"@{case}", *args]
        return subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    return _run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_runner(tmp_path_factory.mktemp("preflight"))


def _recap(out: str) -> dict[str, int]:
    match = re.search(r"val\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert match, out[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups()), strict=True))


BAD_LATER_ROLES = {
    "verify_levels": ({"verify_levels": [0]}, "verify_levels=[0]", "positive integers"),
    "verify_levels_newline": ({"verify_levels": ["1\n"]}, "verify_levels", "control characters"),
    "verify_doc_path": (
        {"verify_doc_path": "/tmp/doc dir/"},
        'verify_doc_path="/tmp/doc dir/"',
        "absolute file path",
    ),
    "verify_bench_prompts_mode": (
        {"verify_bench_prompts_mode": "fast"},
        "verify_bench_prompts_mode must be one of",
        "scaled, seed",
    ),
    "autotune_nccl_reps": ({"autotune_nccl_reps": 2}, "autotune_nccl_reps=2", ">= 5"),
    "autotune_preset_levels": (
        {"autotune_preset_levels": ["8\n"]},
        "autotune_preset_levels",
        "control characters",
    ),
    "autotune_report_dir": (
        {"autotune_report_dir": "relative"},
        'autotune_report_dir="relative"',
        "absolute",
    ),
    "service_syscall": (
        {"sglang_service_syscall_filter": ["@system-service\nExecStartPre=+/bin/sh"]},
        "sglang_service_syscall_filter",
        "control characters",
    ),
    "service_state_dir": (
        {"sglang_service_state_dir": "/etc"},
        'sglang_service_state_dir="/etc"',
        "relative",
    ),
    # issue 32 item 8: a `..` component in any path input (the one path rule, text_checks.py)
    "service_state_dir_dotdot": (
        {"sglang_service_state_dir": "../etc"},
        "sglang_service_state_dir='../etc' is not valid",
        "without '..' components",
    ),
    "stack_root_dotdot": (
        {"sglang_stack_root": "/opt/sglang/../../etc"},
        "sglang_stack_root='/opt/sglang/../../etc' is not valid",
        "without '..' components",
    ),
    # issue 32 item 8: bounds on the benchmark's sizes (plugins/module_utils/bench_limits.py)
    "verify_levels_bound": ({"verify_levels": [1, 5000]}, "verify_levels=[1, 5000]", "1-4096"),
    "verify_prompts_bound": (
        {"verify_bench_num_prompts": 1000000},
        "verify_bench_num_prompts=1000000",
        "1-100000",
    ),
    "autotune_levels_bound": (
        {"autotune_preset_levels": [1, 30, 10000]},
        "autotune_preset_levels=[1, 30, 10000]",
        "1-4096",
    ),
    "autotune_prompts_bound": (
        {"autotune_preset_num_prompts": 200000},
        "autotune_preset_num_prompts=200000",
        "1-100000",
    ),
    "verify_doc_path_dotdot": (
        {"verify_doc_path": "/var/tmp/../../etc/cron.d/x"},
        "verify_doc_path='/var/tmp/../../etc/cron.d/x' is not valid",
        "without '..' components",
    ),
    "service_modprobe": (
        {"sglang_service_nvidia_modprobe": "/usr/bin/nvidia-modprobe;x"},
        'sglang_service_nvidia_modprobe="/usr/bin/nvidia-modprobe;x"',
        "absolute file path",
    ),
    "service_description_specifier": (
        {"sglang_service_description": "double %n"},
        'sglang_service_description="double %n"',
        "no % specifier",
    ),
}


# Issue 32 items 5 and 8: preflight's own inputs, refused before any host is changed.
BAD_PREFLIGHT: dict[str, tuple[dict[str, Any], str, str]] = {
    "key_dash": (
        {"sglang_api_key": "-" + "k" * 31, "sglang_api_key_required": True},
        "sglang_api_key (value not printed; 32 characters, starting with -)",
        "not starting with -",
    ),
    "admin_key": (
        {"sglang_extra_args": ["--admin-api-key", "AdminKey-0123456789-xyz"]},
        "sglang_extra_args holds --admin-api-key (value not printed): not allowed",
        "no credential path",
    ),
    "model_dotdot": (
        {"sglang_model_path": "/opt/models/../../etc"},
        "sglang_model_path='/opt/models/../../etc' is not valid",
        "without '..' components",
    ),
    "root_dotdot": (
        {"sglang_root": "/opt/sglang/.."},
        "sglang_root='/opt/sglang/..' is not valid",
        "without '..' components",
    ),
    "extra_args_unknown_flag": (
        {"sglang_extra_args": ["--enable-metricz"]},
        "sglang_extra_args SGLang 0.5.9's parser would refuse it: sglang.launch_server: error: ",
        "unrecognized arguments: --enable-metricz",
    ),
    "allow_known_bad": (
        {"sglang_allow_known_bad": "maybe"},
        'sglang_allow_known_bad="maybe" is not valid',
        "allowed true or false",
    ),
}


@pytest.mark.parametrize("case", list(BAD_PREFLIGHT))
def test_preflight_input_fails_before_any_change(run: Any, case: str) -> None:
    over, needle, allowed = BAD_PREFLIGHT[case]
    proc = run(over)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert needle in out, out[-3000:]
    assert allowed in out, out[-3000:]
    assert "AdminKey-0123456789" not in out
    assert "k" * 31 not in out
    recap = _recap(out)
    assert recap["changed"] == 0
    assert recap["failed"] == 1


@pytest.mark.parametrize("case", list(BAD_LATER_ROLES))
def test_later_role_input_fails_in_preflight(run: Any, case: str) -> None:
    over, needle, allowed = BAD_LATER_ROLES[case]
    proc = run(over)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert needle in out, out[-3000:]
    assert allowed in out, out[-3000:]
    recap = _recap(out)
    assert recap["changed"] == 0
    assert recap["failed"] == 1


def test_lab_inputs_pass(run: Any) -> None:
    proc = run({})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert _recap(out)["changed"] == 0
    assert "WARNING: sglang_stack_python" not in out


@pytest.mark.parametrize(
    ("python", "why"),
    [
        ("/nonexistent/bin/python3.12", "no such executable file"),
        ("python-none-such-3.99", "not found on PATH"),
    ],
)
@pytest.mark.parametrize("check", [False, True])
def test_missing_stack_python_fails_on_a_gpu_host(run: Any, python: str, why: str, check: bool) -> None:
    proc = run({"sglang_stack_python": python}, *(["--check"] if check else []), gpu=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert f'sglang_stack_python="{python}" is not an executable on this host ({why})' in out, out[-3000:]
    assert _recap(out)["changed"] == 0


def test_present_stack_python_passes_on_a_gpu_host(run: Any) -> None:
    proc = run({"sglang_stack_python": Path(sys.executable).name}, gpu=True)  # a name on PATH
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "1x NVIDIA H200" in out


def test_site_stops_at_preflight_when_the_stack_python_is_missing(run: Any) -> None:
    """Issue 32 item 8: in site.yml (the CLI's playbook) a GPU host without sglang_stack_python fails in
    preflight and leaves the run: no later stage (lock, CUDA, stack) runs a task on it. Check mode: a
    real run of site.yml would change this machine if the check did not hold."""
    proc = run(
        {"sglang_stack_python": "python-none-such-3.99"}, "--check", gpu=True,
        playbook=REPO / "playbooks" / "site.yml",
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert 'sglang_stack_python="python-none-such-3.99" is not an executable on this host' in out
    assert "Stage 2 - CUDA toolkit" not in out
    assert "TASK [sglang_stack" not in out
    assert "TASK [cuda_toolkit" not in out
    assert "Take the host lock" not in out
    assert _recap(out)["changed"] == 0


def test_stack_run_alone_stops_before_its_first_change_without_its_python(run: Any, tmp_path: Path) -> None:
    """Issue 32 item 8: playbooks/stack.yml on its own (no preflight) looks sglang_stack_python up with
    preflight's probe and stops before state.yml and tools.yml (its first changes), on a lab host too.
    Check mode (a real run would install on this machine if the check did not hold)."""
    over = {
        "sglang_stack_python": "python-none-such-3.99",
        "sglang_lock_enabled": False,
        "sglang_stack_root": str(tmp_path / "stack"),
    }
    proc = run(over, "--check", playbook=REPO / "playbooks" / "stack.yml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert 'sglang_stack_python="python-none-such-3.99" is not an executable on this host' in out, out[-3000:]
    assert "nothing was changed" in out
    assert "Apply the stack's host state" not in out
    assert "Install the system packages and uv" not in out
    assert _recap(out)["changed"] == 0
    assert not (tmp_path / "stack").exists()


def test_missing_stack_python_warns_on_a_lab_host(run: Any) -> None:
    proc = run({"sglang_stack_python": "python-none-such-3.99"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # the debug line is shown JSON-escaped: sglang_stack_python=\"...\"
    warning = r'WARNING: sglang_stack_python=\\?"python-none-such-3\.99\\?" is not an executable on this lab'
    assert re.search(warning, out), out[-3000:]


def test_open_bind_without_auth_is_refused_unless_allowed(run: Any) -> None:
    proc = run({"sglang_service_host": "0.0.0.0"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "sglang_service_host='0.0.0.0' is not a loopback address and authentication is off" in out
    assert "sglang_allow_unauthenticated_bind true" in out
    assert _recap(out)["changed"] == 0
    proc = run({"sglang_service_host": "0.0.0.0", "sglang_allow_unauthenticated_bind": True})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_probe_resolves_the_interpreter_as_uv_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from modload import load_module  # noqa: PLC0415 - the module imports ansible; only this test needs it

    probe = load_module("host_probe_validation", REPO / "plugins/modules/preflight_host_probe.py")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    py = bindir / "python3.77"
    py.write_text("#!/bin/sh\n")
    spec = {"smi_candidates": [], "root": str(tmp_path), "python": "python3.77"}
    monkeypatch.setenv("PATH", str(bindir))
    assert probe.probe(spec)["python"] == {"requested": "python3.77", "path": ""}  # not executable yet
    py.chmod(0o755)
    assert probe.probe(spec)["python"] == {"requested": "python3.77", "path": str(py)}
    assert probe.probe({**spec, "python": str(py)})["python"]["path"] == str(py)
    assert probe.probe({**spec, "python": str(bindir / "python9")})["python"]["path"] == ""
    assert "python" not in probe.probe({"smi_candidates": [], "root": str(tmp_path)})


def test_vault_key_with_the_newline_of_echo_is_refused_unprinted(run: Any, tmp_path: Path) -> None:
    """`echo KEY | ansible-vault encrypt_string` keeps echo's newline: refused, the key never shown."""
    key = "TestKey-0123456789-abcdefXYZ"  # test-only value
    password = tmp_path / "vault-pass"
    password.write_text("test-only-vault-password\n")
    password.chmod(0o600)
    vault = Path(sys.executable).with_name("ansible-vault")
    encrypted = subprocess.run(
        [
            str(vault),
            "encrypt_string",
            "--vault-password-file",
            str(password),
            "--stdin-name",
            "sglang_api_key",
        ],
        input=key + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    secrets = tmp_path / "vault.yml"
    secrets.write_text(encrypted)
    proc = run({"sglang_api_key_required": True}, "-e", f"@{secrets}", "--vault-password-file", str(password))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "sglang_api_key=(value not printed) is not valid: allowed text without control characters" in out
    assert key not in out
    assert _recap(out)["changed"] == 0
