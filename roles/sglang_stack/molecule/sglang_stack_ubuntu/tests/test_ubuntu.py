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
