"""Fixtures and helpers for tests/test_patches.py (the in-tree patches under patches/).

Kept out of tests/conftest.py on purpose: test_patches.py loads this module as a pytest
plugin (``pytest_plugins``), so its fixtures, the ``heavy`` marker and the hook that puts
that marker on every test requesting the real SGLang venv exist only there.

Upstream sources come from the package index the machine's own pip is configured for
(``pip download``, never a hard-coded host) and are cached under ``.cache/patch-sources/``;
the throw-away SGLang venv for the heavy tests lives under ``.cache/patch-venv/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
PATCHES_DIR = REPO_ROOT / "patches"
SERIES_FILE = PATCHES_DIR / "series.yml"
VERSIONS_FILE = REPO_ROOT / "group_vars" / "all" / "versions.yml"
SOURCES_CACHE = REPO_ROOT / ".cache" / "patch-sources"
VENV_CACHE = REPO_ROOT / ".cache" / "patch-venv"

LAYOUTS = ("repo", "sdist", "site-packages")
TARGETS = ("sglang", "flashinfer")
# Layouts each target is exercised in. flashinfer is patched where the installer patches
# it: the installed package (an unzipped wheel has the same layout as site-packages).
TESTED_LAYOUTS: Mapping[str, tuple[str, ...]] = {
    "sglang": LAYOUTS,
    "flashinfer": ("site-packages",),
}

HEAVY_MARKER = "heavy: needs a real SGLang install (~11 GB venv under .cache/patch-venv, ~1 min cold)"

# Pins of the heavy venv besides sglang/flashinfer themselves (FIELD_NOTES section 3).
TORCH_VERSION = "2.9.1"
SGL_KERNEL_VERSION = "0.3.21"


@dataclasses.dataclass(frozen=True)
class Patch:
    id: str
    path: Path
    target: str
    strip: Mapping[str, int]
    sha256: str
    files: tuple[str, ...]
    why: str


@dataclasses.dataclass(frozen=True)
class Series:
    sglang_version: str
    flashinfer_version: str
    patches: tuple[Patch, ...]

    def for_target(self, target: str) -> tuple[Patch, ...]:
        return tuple(p for p in self.patches if p.target == target)


def load_series() -> Series:
    data = yaml.safe_load(SERIES_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{SERIES_FILE}: not a mapping"
    applies_to = data["applies_to"]
    patches = tuple(
        Patch(
            id=str(entry["id"]),
            path=PATCHES_DIR / str(entry["file"]),
            target=str(entry["target"]),
            strip={str(k): int(v) for k, v in entry["strip"].items()},
            sha256=str(entry["sha256"]),
            files=tuple(str(f) for f in entry["files"]),
            why=str(entry["why"]),
        )
        for entry in data["patches"]
    )
    return Series(
        sglang_version=str(applies_to["sglang"]),
        flashinfer_version=str(applies_to["flashinfer"]),
        patches=patches,
    )


def run_probe(python: Path, argv: list[str], env: Mapping[str, str]) -> dict[str, object]:
    """Run ``python argv...`` (a probe script in the release venv) and return the JSON document it
    prints on its ``PROBE `` line; fails with the probe's output when it exits non-zero."""
    proc = subprocess.run(
        [str(python), *argv], capture_output=True, text=True, env=dict(env), timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE "))
    result = json.loads(line.removeprefix("PROBE "))
    assert isinstance(result, dict)
    return result


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclasses.dataclass(frozen=True)
class PristineSources:
    sglang_sdist: Path  # the unpacked sdist's top directory (sglang-X.Y.Z/, holds sglang/)
    flashinfer_wheel: Path  # the unzipped wheel (holds flashinfer/), i.e. site-packages layout


@dataclasses.dataclass(frozen=True)
class PatchRun:
    args: tuple[str, ...]
    returncode: int
    output: str


def run_patch(patch: Patch, cwd: Path, strip: int, *extra: str) -> PatchRun:
    """GNU patch with the series' rules: no fuzz, --forward, never interactive."""
    args = ("patch", f"-p{strip}", "--forward", "--fuzz=0", "--batch", "-i", str(patch.path), *extra)
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    return PatchRun(args=args, returncode=proc.returncode, output=proc.stdout + proc.stderr)


def _pip_download(dest: Path, *args: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest), *args],
        check=True,
        capture_output=True,
        text=True,
    )


def _fetch_sglang_sdist(version: str) -> Path:
    top = SOURCES_CACHE / f"sglang-{version}"
    if (top / "sglang" / "srt" / "server_args.py").is_file():
        return top
    download = SOURCES_CACHE / "download"
    archive = download / f"sglang-{version}.tar.gz"
    if not archive.is_file():
        _pip_download(download, "--no-binary", ":all:", f"sglang=={version}")
    staging = SOURCES_CACHE / f".sglang-{version}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    shutil.rmtree(top, ignore_errors=True)
    (staging / f"sglang-{version}").rename(top)
    shutil.rmtree(staging)
    return top


