"""One decider per decision: each decision the deployment takes in several places (the NCCL profile,
the nvidia-smi topology, the bool/int reading of inputs, the lists of allowed names) has ONE
implementation that every place calls. These tests hold the callers to the same answers."""

from __future__ import annotations

import importlib
import itertools
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from modload import REPO, iter_tasks, load_module
from test_launch_spec import cfg as launch_cfg

launch_spec = load_module("launch_spec_deciders", REPO / "plugins/module_utils/launch_spec.py")
nccl_filters = load_module("nccl_env_deciders", REPO / "plugins/filter/nccl_env.py")
PREFLIGHT_TASKS = REPO / "roles/preflight/tasks/main.yml"
# Imported at collection time, as the role plugins import them (FQCN): a test that ran before may have
# installed Ansible's collection finder, which refuses these imports later.
_FQCN = "ansible_collections.sglang.deploy.plugins."
uv_lock = importlib.import_module(_FQCN + "module_utils.uv_lock")
audit = importlib.import_module(_FQCN + "modules.sglang_stack_audit")
stack = importlib.import_module(_FQCN + "filter.sglang_stack")
facts = importlib.import_module(_FQCN + "module_utils.gpu_facts")
env = importlib.import_module(_FQCN + "filter.nccl_env")
convert = importlib.import_module(_FQCN + "module_utils.convert")
spec = importlib.import_module(_FQCN + "module_utils.launch_spec")
service = importlib.import_module(_FQCN + "filter.sglang_service")
managed = importlib.import_module(_FQCN + "module_utils.managed_state")
deploy_state = importlib.import_module(_FQCN + "modules.deploy_state")


def _launch_cfg(**over: Any) -> dict[str, Any]:
    """The preflight role's launch inputs with the shipped defaults (test_launch_spec.cfg)."""
    return dict(launch_cfg(**{"nccl_interconnect": "", **over}))


PROFILES = ["auto", "pcie", "nvlink", "none"]
CLASSES = ["", "nvlink", "pcie", "none"]


@pytest.mark.parametrize(
    ("profile", "override", "detected"), list(itertools.product(PROFILES, CLASSES, CLASSES[1:]))
)
def test_launch_spec_and_nccl_env_resolve_the_same_profile(
    profile: str, override: str, detected: str
) -> None:
    """The launch spec (what preflight exports) names the profile the nccl_env role renders, also when
    the inventory sets nccl_env_interconnect (it was ignored by the launch spec and preflight's export)."""
    res = launch_spec.resolve(
        _launch_cfg(nccl_profile=profile, interconnect=detected, nccl_interconnect=override)
    )
    assert res["errors"] == []
    built = nccl_filters.nccl_env_build(
        profile,
        {"pcie": {}, "nvlink": {}, "none": {}},
        interconnect=override,
        preflight_interconnect=detected,
    )
    assert res["spec"]["nccl"]["resolved"] == built["profile"], (profile, override, detected)
    assert res["spec"]["nccl"]["interconnect"] == built["interconnect"]


def test_nccl_env_interconnect_overrides_the_detected_class_in_the_launch_spec() -> None:
    res = launch_spec.resolve(_launch_cfg(interconnect="nvlink", nccl_interconnect="pcie"))
    assert res["spec"]["nccl"]["resolved"] == "pcie"


def test_bad_nccl_env_interconnect_is_named() -> None:
    res = launch_spec.resolve(_launch_cfg(interconnect="nvlink", nccl_interconnect="infiniband"))
    assert any("nccl_env_interconnect='infiniband'" in e for e in res["errors"]), res["errors"]


def test_preflight_export_takes_the_profile_from_the_one_decider() -> None:
    """preflight_nccl_profile_resolved is computed by the collection's decider filter, handed the
    inventory's nccl_env_interconnect, not by a Jinja expression of its own."""
    tasks = list(iter_tasks(yaml.safe_load(PREFLIGHT_TASKS.read_text())))
    facts = next(t for t in tasks if t.get("name") == "Export the preflight facts")[
        "ansible.builtin.set_fact"
    ]
    expr = facts["preflight_nccl_profile_resolved"]
    assert "sglang.deploy.nccl_profile" in expr, expr
    assert "nccl_env_interconnect" in expr, expr


