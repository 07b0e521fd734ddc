"""Every string input is refused in preflight when it holds a newline (issue 21 item 5, issue 20 item 10).

Table-driven from the roles' argument specs: every option of type str/path, and every list of
str/path, of every role preflight validates (its own `main` entry point, the others' `validate`),
gets `value + "\\n"` (one trailing newline: what `^...$` with `match` let through; a key made with
`echo key | ansible-vault encrypt_string` has one) and `"a\\nb"` (an embedded newline, e.g. an
`ExecStartPre=+...` injected into the unit). Plus the autotune record's strings that reach the NCCL
file's comment (nccl_env_tuned) and strings nested in mappings.

Each case runs through the real preflight, with `ansible-playbook` on the controller itself
(`connection: local`, no container): one play runs the whole preflight role once (the probe, lab mode
on this GPU-less machine, the launch spec), then, per case, preflight's own input checks
(tasks/validate.yml) or what its later-roles step runs (the `preflight_roles` block of
tasks/main.yml: the role's validate.yml with its argument spec, defaults and vars) with the bad value;
the failure message is recorded in a block's rescue.
A case passes when that message names the variable (and, for the API key, never prints it).
To keep the run short (about 0.5-1 s of CPU per pass through a role's checks on 2 CPUs):
* a preflight input runs preflight's input check, another role's input that role's validate.yml as
  preflight's later-roles step includes it (preflight's own checks never read another role's inputs;
  the first, real preflight runs everything);
* the inputs of one role go through together, per kind of value: the checks report every bad input
  at once (the argument spec lists each option outside its choices; the control-character check
  names each string), so every input's own rejection is in that one message. Inputs with choices
  form their own group (the argument spec stops the role before the later checks).
Nothing on the machine is changed (every task is a check or a set_fact).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import local_ansible_env

REPO = Path(__file__).resolve().parents[1]
ROLES = ("preflight", "cuda_toolkit", "sglang_stack", "nccl_env", "sglang_service", "verify", "autotune")
KEY = "TestKey-0123456789-abcdefXYZ"  # test-only value: must never appear in a message
LAB_INPUTS: dict[str, Any] = {
    "sglang_gpu_required": False,
    "sglang_tp_size": 1,
    "sglang_model_path": "/opt/models/lab-target",
    "sglang_draft_model_path": "/opt/models/lab-eagle3",
    "sglang_min_free_disk_gib": 0,
    "sglang_api_key_required": False,
    # the probe looks it up on this machine: the interpreter running the tests exists
    "sglang_stack_python": sys.executable,
    # what the lab reaches: PyPI's wheel (the default GitHub cu130 URL needs sglang_sgl_kernel_sha256)
    "sglang_stack_sgl_kernel_requirement": "sgl-kernel==0.3.21",
}
PATHISH = ("path", "dir", "file", "root", "home", "prefix", "python", "tokenizer", "modprobe", "link", "dest")


def _spec_options(role: str) -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    specs = doc["argument_specs"]
    entry = specs["main"] if role == "preflight" else specs.get("validate")
    assert entry is not None, (
        f"{role}: no `validate` entry point: preflight would run its checks without its spec"
    )
    options: dict[str, Any] = entry["options"]
    return options


def _plain_defaults() -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in sorted((REPO / "group_vars" / "all").glob("*.yml")):
        values.update(yaml.safe_load(path.read_text()) or {})
    for role in ROLES:
        path = REPO / "roles" / role / "defaults" / "main.yml"
        if path.is_file():
            values.update(yaml.safe_load(path.read_text()) or {})
    values.update(LAB_INPUTS)
    return values


def _is_plain(value: Any) -> bool:
    return isinstance(value, str) and "{{" not in value and "{%" not in value


def _base(name: str, default: Any) -> str:
    """A valid-looking value to append the newline to: the shipped default when it is a plain string."""
    if _is_plain(default) and default:
        return str(default)
    return "/opt/x" if any(word in name for word in PATHISH) else "x"


def string_inputs() -> list[tuple[str, str, bool]]:
    """(role, name, is_list) of every str/path input and list of str/path of the roles' specs."""
    found: list[tuple[str, str, bool]] = []
    for role in ROLES:
        for name, opt in _spec_options(role).items():
            kind = opt.get("type", "str")
            if kind in ("str", "path"):
                found.append((role, name, False))
            elif kind == "list" and opt.get("elements", "str") in ("str", "path"):
                found.append((role, name, True))
    return found


def _has_choices(role: str, name: str) -> bool:
    return "choices" in _spec_options(role)[name]


