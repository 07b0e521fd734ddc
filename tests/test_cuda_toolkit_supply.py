"""The cuda_toolkit role's supply chain (issue 21): the apt key pinned by fingerprint
(plugins/module_utils/openpgp.py, filter sglang.deploy.openpgp_fingerprints) against keys gpg made,
and the manifest's hash pins (versions.yml) that the role's inputs default to."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from modload import REPO, load_module

openpgp = load_module("openpgp", REPO / "plugins/module_utils/openpgp.py")
VERSIONS = yaml.safe_load((REPO / "group_vars/all/versions.yml").read_text())


def gpg_key(home: Path, algo: str) -> tuple[str, bytes, str]:
    """(armored, binary, fingerprint gpg prints) of a fresh key."""
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))

    def run(*args: str) -> bytes:
        out: bytes = subprocess.run(
            ["gpg", "--batch", *args], env=env, capture_output=True, check=True
        ).stdout
        return out

    run("--passphrase", "", "--quick-gen-key", "test <t@invalid>", algo, "sign", "never")
    armored = run("--armor", "--export").decode()
    binary = run("--export")
    colons = run("--with-colons", "--fingerprint").decode()
    fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    return armored, binary, fpr


@pytest.mark.parametrize("algo", ["ed25519", "rsa2048"])
def test_fingerprint_equals_gpg(tmp_path: Path, algo: str) -> None:
    armored, binary, fpr = gpg_key(tmp_path / "g", algo)
    assert re.fullmatch(r"[0-9A-F]{40}", fpr)
    assert openpgp.fingerprints(armored) == [fpr]
    assert openpgp.fingerprints(binary) == [fpr]
    # the filter the role calls (sglang.deploy.openpgp_fingerprints) wraps this function; loading it by
    # path here depends on whether an earlier test installed Ansible's collection finder, so the role's
    # own use of it is what molecule cuda_toolkit_apt tests (a wrong fingerprint refused, both named)


def test_a_changed_key_has_another_fingerprint(tmp_path: Path) -> None:
    _, _, fa = gpg_key(tmp_path / "a", "ed25519")
    b, _, fb = gpg_key(tmp_path / "b", "ed25519")
    assert fa != fb
    assert openpgp.fingerprints(b) == [fb]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello", "not an OpenPGP packet"),
        ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "bad base64"),
        ("-----BEGIN PGP SIGNATURE-----\n", "no '-----BEGIN PGP PUBLIC KEY BLOCK-----'"),
        ("", "empty key"),
    ],
)
def test_what_is_not_a_key_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        openpgp.fingerprints(text)


def test_the_manifest_pins_every_artefact() -> None:
    assert re.fullmatch(r"[0-9A-F]{40}", VERSIONS["sglang_cuda_apt_key_fingerprint"])
    assert VERSIONS["sglang_cuda_apt_key_fingerprint"].endswith("A4B469963BF863CC")  # NVIDIA's 3bf863cc.pub
    hashes = VERSIONS["sglang_cuda_wheel_sha256"]
    assert f"cuda-toolkit=={VERSIONS['sglang_cuda_version']}" in hashes
    for pin, digests in hashes.items():
        assert re.fullmatch(r"[a-z0-9-]+==[0-9.]+", pin)
        assert digests
        assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests), pin
    assert re.fullmatch(r"[0-9a-f]{40}", VERSIONS["sglang_git_commit"])
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in VERSIONS["sglang_uv_sha256"])
    # every sha256 SGLang's index published for the cu130 sgl-kernel wheel, per architecture (5 uploads each)
    kernel = VERSIONS["sglang_sgl_kernel_sha256"]
    assert sorted(kernel) == ["aarch64", "x86_64"]
    for arch, digests in kernel.items():
        assert len(digests) == len(set(digests)) == 5, arch
        assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in digests), arch
    assert kernel["x86_64"][-1] == "4be1313f82808f0fb6df8107e79f6b6cea07a4aa2b20139e0342eafe31eb28bd"
    assert kernel["aarch64"][-1] == "8155ef98d155331827c458ca7b8b25a68b2a2b7403f013f0de0f0731666dac8d"
