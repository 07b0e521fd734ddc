"""The cuda_toolkit role's supply chain (issue 21): the apt key pinned by fingerprint
(plugins/module_utils/openpgp.py, filter sglang.deploy.openpgp_fingerprints) against keys gpg made,
and the manifest's hash pins (versions.yml) that the role's inputs default to."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

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
    _armored_a, _binary_a, fa = gpg_key(tmp_path / "a", "ed25519")
    b, _binary_b, fb = gpg_key(tmp_path / "b", "ed25519")
    assert fa != fb
    assert openpgp.fingerprints(b) == [fb]


def _gpg(home: Path, *args: str, data: bytes | None = None, check: bool = True) -> bytes:
    env = dict(os.environ, GNUPGHOME=str(home))
    out: bytes = subprocess.run(
        ["gpg", "--batch", *args], env=env, input=data, capture_output=True, check=check
    ).stdout
    return out


@pytest.fixture
def two_keys(tmp_path: Path) -> dict[str, Any]:
    """One gpg home with two keys: "pinned" (stands for NVIDIA's) and "extra" (another party's), each
    with an encryption subkey; a file signed by each; the exported file holding both keys."""
    home = tmp_path / "g"
    home.mkdir(mode=0o700)
    fprs: dict[str, str] = {}
    for name in ("extra", "pinned"):  # the extra key first in the file: order must not matter
        _gpg(
            home,
            "--passphrase",
            "",
            "--quick-gen-key",
            f"{name} <{name}@invalid>",
            "ed25519",
            "sign",
            "never",
        )
        colons = _gpg(home, "--with-colons", "--fingerprint", f"{name}@invalid").decode()
        fprs[name] = next(ln.split(":")[9] for ln in colons.splitlines() if ln.startswith("fpr:"))
        _gpg(home, "--passphrase", "", "--quick-add-key", fprs[name], "cv25519", "encr", "never")
    payload = tmp_path / "Release"
    payload.write_text("Origin: test\n")
    for name, fpr in fprs.items():
        _gpg(
            home,
            "--local-user",
            fpr,
            "--detach-sign",
            "-o",
            str(tmp_path / f"Release.{name}.sig"),
            str(payload),
        )
    both = _gpg(home, "--armor", "--export").decode()
    return {"home": home, "fprs": fprs, "both": both, "dir": tmp_path, "payload": payload}


def _gpgv(keyring_armored: str, work: Path, sig: Path, payload: Path) -> int:
    """gpgv's verdict on ``sig`` against a keyring of ``keyring_armored`` (dearmored, as apt does)."""
    ring = work / "ring.gpg"
    ring.write_bytes(openpgp._binary(keyring_armored))
    proc = subprocess.run(
        ["gpgv", "--keyring", str(ring), str(sig), str(payload)], capture_output=True, check=False
    )
    return proc.returncode


def test_export_keeps_the_pinned_key_alone(two_keys: dict[str, Any]) -> None:
    """Issue 32 item 3: a key file with NVIDIA's key plus another installs NVIDIA's key alone."""
    fprs, both = two_keys["fprs"], two_keys["both"]
    assert openpgp.fingerprints(both) == [fprs["extra"], fprs["pinned"]]
    exported = openpgp.export_key(both, fprs["pinned"])
    assert openpgp.fingerprints(exported) == [fprs["pinned"]]
    # gpg reads the export as that key with its user ID and its subkey, the same bytes gpg exported
    other = two_keys["dir"] / "other-home"
    other.mkdir(mode=0o700)
    shown = _gpg(other, "--with-colons", "--show-keys", data=exported.encode()).decode()
    records = [ln.split(":")[0] for ln in shown.splitlines()]
    assert records.count("pub") == 1
    assert records.count("sub") == 1
    assert "pinned <pinned@invalid>" in shown
    assert "extra@invalid" not in shown
    alone = _gpg(two_keys["home"], "--export", fprs["pinned"])
    assert openpgp._binary(exported) == alone
    # apt's gpgv, against the installed keyring: the pinned key's signature passes, the extra key's fails
    work, payload = two_keys["dir"], two_keys["payload"]
    assert _gpgv(exported, work, work / "Release.pinned.sig", payload) == 0
    assert _gpgv(exported, work, work / "Release.extra.sig", payload) != 0
    # what the role installed before: the whole file, which trusted the extra key too
    assert _gpgv(both, work, work / "Release.extra.sig", payload) == 0


def test_export_reads_every_armored_block(two_keys: dict[str, Any]) -> None:
    fprs, home = two_keys["fprs"], two_keys["home"]
    blocks = "".join(_gpg(home, "--armor", "--export", fprs[n]).decode() for n in ("extra", "pinned"))
    assert openpgp.fingerprints(blocks) == [fprs["extra"], fprs["pinned"]]
    assert openpgp.fingerprints(openpgp.export_key(blocks, fprs["pinned"])) == [fprs["pinned"]]


def test_export_of_an_absent_fingerprint_names_the_ones_found(two_keys: dict[str, Any]) -> None:
    fprs = two_keys["fprs"]
    wrong = "0123456789ABCDEF0123456789ABCDEF01234567"
    with pytest.raises(ValueError, match=f"no key {wrong} in the key file .fingerprints {fprs['extra']}, "):
        openpgp.export_key(two_keys["both"], wrong)


def test_armor_crc_is_gpgs(two_keys: dict[str, Any]) -> None:
    """The armor written anew carries the CRC-24 gpg writes for the same packets."""
    fpr = two_keys["fprs"]["pinned"]
    theirs = _gpg(two_keys["home"], "--armor", "--export", fpr).decode()
    crc = next(ln for ln in theirs.splitlines() if ln.startswith("="))
    assert crc in openpgp.export_key(theirs, fpr).splitlines()


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
