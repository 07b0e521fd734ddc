"""The in-tree patches (patches/series.yml) against the real upstream sources.

Light tests: the index is true to the files; every patch applies cleanly, in series order,
with GNU patch at the documented strip level in every layout; a second application is
detected; the patched files compile. Heavy tests (``-m heavy``, a real SGLang install):
the new server argument and the flashinfer SM12x build flags, imported from the PATCHED
tree on a machine without a GPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

# Load the fixtures module as a plugin (fixtures, `heavy` marker) with assertion rewriting.
pytest.register_assert_rewrite("patches_fixtures")
pytest_plugins = ("patches_fixtures",)

from patches_fixtures import (  # noqa: E402
    LAYOUTS,
    PATCHES_DIR,
    SERIES_FILE,
    TARGETS,
    TESTED_LAYOUTS,
    VERSIONS_FILE,
    PristineSources,
    Series,
    apply_series,
    build_tree,
    load_series,
    run_patch,
    run_probe,
    sha256_of,
)

PLUS_FILE = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)


# --- the index --------------------------------------------------------------------------


def test_series_checksums_match_files(series: Series) -> None:
    for patch in series.patches:
        assert patch.path.is_file(), f"{SERIES_FILE.name} lists missing {patch.path.name}"
        assert sha256_of(patch.path) == patch.sha256, f"{patch.path.name}: sha256 in series.yml is stale"


def test_series_is_complete_and_ordered(series: Series) -> None:
    on_disk = sorted(p.name for p in PATCHES_DIR.glob("*.patch"))
    listed = [p.path.name for p in series.patches]
    assert listed == on_disk, "series.yml must list every patch file, in file-name order"
    ids = [p.id for p in series.patches]
    assert ids == [f"{n:04d}" for n in range(1, len(ids) + 1)]
    for patch in series.patches:
        assert patch.path.name.startswith(f"{patch.id}-")
        assert patch.target in TARGETS
        assert set(patch.strip) == set(LAYOUTS), f"{patch.id}: strip needs {LAYOUTS}"
        assert patch.why.strip()


def test_series_targets_the_manifest_versions(series: Series) -> None:
    manifest = yaml.safe_load(VERSIONS_FILE.read_text(encoding="utf-8"))
    assert series.sglang_version == manifest["sglang_version"]
    assert series.flashinfer_version == manifest["sglang_flashinfer_version"]


def test_series_files_are_what_the_patches_touch(series: Series) -> None:
    for patch in series.patches:
        touched = PLUS_FILE.findall(patch.path.read_text(encoding="utf-8"))
        # "+++ b/..." already lost one component; strip the rest of the site-packages level.
        drop = patch.strip["site-packages"] - 1
        in_site_packages = sorted({"/".join(t.split("/")[drop:]) for t in touched})
        assert in_site_packages == sorted(patch.files), patch.path.name


def test_every_patch_says_why_before_the_diff(series: Series) -> None:
    for patch in series.patches:
        header = patch.path.read_text(encoding="utf-8").split("\ndiff --git ", 1)[0]
        assert "Why:" in header, f"{patch.path.name}: header must explain why"
        assert f"[PATCH {patch.id}]" in header


# --- application against the real sources -----------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_series_applies_cleanly_in_order(
    layout: str, series: Series, pristine_sources: PristineSources, tmp_path: Path
) -> None:
    cwds = build_tree(pristine_sources, layout, tmp_path)
    assert set(cwds) == {t for t, layouts in TESTED_LAYOUTS.items() if layout in layouts}
    runs = apply_series(series, layout, cwds)
    assert runs, f"no patch applies to the {layout} layout"
    assert not list(tmp_path.rglob("*.rej"))
    assert not list(tmp_path.rglob("*.orig"))

    applied = [p for p in series.patches if p.target in cwds]
    for patch in applied:
        cwd, strip = cwds[patch.target], patch.strip[layout]
        # Already applied: the reverse applies cleanly, the forward refuses.
        reverse = run_patch(patch, cwd, strip, "--reverse", "--dry-run")
        assert reverse.returncode == 0, f"{patch.path.name} -R --dry-run:\n{reverse.output}"
        again = run_patch(patch, cwd, strip, "--dry-run")
        assert again.returncode != 0, f"{patch.path.name} applied twice in {layout}"
        assert "previously applied" in again.output

    changed = sorted(
        {
            cwds[p.target] / ("python/" if layout == "repo" and p.target == "sglang" else "") / f
            for p in applied
            for f in p.files
        }
    )
    compiled = subprocess.run(
        [sys.executable, "-m", "py_compile", *map(str, changed)], capture_output=True, text=True, check=False
    )
    assert compiled.returncode == 0, compiled.stderr


def test_pristine_sources_are_not_reported_as_patched(
    series: Series, pristine_sources: PristineSources, tmp_path: Path
) -> None:
    cwds = build_tree(pristine_sources, "site-packages", tmp_path)
    for patch in series.patches:
        reverse = run_patch(patch, cwds[patch.target], patch.strip["site-packages"], "--reverse", "--dry-run")
        assert reverse.returncode != 0, f"{patch.path.name} looks applied on pristine sources"


def test_layouts_yield_identical_sources(
    series: Series, pristine_sources: PristineSources, tmp_path: Path
) -> None:
    results: dict[str, dict[str, bytes]] = {}
    for layout in LAYOUTS:
        cwds = build_tree(pristine_sources, layout, tmp_path / layout)
        apply_series(series, layout, {"sglang": cwds["sglang"]})
        base = cwds["sglang"] / ("python" if layout == "repo" else "")
        results[layout] = {f: (base / f).read_bytes() for p in series.for_target("sglang") for f in p.files}
    assert results["repo"] == results["sdist"] == results["site-packages"]


def test_load_series_matches_raw_yaml() -> None:
    raw = yaml.safe_load(SERIES_FILE.read_text(encoding="utf-8"))
    assert [str(p["file"]) for p in raw["patches"]] == [p.path.name for p in load_series().patches]


# --- behaviour of the patched code, real install ----------------------------------------
# Every test that requests `sglang_venv_python` is marked `heavy` by patches_fixtures
# (deselect with -m "not heavy").

_PROBE = textwrap.dedent(
    """
    import argparse, json, sys
    from sglang.srt.server_args import ServerArgs

    out = {}

    def parse(*argv):
        parser = argparse.ArgumentParser(prog="probe")
        ServerArgs.add_cli_args(parser)
        try:
            ns = parser.parse_args(["--model-path", "dummy", *argv])
        except SystemExit as exc:
            return {"exit": exc.code}
        return {"value": getattr(ns, "speculative_disable_batch_threshold", "MISSING"), "ns": ns}

    def build(ns):
        try:
            ServerArgs.from_cli_args(ns)
        except ValueError as exc:
            return "ValueError: " + str(exc)
        return "ok"

    flag = "--speculative-disable-batch-threshold"
    for name, argv in {"eight": [flag, "8"], "negative": [flag, "-1"], "default": [],
                       "dp": [flag, "4", "--enable-dp-attention"]}.items():
        res = parse(*argv)
        ns = res.pop("ns", None)
        if ns is not None:
            res["build"] = build(ns)
        out[name] = res
    if sys.argv[1] == "patched":
        try:
            ServerArgs(model_path="dummy", speculative_disable_batch_threshold=-3)
            out["direct_negative"] = "ok"
        except ValueError as exc:
            out["direct_negative"] = "ValueError: " + str(exc)
        from sglang.srt.distributed.device_communicators import all_reduce_utils, torch_symm_mem
        out["symm_mem_sizes_12"] = all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.get(12)
        out["multimem_12"] = torch_symm_mem.TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM.get(12)
        from sglang.srt.layers import communicator
        out["communicator_sm120_gate"] = hasattr(communicator, "_is_sm120_supported")
    try:
        from flashinfer.jit import comm
        spec = comm.gen_trtllm_comm_module()
        out["flashinfer_sm12x"] = [f for f in spec.extra_cuda_cflags if f.startswith("-gencode")]
    except RuntimeError as exc:
        out["flashinfer_sm12x"] = "RuntimeError: " + str(exc)
    print("PROBE " + json.dumps(out))
    """
)


def _probe(python: Path, tree: Path, mode: str) -> dict[str, object]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),  # ahead of the venv's site-packages: the tree under test wins
        "FLASHINFER_CUDA_ARCH_LIST": "12.0a",  # no GPU here: tell flashinfer the target arch
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = run_probe(python, ["-c", _PROBE, mode], env)
    return result


def test_patched_tree_behaviour(sglang_venv_python: Path, patched_site_packages: Path) -> None:
    got = _probe(sglang_venv_python, patched_site_packages, "patched")
    assert got["eight"] == {"value": 8, "build": "ok"}
    assert got["default"] == {"value": 0, "build": "ok"}
    assert got["negative"] == {"exit": 2}
    assert got["dp"] == {
        "value": 4,
        "build": "ValueError: speculative_disable_batch_threshold > 0 is not supported with "
        "enable_dp_attention",
    }
    assert isinstance(got["direct_negative"], str)
    assert got["direct_negative"].startswith("ValueError: speculative_disable_batch_threshold must be >= 0")
    assert got["symm_mem_sizes_12"] == {"2": 64 << 20, "4": 64 << 20, "6": 128 << 20, "8": 128 << 20}
    assert got["multimem_12"] == []
    assert got["communicator_sm120_gate"] is True
    assert got["flashinfer_sm12x"] == ["-gencode=arch=compute_120a,code=sm_120a"]


def test_unpatched_tree_lacks_the_changes(
    sglang_venv_python: Path, pristine_sources: PristineSources, tmp_path: Path
) -> None:
    tree = build_tree(pristine_sources, "site-packages", tmp_path)["sglang"]
    got = _probe(sglang_venv_python, tree, "pristine")
    assert got["eight"] == {"exit": 2}, "unpatched 0.5.9 must reject the unknown flag"
    assert got["negative"] == {"exit": 2}
    assert got["default"] == {"value": "MISSING", "build": "ok"}
    assert got["flashinfer_sm12x"] == (
        "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."
    )
