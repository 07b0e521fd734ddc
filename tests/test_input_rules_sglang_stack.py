"""The sglang_stack role's input rules (plugins/plugin_utils/input_rules/sglang_stack.py), pure: called
with plain dicts as the action sglang.deploy.validate_inputs templates them (issue 33 item 4)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from modload import REPO
from test_input_rules import _defaults, _spec_values

stack = importlib.import_module(
    "ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules.sglang_stack"
)
GIT = "a" * 40


def _stack(**over: Any) -> dict[str, Any]:
    d = _defaults("sglang_stack")
    v = _spec_values("sglang_stack", d)
    v.update(
        sglang_stack_root="/opt/sglang",
        sglang_stack_locks_dir="/opt/sglang/locks",
        sglang_stack_python="python3.12",
        sglang_stack_patch_series=str(REPO / "patches" / "series.yml"),
        sglang_stack_git_version=GIT,
        sglang_stack_sgl_kernel_requirement="sgl-kernel==0.3.21",
        sglang_stack_sgl_kernel_sha256=[],
        sglang_stack_uv_sha256=["b" * 64],
        sglang_stack_extra_index_urls=["https://example.invalid/whl/cu130"],
        sglang_stack_overrides=["torch==2.9.1"],
        sglang_stack_check_argv=["--model-path", "/opt/models/x"],
    )
    v.update(over)
    return v


def test_sglang_stack_defaults_pass(tmp_path: Path) -> None:
    assert stack.errors(_stack()) == []
    lock = tmp_path / "requirements.lock"
    lock.write_text("torch==2.9.1 \\\n    --hash=sha256:" + "c" * 64 + "\n")
    url = "sgl-kernel @ https://example.invalid/sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    assert stack.errors(_stack(sglang_stack_lock=str(lock))) == []
    assert (
        stack.errors(
            _stack(sglang_stack_sgl_kernel_requirement=url, sglang_stack_sgl_kernel_sha256_extra=["d" * 64])
        )
        == []
    )
    # no patches applied: the series need not exist
    assert (
        stack.errors(_stack(sglang_stack_apply_patches=False, sglang_stack_patch_series="/none/series.yml"))
        == []
    )
    # a source other than git needs no commit id
    assert stack.errors(_stack(sglang_stack_source="wheel", sglang_stack_git_version="v0.5.9")) == []


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        (
            {"sglang_stack_source": "pip"},
            "Invalid sglang_stack input: sglang_stack_source=pip (allowed ['git'",
        ),
        ({"sglang_stack_keep_releases": 0}, "sglang_stack_keep_releases=0 (integer >= 1)"),
        ({"sglang_stack_python": "python 3"}, 'sglang_stack_python="python 3" (an interpreter name'),
        ({"sglang_stack_root": "opt/sglang"}, 'sglang_stack_root="opt/sglang" (absolute'),
        ({"sglang_stack_overrides": "torch==2.9"}, "sglang_stack_check_argv (lists)"),
        ({"sglang_stack_wheelhouse": "wheels"}, 'sglang_stack_wheelhouse="wheels" and'),
        ({"sglang_stack_lock": "req.lock"}, "sglang_stack_lock=\"req.lock\" ('' or absolute)"),
        (
            {"sglang_stack_patch_series": "/none/series.yml"},
            "sglang_stack_patch_series=/none/series.yml does not exist",
        ),
        (
            {"sglang_stack_git_version": "bbe9c7eeb"},
            'sglang_stack_git_version="bbe9c7eeb": allowed the full 40-hex',
        ),
        (
            {"sglang_stack_sgl_kernel_sha256": ["ABC"]},
            'sglang_stack_sgl_kernel_sha256=["ABC"]: allowed a list',
        ),
        (
            {"sglang_stack_sgl_kernel_sha256_extra": "d" * 64},
            "bad sglang_stack input: sglang_stack_sgl_kernel_sha256_extra=",
        ),
        (
            {"sglang_stack_sgl_kernel_requirement": "sgl-kernel @ https://example.invalid/sgl_kernel.whl"},
            'sglang_stack_sgl_kernel_requirement="sgl-kernel @ https://example.invalid/sgl_kernel.whl"',
        ),
        (
            {
                "sglang_stack_sgl_kernel_requirement": "sgl-kernel @ https://example.invalid/k.whl#sha256="
                + "a" * 64,
                "sglang_stack_sgl_kernel_sha256": ["a" * 64],
            },
            "without a #sha256= fragment",
        ),
        (
            {"sglang_stack_sgl_kernel_requirement": "sgl-kernel==0.3.21\n"},
            "sglang_stack_sgl_kernel_requirement=",
        ),
        ({"sglang_stack_uv_sha256": []}, "sglang_stack_uv_sha256=[]: allowed a non-empty list"),
        ({"sglang_stack_uv_sha256": ["abc"]}, 'sglang_stack_uv_sha256=["abc"]'),
        (
            {"sglang_stack_extra_requirements": ["x @ https://example.invalid/x.whl"]},
            "a URL requirement must end in #sha256=<64 hex>",
        ),
        ({"sglang_stack_locks_dir": "/opt/sglang/lock s"}, 'sglang_stack_locks_dir="/opt/sglang/lock s"'),
        (
            {"sglang_stack_lock": "/none/requirements.lock"},
            'bad sglang_stack input: sglang_stack_lock="/none/',
        ),
    ],
)
def test_sglang_stack_bad_inputs_are_named(over: dict[str, Any], expected: str) -> None:
    errors = stack.errors(_stack(**over))
    assert any(expected in e for e in errors), errors


def test_a_lock_without_hashes_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("torch==2.9.1\n")
    errors = stack.errors(_stack(sglang_stack_lock=str(lock)))
    assert errors == [
        f"bad sglang_stack input: sglang_stack_lock=\"{lock}\": allowed '' or a lock file on the controller "
        "with --hash=sha256: lines (uv pip compile --generate-hashes)"
    ]


def test_sglang_stack_reports_every_error_at_once() -> None:
    errors = stack.errors(
        _stack(sglang_stack_git_version="v1", sglang_stack_uv_sha256=[], sglang_stack_keep_releases=0)
    )
    assert len(errors) == 3, errors
