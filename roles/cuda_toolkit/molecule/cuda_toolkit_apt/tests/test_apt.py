"""cuda_toolkit, apt method, against the fixture repository (fake cuda-toolkit-13-0 13.0.0/1/2)."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

PKG = "cuda-toolkit-13-0"


def test_repo_is_deb822_with_signed_by(host) -> None:
    src = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert src.exists
    lines = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip()
        for line in src.content_string.splitlines()
        if ":" in line
    }
    assert lines["Types"] == "deb"
    assert lines["URIs"] == "http://127.0.0.1:8808/"
    assert lines["Suites"] == "/"
    key = lines["Signed-By"]
    assert key.startswith("/etc/apt/keyrings/")

    # Issue 32 item 3: the published file holds the repository's key and an extra one; the keyring
    # holds the pinned key alone, and gpgv (apt's verifier) refuses a signature by the extra key.
    def primaries(path: str) -> list[str]:
        out = host.check_output(f"gpg --batch --with-colons --show-keys {path}")
        rows = [ln.split(":") for ln in out.splitlines()]
        return [row[9] for prev, row in itertools.pairwise(rows) if prev[0] == "pub" and row[0] == "fpr"]

    real = host.file("/srv/fake-cuda-repo/fingerprint.txt").content_string.strip()
    extra = host.file("/srv/fake-cuda-repo/extra-fingerprint.txt").content_string.strip()
    assert primaries("/srv/fake-cuda-repo/fake-nvidia-repo.asc") == [extra, real]
    assert primaries(key) == [real]
    host.check_output(f"gpg --batch --yes --dearmor -o /tmp/keyring.gpg {key}")
    sig = "/srv/fake-cuda-repo/extra-signed.txt"
    refused = host.run(f"gpgv --keyring /tmp/keyring.gpg {sig}.sig {sig}")
    assert refused.rc != 0, refused.stdout + refused.stderr
    base = "/srv/fake-cuda-repo/Release"
    accepted = host.run(f"gpgv --keyring /tmp/keyring.gpg {base}.gpg {base}")
    assert accepted.rc == 0, accepted.stdout + accepted.stderr
    # No other copy of the key is trusted globally.
    assert not host.file("/etc/apt/trusted.gpg").exists
    assert not host.run("grep -rl 127.0.0.1:8808 /etc/apt/sources.list /etc/apt/sources.list.d/*.list").stdout


def test_pinned_release_installed_although_newer_available(host) -> None:
    assert host.package(PKG).version == "13.0.1-1"
    policy = host.check_output(f"apt-cache policy {PKG}")
    assert "Installed: 13.0.1-1" in policy
    assert "Candidate: 13.0.1-1" in policy
    assert "13.0.2-1" in policy  # the newer one IS available from the repo
    pref = host.file(f"/etc/apt/preferences.d/{PKG}.pref").content_string
    assert f"Package: {PKG}" in pref
    assert "Pin: version 13.0.1-1" in pref
    assert "Pin-Priority: 1001" in pref


def test_package_is_held(host) -> None:
    sel = host.check_output(f"dpkg --get-selections {PKG}").split()
    assert sel == [PKG, "hold"]


def test_apt_upgrade_does_not_move_it(host) -> None:
    host.run_expect([0], "apt-get update -qq")
    sim = host.check_output("apt-get -s -o Debug::NoLocking=1 dist-upgrade")
    assert f"Inst {PKG}" not in sim
    host.run_expect([0], "DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade")
    assert host.package(PKG).version == "13.0.1-1"


def test_unattended_upgrades_blacklist(host) -> None:
    f = host.file("/etc/apt/apt.conf.d/51cuda-toolkit-unattended-upgrades")
    assert f.exists
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    for entry in ("cuda-", "nvidia-", "libnvidia-", "libnccl"):
        assert f'Unattended-Upgrade::Package-Blacklist:: "{entry}";' in dump


def test_toolkit_verified_and_exported(host) -> None:
    out = host.check_output("/usr/local/cuda-13.0/bin/nvcc --version")
    assert "release 13.0, V13.0.88" in out
    env = host.check_output("bash -lc 'echo $CUDA_HOME; command -v nvcc'")
    assert env.splitlines() == ["/usr/local/cuda-13.0", "/usr/local/cuda-13.0/bin/nvcc"]


def test_check_mode_predicts_unknown_package_from_a_new_repo_without_failing(host) -> None:
    """Known bug class: in check mode the repository is not really added, so the apt module
    would fail on a package no index knows yet. The role must predict the install instead."""
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="false", ANSIBLE_NOCOLOR="1")
    extra = [
        "cuda_toolkit_apt_repo_name=nvidia-cuda-next",
        "cuda_toolkit_apt_repo_url=http://127.0.0.1:8808/next/",
        "cuda_toolkit_apt_signing_key=http://127.0.0.1:8808/fake-nvidia-repo.asc",
        "cuda_toolkit_apt_package=cuda-toolkit-13-9",
    ]
    # the install is reported by the module that makes it (sglang.deploy.pinned_package): its diff
    # header names the change (what `sglang-deploy drift`, which runs --check --diff, lists)
    args = ["ansible-playbook", "-i", str(inventory), "--check", "--diff", str(playbook)]
    for e in extra:
        args += ["-e", e]
    before = host.check_output("ls /etc/apt/sources.list.d /etc/apt/preferences.d; dpkg --get-selections")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=600)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out[-4000:]
    assert "check mode: would install cuda-toolkit-13-9=13.0.1-1 (installed: none) and hold it" in out
    assert "changed=0" not in out
    assert (
        host.check_output("ls /etc/apt/sources.list.d /etc/apt/preferences.d; dpkg --get-selections")
        == before
    )


def test_removed_hold_preferences_and_nvcc_are_drift_repaired_by_a_run(host) -> None:
    """Operator tampering: the hold and the pin file removed, nvcc deleted. --check names each task
    (no failure, nothing changed), a run restores all three, the next run changes nothing."""
    import moltest  # noqa: PLC0415 (molecule/shared on the verifier's path)

    pref = f"/etc/apt/preferences.d/{PKG}.pref"
    nvcc = "/usr/local/cuda-13.0/bin/nvcc"
    host.run_expect([0], f"apt-mark unhold {PKG} && rm -f {pref} {nvcc}")
    rc, out = moltest.run_playbook("converge.yml", "--check", "--diff")
    assert rc == 0, out[-4000:]
    state = (
        f"Apply the apt method's files (verified key, unattended-upgrades blacklist, pin) of {PKG}=13.0.1-1"
    )
    package = f"Install the toolkit package, repair its drift and hold it - {PKG}=13.0.1-1"
    for task in (state, package):
        assert task in out, out[-4000:]
    # one task reports the reinstall of nvcc's package and the hold (apt-get install resets it)
    assert "+++ after: drift: /usr/local/cuda-13.0: bin/nvcc is missing; a real run reinstalls" in out
    assert f"-{PKG} 13.0.1-1 install" in out, out[-4000:]
    assert f"+{PKG} 13.0.1-1 hold" in out, out[-4000:]
    assert f"+++ after: {pref}" in out, out[-4000:]  # the pin file's diff, from the state task
    assert not host.file(pref).exists, "check mode changed the host"
    assert not host.file(nvcc).exists, "check mode changed the host"
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert host.check_output(f"dpkg --get-selections {PKG}").split() == [PKG, "hold"]
    assert "Pin: version 13.0.1-1" in host.file(pref).content_string
    assert "V13.0.88" in host.check_output(f"{nvcc} --version")
    rc, out = moltest.run_playbook("converge.yml")
    assert rc == 0, out[-4000:]
    assert moltest.totals(out)["changed"] == 0, out[-4000:]


def _converge(*extra: str) -> tuple[int, str]:
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="false", ANSIBLE_NOCOLOR="1")
    args = ["ansible-playbook", "-i", str(inventory), str(playbook)]
    for e in extra:
        args += ["-e", e]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=600)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())


def test_a_key_with_another_fingerprint_is_refused_before_any_change(host) -> None:
    """Issue 21: the repository key is pinned by fingerprint (a swapped key fails, naming both)."""
    before = host.check_output(
        "cat /etc/apt/sources.list.d/nvidia-cuda.sources /etc/apt/keyrings/nvidia-cuda.asc"
    )
    wrong = "0123456789ABCDEF0123456789ABCDEF01234567"
    rc, out = _converge(f"cuda_toolkit_apt_key_fingerprint={wrong}")
    assert rc != 0, out[-3000:]
    real = host.file("/srv/fake-cuda-repo/fingerprint.txt").content_string.strip()
    extra = host.file("/srv/fake-cuda-repo/extra-fingerprint.txt").content_string.strip()
    assert "the apt repository key http://127.0.0.1:8808/fake-nvidia-repo.asc is not the pinned one" in out, (
        out[-3000:]
    )
    # the file's two keys, in file order
    both = f"fingerprints {extra}, {real}"
    assert f"{both}, allowed cuda_toolkit_apt_key_fingerprint={wrong}" in out, out[-3000:]
    after = host.check_output(
        "cat /etc/apt/sources.list.d/nvidia-cuda.sources /etc/apt/keyrings/nvidia-cuda.asc"
    )
    assert after == before


def test_http_is_refused_unless_allowed(host) -> None:
    rc, out = _converge('{"cuda_toolkit_allow_insecure_repo": false}')
    assert rc != 0
    assert 'bad cuda_toolkit input: cuda_toolkit_apt_repo_url="http://127.0.0.1:8808/"' in out, out[-3000:]
    assert "allowed an https:// URL (http:// only with cuda_toolkit_allow_insecure_repo=true)" in out
