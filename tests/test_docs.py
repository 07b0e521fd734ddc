"""The collection documents itself: every module, filter and test plugin has DOCUMENTATION, EXAMPLES and
RETURN as ansible-doc reads them (through the checkout's .collections link, as ansible.cfg finds the
collection); the roles' README variable tables and the argument specs' choices are what scripts/gen-docs
generates from the one place each is defined."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import REPO, load_module, local_ansible_env

choices = load_module("choices_docs", REPO / "plugins/module_utils/choices.py")
GEN_DOCS = REPO / "scripts/gen-docs"
ANSIBLE_DOC = REPO / ".venv/bin/ansible-doc"
ROLES = sorted(p.parent.parent.name for p in REPO.glob("roles/*/meta/argument_specs.yml"))


def _ansible_doc(*args: str) -> str:
    proc = subprocess.run(
        [str(ANSIBLE_DOC), *args],
        capture_output=True,
        text=True,
        env=local_ansible_env(),
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@cache
def _listed(kind: str) -> dict[str, str]:
    """name -> short description, as `ansible-doc -t KIND --list sglang.deploy --json` shows them."""
    out: dict[str, str] = json.loads(_ansible_doc("-t", kind, "--list", "sglang.deploy", "--json"))
    return out


@cache
def _docs(kind: str) -> dict[str, Any]:
    """Every plugin of a kind with its doc, examples and return, in one ansible-doc call."""
    names = sorted(_listed(kind))
    out: dict[str, Any] = json.loads(_ansible_doc("-t", kind, "--json", *names))
    return out


def _plugin_files(kind: str) -> set[str]:
    """The names the collection's files define: module files, the names of each filter/test FilterModule."""
    if kind == "module":
        return {f"sglang.deploy.{p.stem}" for p in (REPO / "plugins/modules").glob("*.py")}
    names: set[str] = set()
    for path in (REPO / "plugins" / kind).glob("*.py"):
        module = load_module(f"docs_{kind}_{path.stem}", path)
        entry = getattr(module, "FilterModule" if kind == "filter" else "TestModule", None)
        if entry is not None:
            plugins = entry().filters() if kind == "filter" else entry().tests()
            names |= {f"sglang.deploy.{n}" for n in plugins}
    return names


# Loaded at collection time: a test that ran before may have installed Ansible's collection finder,
# which then refuses the FQCN imports of the filter files.
PLUGIN_FILES = {kind: _plugin_files(kind) for kind in ("filter", "test", "module")}


@pytest.mark.parametrize("kind", ["filter", "test", "module"])
def test_every_plugin_is_listed_with_a_description(kind: str) -> None:
    listed = _listed(kind)
    assert set(listed) == PLUGIN_FILES[kind]
    undocumented = sorted(n for n, short in listed.items() if not short or short == "UNDOCUMENTED")
    assert undocumented == [], f"ansible-doc -t {kind} shows UNDOCUMENTED for {undocumented}"


@pytest.mark.parametrize("kind", ["filter", "test", "module"])
def test_every_plugin_has_description_examples_and_return(kind: str) -> None:
    missing: list[str] = []
    for name, data in _docs(kind).items():
        doc = data.get("doc") or {}
        if not doc.get("description") or not doc.get("short_description"):
            missing.append(f"{name}: description")
        if not (data.get("examples") or "").strip():
            missing.append(f"{name}: EXAMPLES")
        if not data.get("return"):
            missing.append(f"{name}: RETURN")
        own = doc.get("module") or doc.get("name")  # modules say `module:`, plugins `name:`
        if f"sglang.deploy.{own}" != name:
            missing.append(f"{name}: DOCUMENTATION names it {own!r}")
    assert missing == []


def test_probe_modules_document_their_keys() -> None:
    """No module takes a free-form dict: an option of type dict names its keys (suboptions)."""
    free: list[str] = []
    for name, data in _docs("module").items():
        for opt, spec in (data["doc"].get("options") or {}).items():
            if spec.get("type") == "dict" and not spec.get("suboptions"):
                free.append(f"{name} {opt}")
    assert free == []


