"""The one validator (issue 33 item 4): the rules of each role in plugins/plugin_utils/input_rules/,
run by the action sglang.deploy.validate_inputs; each role's tasks/validate.yml is that one task.

Pure: the rules are called with plain dicts (what the action templates from the task's variables);
tests/test_validation_*.py run the same rules through the real preflight."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import REPO, iter_tasks  # puts the checkout on sys.path as the collection

_FQCN = "ansible_collections.sglang.deploy.plugins."
validate_inputs = importlib.import_module(_FQCN + "action.validate_inputs")
input_rules = importlib.import_module(_FQCN + "plugin_utils.input_rules")
nccl_env = importlib.import_module(_FQCN + "plugin_utils.input_rules.nccl_env")
sglang_service = importlib.import_module(_FQCN + "plugin_utils.input_rules.sglang_service")
cuda_toolkit = importlib.import_module(_FQCN + "plugin_utils.input_rules.cuda_toolkit")

MIGRATED = (
    "nccl_env",
    "sglang_service",
    "cuda_toolkit",
    "autotune",
    "verify",
    "sglang_stack",
    "sglang_router",
    "preflight",
)


def _spec_values(role: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The role's validate inputs that have a plain default (no template left in it)."""
    return {
        k: defaults[k]
        for k in validate_inputs.spec_inputs(role)
        if k in defaults and "{{" not in str(defaults[k])
    }


def _defaults(role: str) -> dict[str, Any]:
    """The manifest and the role's defaults, plain references ("{{ name }}", "x{{ name }}y") resolved."""
    values: dict[str, Any] = {}
    for path in sorted((REPO / "group_vars" / "all").glob("*.yml")):
        values.update(yaml.safe_load(path.read_text()) or {})
    values.update(yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {})
    ref = re.compile(r"\{\{ ([a-z_0-9]+) \}\}")
    for _round in range(3):
        for name, value in values.items():
            if not isinstance(value, str):
                continue
            whole = ref.fullmatch(value)
            if whole and whole.group(1) in values:
                values[name] = values[whole.group(1)]
            elif all(
                m.group(1) in values and isinstance(values[m.group(1)], str) for m in ref.finditer(value)
            ):
                values[name] = ref.sub(lambda m: str(values[m.group(1)]), value)
    return values


def _nccl(**over: Any) -> dict[str, Any]:
    d = _defaults("nccl_env")
    v = _spec_values("nccl_env", d)
    v.update(
        nccl_env_profile="auto",
        nccl_env_profiles_allowed=["auto", "pcie", "nvlink", "none", "tuned"],
        nccl_env_file="/etc/sglang/nccl.env",
    )
    v.update(over)
    return v


CHECK = "sglang.deploy.validate_inputs"


@pytest.mark.parametrize("role", MIGRATED)
def test_each_migrated_role_validates_with_the_one_task(role: str) -> None:
    """The role's entry point checks its inputs with the one validator's task, once: in its tasks/main.yml,
    or in the tasks/validate.yml main.yml includes (cuda_toolkit: with the OS facts its method reads)."""
    tasks_dir = REPO / "roles" / role / "tasks"
    main = iter_tasks(yaml.safe_load((tasks_dir / "main.yml").read_text()))
    validate = tasks_dir / "validate.yml"
    checks = [t for t in main if CHECK in t]
    if not checks:
        includes = [t.get("ansible.builtin.include_tasks", {}).get("file") for t in main]
        assert "validate.yml" in includes, role
        checks = [t for t in iter_tasks(yaml.safe_load(validate.read_text())) if CHECK in t]
    assert [t[CHECK] for t in checks] == [{"role": role}], role
    assert validate_inputs.rules_of(role) is not None
    if validate.is_file():
        # preflight's check of the later roles includes it: the same task, besides it only the host facts
        # a rule needs (cuda_toolkit's method choice reads the OS)
        tasks = yaml.safe_load(validate.read_text())
        assert tasks[-1] == {"name": "Check the inputs", CHECK: {"role": role}}
        assert all("ansible.builtin.setup" in task for task in tasks[:-1]), tasks