def _cases() -> dict[str, dict[str, Any]]:
    defaults = _plain_defaults()
    cases: dict[str, dict[str, Any]] = {}
    for role, name, is_list in string_inputs():
        default = defaults.get(name)
        if is_list:
            first = default[0] if isinstance(default, list) and default else None
            trailing: Any = [_base(name, first) + "\n"]
            embedded: Any = ["a\nb"]
        else:
            trailing = _base(name, default) + "\n"
            embedded = "a\nb"
        if name == "sglang_api_key":
            trailing = KEY + "\n"
        # Inputs of one role are refused together: the checks report every bad input at once (the
        # argument spec lists each option outside its choices, the control-character check each
        # string), so each input's own rejection is in the one message; inputs with choices form their
        # own group (the argument spec stops the role before the later checks).
        kind = "choices" if _has_choices(role, name) else "free"
        for mode, value in (("trailing", trailing), ("embedded", embedded)):
            cases[f"{name}:{mode}"] = {
                "role": role,
                "var": name,
                "value": value,
                "group": f"{role}:{mode}:{kind}",
            }
    # The autotune record whose strings reach the NCCL file's comment (`# why: ...`, nccl_env_tuned).
    record = {
        "choice": "defaults",
        "vars": {},
        "reason": "kept the defaults",
        "recorded_at": "2026-12-01",
        "table": [],
    }
    for field, bad in (
        ("choice", "defaults\n"),
        ("reason", "kept\nExecStartPre=+/bin/sh"),
        ("recorded_at", "2026-12-01\n"),
        ("table", ["| a | b |\n"]),
        ("vars", {"NCCL_ALGO": "Ring\n"}),
    ):
        cases[f"nccl_env_tuned.{field}"] = {
            "role": "nccl_env",
            "var": "nccl_env_tuned",
            "value": {**record, field: bad},
        }
    # strings nested in mappings of preflight's inputs
    cases["sglang_launch_environment.value"] = {
        "role": "preflight",
        "var": "sglang_launch_environment",
        "value": {"HF_HUB_OFFLINE": "1\n"},
    }
    presets = defaults["sglang_presets"]
    bad_presets = {**presets, "production": {**presets["production"], "algorithm": "EAGLE3\n"}}
    cases["sglang_presets.algorithm"] = {"role": "preflight", "var": "sglang_presets", "value": bad_presets}
    cases["sglang_os_lab_allowed.version"] = {
        "role": "preflight",
        "var": "sglang_os_lab_allowed",
        "value": [{"distribution": "Debian", "version": "12\n"}],
    }
    return cases


CASES = _cases()


def _groups() -> dict[str, dict[str, Any]]:
    """group -> {role, vars}: the cases of one group go through preflight together."""
    groups: dict[str, dict[str, Any]] = {}
    for case_id, case in CASES.items():
        group = groups.setdefault(case.get("group", case_id), {"role": case["role"], "vars": {}})
        assert group["role"] == case["role"]
        group["vars"][case["var"]] = case["value"]
    return groups


