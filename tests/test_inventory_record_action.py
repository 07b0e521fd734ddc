"""The collection's one writer of host_vars records (action sglang.deploy.inventory_record): the data as
!unsafe YAML that Ansible reads back as text, the controller's plain lines after it, an atomic write with
its directory and mode, changed only when the text or mode differs, nothing written in check mode, and
control characters refused. Its runs in a play are verify's (baseline, calibration) and autotune's
(molecule autotune, the e2e verify lab)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml
from modload import REPO, load_module

action = load_module("inventory_record_action", REPO / "plugins" / "action" / "inventory_record.py")

EVIL = "{{ lookup('pipe', 'id') }}"


class UnsafeLoader(yaml.SafeLoader):
    """A safe loader that reads Ansible's !unsafe tag as the plain string (Ansible never templates it)."""


def _unsafe(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)
    return str(loader.construct_scalar(node))


UnsafeLoader.add_constructor("!unsafe", _unsafe)


def test_the_record_is_unsafe_yaml_then_the_plain_lines() -> None:
    data = {"nccl_env_tuned": {"hardware": f"2x H200 {EVIL}"}}
    text = action.record_text(
        "nccl_env_tuned", data["nccl_env_tuned"], "Recorded by a test", "sglang_nccl_profile: tuned"
    )
    assert text.startswith("---\n# Recorded by a test\n")
    assert text.endswith("\nsglang_nccl_profile: tuned\n")
    assert "!unsafe '2x H200 {{ lookup(''pipe'', ''id'') }}'" in text
    loaded = yaml.load(text, Loader=UnsafeLoader)
    assert loaded == {**data, "sglang_nccl_profile": "tuned"}


def test_write_creates_the_directory_sets_the_mode_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "host_vars" / "gpu01" / "sglang_baseline.yml"
    text = action.record_text("verify_baseline_records", {"abc": {"levels": {"1": 86.8}}})
    first = action.write_record(str(path), text, 0o600, check=False)
    assert first["changed"]
    assert first["before"] == ""
    assert path.read_text() == text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    assert not action.write_record(str(path), text, 0o600, check=False)["changed"]
    assert action.write_record(str(path), text, 0o644, check=False)["changed"]  # the mode differs
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["sglang_baseline.yml"]  # no temporary file left


def test_check_mode_writes_nothing_and_says_a_real_run_would(tmp_path: Path) -> None:
    path = tmp_path / "host_vars" / "gpu01" / "preset.yml"
    result = action.write_record(str(path), "a: 1\n", 0o644, check=True)
    assert result["changed"]
    assert not path.parent.exists()


def test_control_characters_and_a_name_that_is_no_variable_are_refused() -> None:
    with pytest.raises(ValueError, match="control"):
        action.record_text("autotune_preset_result", {"reason": "ok\x1b[31m"})
    for bad in ("Verify", "a b", "x{{ 1 }}", "", "rec\n"):
        with pytest.raises(ValueError, match="is not a variable name"):
            action.record_text(bad, {})
