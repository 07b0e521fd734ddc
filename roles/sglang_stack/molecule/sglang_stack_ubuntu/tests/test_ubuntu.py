"""Ubuntu 24.04: the role's default interpreter is the distribution's python3.12."""

from __future__ import annotations

from typing import Any

CURRENT = "/opt/sglang/current"


def test_release_venv_uses_the_system_python312(host: Any) -> None:
    base = host.check_output(f"{CURRENT}/venv/bin/python -c 'import sys; print(sys.base_prefix)'")
    assert base == "/usr"
    cfg = host.file(f"{CURRENT}/venv/pyvenv.cfg").content_string
    assert "version_info = 3.12." in cfg or "version = 3.12." in cfg, cfg


def test_system_packages_the_role_needs(host: Any) -> None:
    for name in ("python3-venv", "python3-packaging", "patch"):
        assert host.package(name).is_installed, name


PYPI_KERNEL = "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
PYPI_KERNEL_SHA256 = "57dfb3a2a3cd759f499c32e2bad5f6489b7c58f7f9a84ee00c53ec92d303aaab"


def test_sgl_kernel_by_url_is_fetched_verified_and_locked_as_that_file(host: Any) -> None:
    # the default path of a GPU host (converge.yml): the URL wheel kept in the wheels directory...
    kept = host.file(f"/opt/sglang/cache/wheels/{PYPI_KERNEL}")
    assert kept.is_file
    assert kept.mode == 0o644
    assert kept.sha256sum == PYPI_KERNEL_SHA256
    # ...named by the requirements as that file, pinned by the lock with the sha256 it had, installed
    requirements = host.file(f"{CURRENT}/requirements.in").content_string
    assert f"sgl-kernel @ file:///opt/sglang/cache/wheels/{PYPI_KERNEL}" in requirements.splitlines()
    lock = host.file(f"{CURRENT}/requirements.lock").content_string
    entry = lock[lock.index(f"sgl-kernel @ file:///opt/sglang/cache/wheels/{PYPI_KERNEL}") :].split("#", 1)[0]
    assert f"--hash=sha256:{PYPI_KERNEL_SHA256}" in entry
    assert entry.count("--hash=") == 1
    version = host.check_output(
        f"{CURRENT}/venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"sgl-kernel\"))'"
    )
    assert version == "0.3.21"