def test_the_string_rule_runs_once_in_the_action_not_in_a_role() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "roles").glob("*/tasks/validate*.yml"))
        if "text_errors" in p.read_text() or "ansible.builtin.assert" in p.read_text()
    ]
    assert offenders == []


def test_every_role_with_input_rules_is_migrated() -> None:
    """Every role's validate.yml is the one validator's task (no Jinja assert loop is left), and it is there
    for each role preflight checks before any change (preflight_validate_roles, and the router's)."""
    roles = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/tasks/validate.yml"))
    defaults = yaml.safe_load((REPO / "roles/preflight/defaults/main.yml").read_text())
    assert roles == sorted([*defaults["preflight_validate_roles"], "sglang_router"])
    assert set(roles) <= set(MIGRATED)
    rule_files = (REPO / "plugins/plugin_utils/input_rules").glob("*.py")
    rules = sorted(p.stem for p in rule_files if p.stem != "__init__")
    assert rules == sorted(MIGRATED)


def test_nccl_env_defaults_pass() -> None:
    assert nccl_env.errors(_nccl()) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"nccl_env_profile": "fast"}, 'nccl_env_profile="fast" is not a known profile; allowed: auto, pcie'),
        (
            {"nccl_env_profile": "tuned", "nccl_env_tuned": {}},
            "got nccl_env_tuned={}: run the autotune first",
        ),
        (
            {"nccl_env_interconnect": "ib"},
            "nccl_env_interconnect=\"ib\" is not valid: allowed '', nvlink, pcie",
        ),
        (
            {"nccl_env_safety_apply": "x"},
            'nccl_env_safety_apply="x" is not valid: allowed nvlink, always, never',
        ),
        ({"preflight_interconnect": "ib"}, 'preflight_interconnect="ib" is not valid'),
        (
            {"nccl_env_file": "/etc/nccl env"},
            'nccl_env_file="/etc/nccl env" is not valid: allowed an absolute file',
        ),
        ({"nccl_env_file": "/etc/x/"}, 'nccl_env_file="/etc/x/" is not valid'),
        ({"nccl_env_file": "/etc/x\n"}, 'nccl_env_file="/etc/x\\n" is not valid'),
        (
            {"preflight_launch_spec": {"nccl": {"env_file": "/etc/sglang/other.env"}}},
            'the file the launch spec loads (sglang_nccl_env_file="/etc/sglang/other.env")',
        ),
        ({"nccl_env_extra": ["NCCL_ALGO"]}, 'nccl_env_extra=["NCCL_ALGO"] is not valid: allowed a dict'),
        ({"nccl_env_extra": {"FOO": "1"}}, "nccl_env_extra: variable name 'FOO' is not allowed"),
        ({"nccl_env_safety": {"NCCL_ALGO": "Ring;x"}}, "nccl_env_safety: NCCL_ALGO='Ring;x': bad characters"),
        ({"nccl_env_profile_vars": {"pcie": []}}, "nccl_env_profile_vars.pcie=[] is not valid"),
        ({"nccl_env_unset": "NCCL_ALGO"}, 'nccl_env_unset="NCCL_ALGO" is not valid: allowed a list'),
        ({"nccl_env_unset": ["bad"]}, "nccl_env_unset: variable name 'bad' is not allowed"),
        (
            {"nccl_env_profile": "tuned", "nccl_env_tuned": {"vars": {"NCCL_PROTO": "Fast"}}},
            "nccl_env_tuned.vars: NCCL_PROTO='Fast': unknown name(s)",
        ),
    ],
)
def test_nccl_env_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = nccl_env.errors(_nccl(**over))
    assert any(expected in e for e in errors), errors