def _fetch_flashinfer_wheel(version: str) -> Path:
    top = SOURCES_CACHE / f"flashinfer-python-{version}"
    if (top / "flashinfer" / "jit" / "comm.py").is_file():
        return top
    download = SOURCES_CACHE / "download"
    wheel = download / f"flashinfer_python-{version}-py3-none-any.whl"
    if not wheel.is_file():
        _pip_download(download, "--only-binary", ":all:", f"flashinfer-python=={version}")
    staging = SOURCES_CACHE / f".flashinfer-python-{version}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(staging)
    shutil.rmtree(top, ignore_errors=True)
    staging.rename(top)
    return top


def build_tree(sources: PristineSources, layout: str, dest: Path) -> dict[str, Path]:
    """Copy pristine sources into ``dest`` in ``layout``; return the patch cwd per target."""
    sglang_pkg = sources.sglang_sdist / "sglang"
    if layout == "repo":
        shutil.copytree(sglang_pkg, dest / "sglang-repo" / "python" / "sglang")
        return {"sglang": dest / "sglang-repo"}
    if layout == "sdist":
        shutil.copytree(sglang_pkg, dest / sources.sglang_sdist.name / "sglang")
        return {"sglang": dest / sources.sglang_sdist.name}
    if layout == "site-packages":
        site = dest / "site-packages"
        shutil.copytree(sglang_pkg, site / "sglang")
        shutil.copytree(sources.flashinfer_wheel / "flashinfer", site / "flashinfer")
        return {"sglang": site, "flashinfer": site}
    raise ValueError(f"unknown layout {layout!r}, expected one of {LAYOUTS}")


def apply_series(series: Series, layout: str, cwds: Mapping[str, Path]) -> list[PatchRun]:
    """Dry-run then apply every patch of the series (in order) that targets a tree in cwds."""
    runs: list[PatchRun] = []
    for patch in series.patches:
        if patch.target not in cwds:
            continue
        strip = patch.strip[layout]
        dry = run_patch(patch, cwds[patch.target], strip, "--dry-run")
        assert dry.returncode == 0, f"{patch.path.name} dry-run in {layout}:\n{dry.output}"
        real = run_patch(patch, cwds[patch.target], strip)
        assert real.returncode == 0, f"{patch.path.name} in {layout}:\n{real.output}"
        runs.extend((dry, real))
    return runs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", HEAVY_MARKER)


@pytest.hookimpl(tryfirst=True)  # before -m deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "sglang_venv_python" in getattr(item, "fixturenames", ()):
            item.add_marker("heavy")


@pytest.fixture(scope="session")
def series() -> Series:
    return load_series()


@pytest.fixture(scope="session")
def pristine_sources(series: Series) -> PristineSources:
    return PristineSources(
        sglang_sdist=_fetch_sglang_sdist(series.sglang_version),
        flashinfer_wheel=_fetch_flashinfer_wheel(series.flashinfer_version),
    )


@pytest.fixture(scope="module")
def patched_site_packages(
    series: Series, pristine_sources: PristineSources, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A site-packages layout (sglang + flashinfer) with the whole series applied."""
    cwds = build_tree(pristine_sources, "site-packages", tmp_path_factory.mktemp("patched"))
    apply_series(series, "site-packages", cwds)
    return cwds["sglang"]


@pytest.fixture(scope="session")
def sglang_venv_python(series: Series) -> Path:
    """Python of a real SGLang install (CPU is enough to import it and parse arguments)."""
    return ensure_sglang_venv(series)


def ensure_sglang_venv(series: Series) -> Path:
    """The heavy venv's python, installed first if missing or of other pins.

    uv with flashinfer overridden to the deployed version (sglang pins an older one);
    reused across sessions: a stamp file records what was installed. Under scripts/test uv's cache
    is the one the test containers mount, so this install also fills it for them (see __main__).
    """
    venv = VENV_CACHE / "venv"
    python = venv / "bin" / "python"
    requirements = (
        f"sglang=={series.sglang_version}",
        f"torch=={TORCH_VERSION}",
        f"sgl-kernel=={SGL_KERNEL_VERSION}",
        f"flashinfer-python=={series.flashinfer_version}",
        f"flashinfer-cubin=={series.flashinfer_version}",
    )
    stamp = VENV_CACHE / "installed.txt"
    wanted = "\n".join(requirements) + "\n"
    if python.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8") == wanted:
        return python
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    VENV_CACHE.mkdir(parents=True, exist_ok=True)
    overrides = VENV_CACHE / "overrides.txt"
    overrides.write_text(
        f"flashinfer-python=={series.flashinfer_version}\nflashinfer-cubin=={series.flashinfer_version}\n",
        encoding="utf-8",
    )
    stamp.unlink(missing_ok=True)
    if not python.is_file():
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), "--override", str(overrides), *requirements],
        check=True,
    )
    stamp.write_text(wanted, encoding="utf-8")
    return python


if __name__ == "__main__":
    # scripts/test runs this before the lanes that install the stack side by side (lab hosts, molecule):
    # uv downloads a wheel each of its concurrent installs asks for, and unpacks it once per install
    # (the two lab hosts' cold installs left every archive twice in the cache, 20.7 GB for 10.4)
    print(ensure_sglang_venv(load_series()))
