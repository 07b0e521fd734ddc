"""Unit tests of the sglang_stack role's filters and of scripts/build-wheelhouse's lock handling."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from modload import REPO  # also puts the collection (.collections) on sys.path: the filters import it


def _load(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


filters = _load("sglang_stack_filters", REPO / "plugins/filter/sglang_stack.py")
wheelhouse = _load("build_wheelhouse", REPO / "scripts/build-wheelhouse")


def _series() -> Any:
    return yaml.safe_load((REPO / "patches/series.yml").read_text())


def test_series_normalises_the_repository_series() -> None:
    plan = filters.sglang_stack_series(_series())
    assert [p["target"] for p in plan].count("flashinfer") >= 1
    for p in plan:
        assert set(p["strip"]) >= {"site_packages"}
        assert len(p["sha256"]) == 64


def test_touched_files_match_the_series_index() -> None:
    for entry in _series()["patches"]:
        text = (REPO / "patches" / entry["file"]).read_text()
        strip = filters.sglang_stack_series([entry])[0]["strip"]["site_packages"]
        assert filters.sglang_stack_touched(text, strip) == entry["files"], entry["file"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"file": "x.patch", "target": "vllm", "sha256": "0" * 64, "strip": {"site_packages": 1}}, "target"),
        ({"file": "x.patch", "target": "sglang", "sha256": "abc", "strip": {"site_packages": 1}}, "sha256"),
        ({"file": "x.patch", "target": "sglang", "sha256": "0" * 64, "strip": {"repo": 1}}, "site_packages"),
    ],
)
def test_series_rejects_bad_entries(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(filters._FilterError, match=message):
        filters.sglang_stack_series([entry])


def test_checksums_from_find_keep_only_the_touched_files() -> None:
    base = "/opt/sglang/releases/x/venv/lib/python3.12/site-packages"
    found = [
        {"path": f"{base}/sglang/a.py", "checksum": "9" * 64},
        {"path": f"{base}/flashinfer/b.py", "checksum": "2" * 64},
        # same basename in another listed directory: find matches it, the filter drops it
        {"path": f"{base}/sglang/b.py", "checksum": "5" * 64},
        {"path": "/elsewhere/sglang/a.py", "checksum": "6" * 64},
    ]
    sums = filters.sglang_stack_checksums(found, base + "/", ["sglang/a.py", "flashinfer/b.py"])
    assert sums == {"flashinfer/b.py": "2" * 64, "sglang/a.py": "9" * 64}


def test_targets() -> None:
    drifted = ["sglang/a.py"]
    plan = [
        {"target": "sglang", "touched": ["sglang/a.py"]},
        {"target": "flashinfer", "touched": ["flashinfer/b.py"]},
    ]
    assert filters.sglang_stack_targets(plan, drifted) == ["sglang"]
    assert filters.sglang_stack_target_dists(["sglang", "flashinfer"]) == ["sglang", "flashinfer-python"]


LOCK = """\
# header
sgl-kernel @ https://example.org/v0.3.21/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl \\
    --hash=sha256:{a}
    # via sglang
torch==2.9.1+cu130 \\
    --hash=sha256:{b} \\
    --hash=sha256:{c}
    # via -r requirements.in
""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_lock_summary() -> None:
    pins = filters.FilterModule().filters()["sglang_stack_lock_summary"](LOCK)
    assert pins["torch"] == "2.9.1+cu130"
    assert pins["sgl-kernel"].endswith(".whl")


def test_wheelhouse_lock_rewrite_keeps_hashes() -> None:
    entries = wheelhouse.split_lock(LOCK)
    assert entries[0][1] == ["a" * 64]
    assert entries[1] == ("torch==2.9.1+cu130", ["b" * 64, "c" * 64])
    name, _url, version = wheelhouse.url_pin_to_version(entries[0][0])
    assert (name, version) == ("sgl-kernel", "0.3.21+cu130")
    text = wheelhouse.render_lock(entries, {entries[0][0]: f"{name}=={version}"})
    assert "sgl-kernel==0.3.21+cu130 \\\n    --hash=sha256:" + "a" * 64 in text
    assert "https://" not in text


def test_url_wheel_plans_the_verified_fetch_of_a_url_requirement_only() -> None:
    url = "https://github.com/sgl-project/whl/releases/download/v0.3.21/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl"
    a, b = "a" * 64, "b" * 64
    plan = filters.sglang_stack_url_wheel(f"sgl-kernel @ {url}", "/opt/sglang/cache/wheels/", [a, b, a])
    assert plan == {
        "url": url,
        "dest": "/opt/sglang/cache/wheels/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl",
        "sha256": [a, b],
    }
    # an index pin is handed to uv as it is; a fragment or a non-wheel URL is not this form
    assert filters.sglang_stack_url_wheel("sgl-kernel==0.3.21", "/w", [a]) == {}
    assert filters.sglang_stack_url_wheel(f"sgl-kernel @ {url}#sha256={a}", "/w", [a]) == {}
    assert filters.sglang_stack_url_wheel("sgl-kernel @ https://example.org/x.tar.gz", "/w", [a]) == {}
    assert filters.sglang_stack_url_wheel(f"torch @ {url}", "/w", [a]) == {}