def test_nccl_env_reports_every_error_at_once() -> None:
    errors = nccl_env.errors(_nccl(nccl_env_safety_apply="x", nccl_env_file="rel", nccl_env_unset=["bad"]))
    assert len(errors) == 3, errors


def test_the_message_helpers() -> None:
    errs = input_rules.Errors()
    errs.bad("x_var", "a\nb", "letters")
    assert errs == ['x_var="a\\nb" is not valid: allowed letters']
    assert input_rules.full("[a-z]+", "abc")
    assert not input_rules.full("[a-z]+", "abc\n")
    assert not input_rules.full("[a-z]+\\s*", "abc\t")
    assert input_rules.is_list([])
    assert not input_rules.is_list("ab")
    assert not input_rules.is_list({})


def test_every_rule_module_is_a_role_with_a_validate_entry_point() -> None:
    folder = Path(str(input_rules.__file__)).parent
    for path in folder.glob("*.py"):
        if path.name == "__init__.py":
            continue
        spec = yaml.safe_load((REPO / "roles" / path.stem / "meta" / "argument_specs.yml").read_text())
        assert "validate" in spec["argument_specs"], path.stem


def _service(**over: Any) -> dict[str, Any]:
    d = _defaults("sglang_service")
    v = _spec_values("sglang_service", d)
    v.update(sglang_service_cuda_home="/usr/local/cuda", sglang_service_path_dirs=["/usr/local/cuda/bin"])
    v.update(over)
    return v


def test_sglang_service_defaults_pass() -> None:
    assert sglang_service.errors(_service()) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"sglang_service_user": "root"}, "sglang_service_user='root' is not a system account name"),
        ({"sglang_service_device_policy": "strict"}, "sglang_service_device_policy='strict' is not valid"),
        ({"sglang_service_syscall_filter": ["@system-service\n"]}, "sglang_service_syscall_filter=["),
        ({"sglang_service_syscall_deny": "@privileged"}, 'sglang_service_syscall_deny="@privileged" is not'),
        (
            {"sglang_service_state_dir": "/etc"},
            'sglang_service_state_dir="/etc" is not valid: allowed a relative',
        ),
        ({"sglang_service_cache_dir": "a/../b"}, 'sglang_service_cache_dir="a/../b" is not valid'),
        ({"sglang_service_description": "x %n"}, 'sglang_service_description="x %n" is not valid'),
        ({"sglang_service_nvidia_modprobe": "/usr/bin/x;y"}, 'sglang_service_nvidia_modprobe="/usr/bin/x;y"'),
    ],
)
def test_sglang_service_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = sglang_service.errors(_service(**over))
    assert any(expected in e for e in errors), errors


def _toolkit(**over: Any) -> dict[str, Any]:
    d = _defaults("cuda_toolkit")
    v = _spec_values("cuda_toolkit", d)
    version = d["sglang_cuda_version"]
    v.update(
        cuda_toolkit_expected_version=version,
        cuda_toolkit_expected_release=d["sglang_cuda_release"],
        cuda_toolkit_nvcc_builds=d["sglang_cuda_nvcc_builds"],
        cuda_toolkit_prefix=f"/opt/cuda/{version}",
        cuda_toolkit_apt_signing_key=d["cuda_toolkit_apt_repo_url"] + "3bf863cc.pub",
        cuda_toolkit_allow_driver_mismatch=False,
        sglang_driver_min_branch=d["sglang_driver_min_branch"],
        __cuda_toolkit_method="apt",
    )
    if "{{" in str(d.get("cuda_toolkit_wheel_hashes")):
        v["cuda_toolkit_wheel_hashes"] = {f"cuda-toolkit=={version}": ["a" * 64]}
    v.update(over)
    return v


