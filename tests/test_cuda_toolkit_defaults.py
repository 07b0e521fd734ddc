"""Static checks of roles/cuda_toolkit: production defaults point at the real upstreams.

The apt molecule scenario runs against a local fixture repository (NVIDIA's is not reachable
from CI); this test pins what a real host gets when nothing is overridden.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROLE = Path(__file__).resolve().parents[1] / "roles" / "cuda_toolkit"
NVIDIA_UBUNTU2404_X86_64 = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"


def load(rel: str) -> Any:
    return yaml.safe_load((ROLE / rel).read_text(encoding="utf-8"))


def test_default_repo_is_nvidias_ubuntu2404_x86_64_repository() -> None:
    defaults = load("defaults/main.yml")
    assert defaults["cuda_toolkit_apt_repo_url"] == NVIDIA_UBUNTU2404_X86_64
    # NVIDIA's repository signing key (3bf863cc) from the same repository.
    assert defaults["cuda_toolkit_apt_signing_key"] == "{{ cuda_toolkit_apt_repo_url }}3bf863cc.pub"


def test_defaults_take_versions_from_the_manifest() -> None:
    text = (ROLE / "defaults" / "main.yml").read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    # No CUDA version number is repeated in the defaults (only the repo URL's "2404").
    assert not re.search(r"\b1[23]\.\d", body), body
    defaults = load("defaults/main.yml")
    assert defaults["cuda_toolkit_expected_version"] == "{{ sglang_cuda_version }}"
    assert defaults["cuda_toolkit_apt_package_version"] == "{{ sglang_cuda_version }}-1"
    assert defaults["cuda_toolkit_prefix"] == "/opt/cuda/{{ sglang_cuda_version }}"


def test_argument_specs_choices_and_defaults_agree() -> None:
    spec = load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load("defaults/main.yml")
    assert spec["cuda_toolkit_method"]["choices"] == ["auto", "apt", "wheel", "existing"]
    assert spec["cuda_toolkit_gpu_check"]["choices"] == ["auto", "required", "skip"]
    for name, opt in spec.items():
        assert name in defaults, f"{name} documented but has no default"
        if "default" in opt:
            assert opt["default"] == defaults[name], name
    assert set(defaults) == set(spec), set(defaults) ^ set(spec)


def test_manifest_maps_the_pinned_release_to_an_nvcc_build() -> None:
    manifest = yaml.safe_load((ROLE.parents[1] / "group_vars" / "all" / "versions.yml").read_text("utf-8"))
    version = manifest["sglang_cuda_version"]
    assert version.startswith(manifest["sglang_cuda_release"] + ".")
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["sglang_cuda_nvcc_builds"][version])