def _playbook(results: Path, lab_vars: Path) -> list[dict[str, Any]]:
    # the manifest, then the lab inputs (vars_files rank above play vars; later files win)
    vars_files = [str(p) for p in sorted((REPO / "group_vars" / "all").glob("*.yml"))] + [str(lab_vars)]
    tasks: list[dict[str, Any]] = [
        {
            # public: its defaults stay in scope for the cases' own call of preflight's input check
            "name": "Run the whole preflight once (probe, lab mode, launch spec: facts the checks read)",
            "ansible.builtin.include_role": {"name": "sglang.deploy.preflight", "public": True},
        }
    ]
    for case_id, case in _groups().items():
        over = case["vars"]
        steps: list[dict[str, Any]] = []
        if case["role"] == "preflight":
            # preflight's own input: its input checks (the first task of its tasks/main.yml), then its
            # later-roles step
            steps.append(
                {
                    "name": f"{case_id}: preflight's input checks",
                    "sglang.deploy.validate_inputs": {"role": "preflight"},
                    "vars": over,
                }
            )
        else:
            # another role's input: its validate.yml with argument spec, defaults and vars, included as
            # preflight's later-roles step includes it; preflight's own checks do not read it
            steps.append(
                {
                    "name": f"{case_id}: preflight's checks of the later roles",
                    "ansible.builtin.include_role": {
                        "name": f"sglang.deploy.{case['role']}",
                        "tasks_from": "validate",
                        "apply": {"tags": ["always"]},
                    },
                    "vars": over,
                }
            )
        steps.append(
            {
                "name": f"{case_id}: accepted (a hole)",
                "ansible.builtin.set_fact": {
                    "__val_results": "{{ __val_results | combine({"
                    + json.dumps(case_id)
                    + ": 'ACCEPTED'}) }}"
                },
            }
        )
        tasks.append(
            {
                "name": f"Case {case_id}",
                "block": steps,
                "rescue": [
                    {
                        "name": f"{case_id}: record the refusal",
                        "ansible.builtin.set_fact": {
                            "__val_results": (
                                "{{ __val_results | combine({"
                                + json.dumps(case_id)
                                + ": ansible_failed_result.msg | default('') | string}) }}"
                            )
                        },
                    }
                ],
            }
        )
    tasks.append(
        {
            "name": "Write the results",
            "ansible.builtin.copy": {
                "dest": str(results),
                "content": "{{ __val_results | to_json }}",
                "mode": "0600",
            },
        }
    )
    play = {
        "name": "Preflight against every string input with a newline",
        "hosts": "val",
        "gather_facts": False,
        "vars_files": vars_files,
        "vars": {"__val_results": {}},
        "tasks": tasks,
    }
    return [play]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("validation")
    out = tmp / "results.json"
    playbook = tmp / "cases.yml"
    lab_vars = tmp / "lab.yml"
    lab_vars.write_text(yaml.safe_dump({**LAB_INPUTS, "sglang_api_key": KEY}))
    playbook.write_text(yaml.safe_dump(_playbook(out, lab_vars), sort_keys=False, width=1000))
    inventory = tmp / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {
                        "val": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
                    }
                }
            }
        )
    )
    env = local_ansible_env()
    ansible_playbook = Path(sys.executable).with_name("ansible-playbook")
    start = time.monotonic()
    proc = subprocess.run(
        [str(ansible_playbook), "-i", str(inventory), str(playbook)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert KEY not in proc.stdout + proc.stderr, "the API key was printed"
    print(f"{len(CASES)} cases in {len(_groups())} runs of preflight's checks in {took:.0f} s")
    got: dict[str, str] = json.loads(out.read_text())
    return got


def test_every_role_input_is_enumerated() -> None:
    names = {name for _role, name, _list in string_inputs()}
    # the unit inputs of issue 21 and inputs of every role preflight validates
    for name in (
        "sglang_service_syscall_filter",
        "sglang_service_syscall_deny",
        "sglang_service_state_dir",
        "sglang_service_cache_dir",
        "sglang_service_nvidia_modprobe",
        "sglang_api_key",
        "sglang_stack_python",
        "verify_doc_path",
        "autotune_record_dir",
        "nccl_env_file",
        "cuda_toolkit_prefix",
    ):
        assert name in names
    assert len(CASES) >= 2 * len(names)


@pytest.mark.parametrize("case_id", list(CASES))
def test_newline_is_refused_in_preflight_naming_the_variable(results: dict[str, str], case_id: str) -> None:
    case = CASES[case_id]
    var = case["var"]
    msg = results.get(case.get("group", case_id))
    assert msg is not None, f"{case_id}: no result"
    assert msg != "ACCEPTED", f"{case_id}: preflight accepted {var}={case['value']!r}"
    named = re.search(rf"(?<![A-Za-z0-9_]){re.escape(var)}(?![A-Za-z0-9_])", msg)
    assert named, f"{case_id}: the refusal does not name {var}: {msg[:2000]}"
    assert KEY not in msg


def test_the_path_rule_refuses_dotdot_components_in_path_inputs_only() -> None:
    """Issue 32 item 8: the one path rule (text_checks.text_errors, run by every role's validate.yml
    over all its inputs): a `..` component in a path input (named *_path, *_dir, *_file, *_root, ...,
    lists of them too) is refused naming the input; `..` inside a name and other inputs pass."""
    from modload import load_module  # noqa: PLC0415 - pure module, loaded by path

    checks = load_module("text_checks_dotdot", REPO / "plugins/module_utils/text_checks.py")
    bad = {
        "sglang_root": "/opt/../etc",
        "verify_doc_path": "/var/tmp/../../etc/x",
        "sglang_service_state_dir": "..",
        "autotune_record_dir": "/srv/records/..",
        "sglang_stack_extra_dirs": ["/ok", "/a/../b"],
        "sglang_model_path": "../models",
    }
    errors = checks.text_errors(bad)
    assert len(errors) == len(bad), errors
    for name in bad:
        assert any(e.startswith(name) and "without '..' components" in e for e in errors), (name, errors)
    good = {
        "sglang_root": "/opt/sglang..old/x..y",
        "verify_doc_path": "/var/tmp/.hidden/doc.md",
        "verify_prompt": "../ is fine in text that is not a path",
    }
    assert checks.text_errors(good) == []