def test_cuda_toolkit_defaults_pass() -> None:
    assert cuda_toolkit.errors(_toolkit()) == []
    # a driver preflight found new enough, or no GPU: no gate
    assert cuda_toolkit.errors(_toolkit(preflight_driver_branch=580, preflight_gpu_count=1)) == []
    assert cuda_toolkit.errors(_toolkit(preflight_driver_branch=535, preflight_gpu_count=0)) == []
    assert (
        cuda_toolkit.errors(_toolkit(preflight_driver_branch=535, cuda_toolkit_allow_driver_mismatch=True))
        == []
    )


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"cuda_toolkit_expected_version": "13.0"}, 'cuda_toolkit_expected_version="13.0" is not valid'),
        ({"cuda_toolkit_expected_release": "12.9"}, 'cuda_toolkit_expected_release="12.9" is not valid'),
        ({"cuda_toolkit_compile_archs": ["sm90"]}, 'cuda_toolkit_compile_archs=["sm90"] is not valid'),
        ({"cuda_toolkit_prefix": "opt/cuda"}, 'cuda_toolkit_prefix="opt/cuda" is not valid: allowed a path'),
        ({"cuda_toolkit_wheelhouse": "rel"}, 'cuda_toolkit_wheelhouse="rel" is not valid'),
        ({"cuda_toolkit_apt_repo_url": "https://x.invalid/no-slash"}, "a flat repository ending in /"),
        ({"preflight_driver_branch": 535}, "preflight found NVIDIA driver branch 535"),
        ({"preflight_driver_branch": 590, "preflight_cuda_driver_ok": False}, "driver branch 590"),
        (
            {"cuda_toolkit_apt_key_fingerprint": "3BF863CC"},
            'cuda_toolkit_apt_key_fingerprint="3BF863CC": allowed',
        ),
        ({"cuda_toolkit_allow_insecure_repo": "maybe"}, 'cuda_toolkit_allow_insecure_repo="maybe": allowed'),
        ({"cuda_toolkit_apt_signing_key": "http://x.invalid/k"}, "cuda_toolkit_apt_signing_key="),
        ({"cuda_toolkit_wheel_hashes": {"cuda-toolkit==1.0.0": ["a" * 64]}}, "cuda_toolkit_wheel_hashes="),
        ({"cuda_toolkit_wheel_hashes": {}}, "bad cuda_toolkit input: cuda_toolkit_wheel_hashes={}"),
    ],
)
def test_cuda_toolkit_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = cuda_toolkit.errors(_toolkit(**over))
    assert any(expected in e for e in errors), errors


def test_group_facts_are_read_from_the_hosts_of_the_group() -> None:
    errors: list[str] = []
    task_vars = {
        "groups": {"sglang_servers": ["s1", "s2", "gone"], "other": ["o1"]},
        "hostvars": {"s1": {"verify_baseline_records": {"a": {"startup_s": 5}}}, "s2": {}, "o1": {"x": 1}},
    }
    wanted = {"sglang_servers": ("verify_baseline_records",)}
    found = validate_inputs.ActionModule._group_facts(task_vars, wanted, errors)
    assert found == {"sglang_servers": {"s1": {"verify_baseline_records": {"a": {"startup_s": 5}}}}}
    assert errors == []
    assert validate_inputs.ActionModule._group_facts({}, wanted, errors) == {"sglang_servers": {}}


def test_cuda_toolkits_summary_says_what_the_driver_gate_judged() -> None:
    rules = importlib.import_module(_FQCN + "plugin_utils.input_rules.cuda_toolkit")
    base = {"__cuda_toolkit_method": "existing", "__cuda_toolkit_home": "/usr/local/cuda-13.0"}
    known = rules.summary({**base, "preflight_driver_branch": "580", "preflight_gpu_count": 8})
    assert known == "driver gate: branch 580, method existing, toolkit home /usr/local/cuda-13.0"
    unknown = rules.summary({**base, "preflight_driver_branch": "580", "preflight_gpu_count": 0})
    assert unknown.startswith("driver gate: driver unknown (no preflight facts / no GPU), method existing")