def test_verify_and_autotune_take_tp_per_node_from_the_launch_spec() -> None:
    """The GPUs of this host's tp group: the launch spec divides (tp_per_node); verify's NCCL layer and
    autotune's NCCL measurement default to it instead of dividing sglang_tp_size themselves."""
    for role in ("verify", "autotune"):
        for var in (f"{role}_tp_size",):
            for part in ("defaults/main.yml", "meta/argument_specs.yml", "tasks"):
                path = REPO / "roles" / role / part
                texts = [p.read_text() for p in path.rglob("*.yml")] if path.is_dir() else [path.read_text()]
                assert not any(var in text for text in texts), (role, part)
        tasks = "".join(p.read_text() for p in (REPO / "roles" / role / "tasks").rglob("*.yml"))
        assert "preflight_launch_spec.tp_per_node | int" in tasks, role
    assert launch_spec.resolve(_launch_cfg(tp_size=4))["spec"]["tp_per_node"] == 4


def test_one_lock_parser_for_the_audit_and_the_receipt() -> None:
    """The host's audit (module sglang_stack_audit) and the receipt's pins (filter
    sglang_stack_lock_summary) read requirements.lock with module_utils/uv_lock.py."""
    assert audit.parse_lock is uv_lock.parse_lock
    assert stack.FilterModule().filters()["sglang_stack_lock_summary"] is uv_lock.pins
    lock = (
        "# via uv\nSGL_Kernel @ https://example.invalid/sgl_kernel-0.3.21.whl \\\n"
        + "    --hash=sha256:" + "a" * 64
        + "\ntorch==2.9.1+cu130 ; sys_platform == 'linux' \\\n    --hash=sha256:" + "b" * 64
        + "\n    # via sglang\n--index-url https://example.invalid/simple\n"
    )  # fmt: skip
    assert uv_lock.pins(lock) == {
        "sgl-kernel": "https://example.invalid/sgl_kernel-0.3.21.whl",
        "torch": "2.9.1+cu130",
    }
    assert all(p["hashed"] for p in uv_lock.parse_lock(lock).values())


def test_one_topology_parser() -> None:
    """nccl_env's standalone detection reads `nvidia-smi topo -m` with preflight's parser."""
    assert env.FilterModule().filters()["nccl_env_interconnect_from_topo"] is facts.interconnect_from_topo
    sample = (REPO / "tests/data/nvidia-smi/rtxpro6000x8-pcie.topo-m.txt").read_text()
    assert facts.interconnect_from_topo(sample) == facts.parse_topology(sample)["interconnect"] == "pcie"


def test_one_reading_of_bools_and_ints() -> None:
    """The launch spec and the service filters read bool/int inputs with module_utils/convert.py."""
    assert spec._bool is convert.as_bool
    assert spec._int is service._int is convert.as_int
    assert [convert.as_bool(v) for v in (True, "yes", "Off", 1, 0, 2, "maybe", None)] == [
        True, True, False, True, False, None, None, None,
    ]  # fmt: skip
    assert [convert.as_int(v) for v in (3, " 7 ", "-2", True, "1.5", "\u0661", None)] == [
        3,
        7,
        -2,
        None,
        None,
        None,
        None,
    ]


def test_one_atomic_link_switch(tmp_path: Path) -> None:
    """One link switch: module_utils/managed_state.switch_link (a temporary link + rename(2)), for
    managed_state's links (the stack's and the router's `current` are items of their roles' host state)
    and deploy_state's restore alike; no task moves a link by hand (mv -T, ln -sfn) or with
    ansible.builtin.file state=link."""
    assert deploy_state.switch_link is managed.switch_link
    makes_links = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("plugins/**/*.py")
                         if "os.symlink(" in p.read_text())  # fmt: skip
    assert makes_links == ["plugins/module_utils/managed_state.py"]
    for path in REPO.glob("roles/*/tasks/*.yml"):
        for line in path.read_text().splitlines():
            assert "ln -s" not in line, (path, line)
            assert "[ln," not in line, (path, line)
            assert not (re.search(r"\bmv\b", line) and "current" in line), (path, line)
            assert not re.search(r"\bstate: link\b", line), (path, line)
    for role, var, link in [
        ("sglang_stack", "__sglang_stack_state_run", "sglang_stack_current_link"),
        ("sglang_router", "__sglang_router_state_run", "__sglang_router_current"),
    ]:
        described = yaml.safe_load((REPO / f"roles/{role}/vars/main.yml").read_text())[var]["links"]
        assert "'path': " + link in described, (role, described)
    (tmp_path / "releases/r1").mkdir(parents=True)
    (tmp_path / "releases/r2").mkdir()
    (tmp_path / "current").symlink_to("releases/r1")
    managed.switch_link(str(tmp_path / "current"), "releases/r2")
    assert os.readlink(tmp_path / "current") == "releases/r2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "releases"]  # no temporary link left