def test_argspec_choices_are_the_python_lists() -> None:
    """The choices of the argument specs are the lists of plugins/module_utils/choices.py, which the
    launch spec and the nccl_env filters use."""
    for (role, option), names in choices.ARGSPEC_CHOICES.items():
        specs = yaml.safe_load((REPO / "roles" / role / "meta/argument_specs.yml").read_text())
        for entry, spec in specs["argument_specs"].items():
            opt = (spec.get("options") or {}).get(option)
            if opt is not None:
                assert opt.get("choices") == list(names), (role, entry, option)


def test_python_reads_the_one_list() -> None:
    launch = load_module("launch_spec_docs", REPO / "plugins/module_utils/launch_spec.py")
    assert launch.ATTENTION_BACKENDS == choices.ATTENTION_BACKENDS
    assert launch.NCCL_PROFILES == choices.NCCL_PROFILES
    shipped = yaml.safe_load((REPO / "group_vars/all/sglang.yml").read_text())
    assert shipped["sglang_nccl_profiles_allowed"] == list(choices.NCCL_PROFILES)
    assert set(shipped["sglang_presets"]) == set(choices.PRESETS)
    assert shipped["sglang_attention_backend"] in choices.ATTENTION_BACKENDS


def test_gen_docs_check_passes_on_the_checkout() -> None:
    proc = subprocess.run([str(GEN_DOCS), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("role", ROLES)
def test_every_role_readme_has_the_generated_table(role: str) -> None:
    text = (REPO / "roles" / role / "README.md").read_text()
    assert text.count("<!-- BEGIN argument_specs") == 1, role
    assert text.count("<!-- END argument_specs -->") == 1, role


def _copy_tree(tmp: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(
        REPO / "roles", repo / "roles", ignore=shutil.ignore_patterns("molecule", "files", "templates")
    )
    shutil.copytree(REPO / "plugins/module_utils", repo / "plugins/module_utils")
    return repo


def test_gen_docs_check_names_the_role_that_differs_and_a_run_repairs_it(tmp_path: Path) -> None:
    repo = _copy_tree(tmp_path)
    spec = repo / "roles/nccl_env/meta/argument_specs.yml"
    spec.write_text(spec.read_text().replace('choices: ["", nvlink, pcie, none]', "choices: [nvlink, pcie]"))
    readme = repo / "roles/verify/README.md"
    readme.write_text(readme.read_text().replace("| `verify_benchmark` |", "| `verify_benchmark_typo` |"))
    check = [str(GEN_DOCS), "--repo", str(repo), "--check"]
    proc = subprocess.run(check, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "nccl_env (roles/nccl_env/meta/argument_specs.yml)" in proc.stderr
    assert "verify (roles/verify/README.md)" in proc.stderr
    assert "preflight" not in proc.stderr
    subprocess.run([str(GEN_DOCS), "--repo", str(repo)], check=True, capture_output=True)
    assert subprocess.run(check, capture_output=True, check=False).returncode == 0  # idempotent
    assert (repo / "roles/verify/README.md").read_text() == (REPO / "roles/verify/README.md").read_text()
    assert spec.read_text() == (REPO / "roles/nccl_env/meta/argument_specs.yml").read_text()


@pytest.mark.parametrize("role", ROLES)
def test_argument_spec_defaults_are_the_roles_defaults(role: str) -> None:
    """A default written in both places says the same (defaults/main.yml is what runs; the argument spec
    is what ansible-doc and the README table show). Templated defaults are the role's to compute."""
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    path = REPO / "roles" / role / "defaults" / "main.yml"
    defaults = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    differ = [
        f"{entry}.{name}: argument spec {opt['default']!r}, defaults/main.yml {defaults[name]!r}"
        for entry, body in spec["argument_specs"].items()
        for name, opt in (body.get("options") or {}).items()
        if "default" in opt
        and name in defaults
        and not (isinstance(defaults[name], str) and "{{" in defaults[name])
        and opt["default"] != defaults[name]
    ]
    assert differ == []
