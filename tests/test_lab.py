"""The lab host: its run options mirror molecule/base.yml, and a real create/status/destroy cycle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sglang_deploy.lab import DEFAULT_IMAGE, Lab, run_options

REPO = Path(__file__).resolve().parents[1]


def test_run_options_match_molecule_base() -> None:
    platform = yaml.safe_load((REPO / "molecule" / "base.yml").read_text())["platforms"][0]
    options = run_options("sglang-lab", DEFAULT_IMAGE)
    assert options["command"] == platform["command"]
    assert options["cgroupns"] == platform["cgroupns_mode"]
    assert options["privileged"] is platform["privileged"] is False
    assert sorted(options["tmpfs"]) == sorted(platform["tmpfs"])
    wanted_volumes = set()
    for volume in platform["volumes"]:
        source, target, mode = volume.rsplit(":", 2)
        if source.startswith("${"):
            source = os.environ.get("SGLANG_DEPLOY_CACHE", "/var/cache/sglang-deploy")
        wanted_volumes.add((source, target, mode))
    got = {(source, spec["bind"], spec["mode"]) for source, spec in options["volumes"].items()}
    assert got == wanted_volumes
    assert options["environment"] == platform["env"]


def _docker_ok() -> bool:
    try:
        import docker  # noqa: PLC0415

        client = docker.from_env()
        client.ping()
        client.images.get(DEFAULT_IMAGE)
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _docker_ok(), reason=f"needs a running dockerd and the image {DEFAULT_IMAGE}")
def test_lab_lifecycle() -> None:
    lab = Lab(REPO, name=f"sgd-pytest-lab-{os.getpid()}")
    messages: list[str] = []
    try:
        assert not lab.status().exists
        status = lab.create(timeout=60, log=messages.append)
        assert status.state == "running"
        assert status.systemd in ("running", "degraded")
        assert lab.create(timeout=60, log=messages.append) == lab.status()
        assert "nothing to do" in messages[-1]
        container = lab.client.containers.get(lab.name)
        assert container.attrs["HostConfig"]["Privileged"] is False
        assert container.attrs["HostConfig"]["CgroupnsMode"] == "host"
        output = container.exec_run(["printenv", "SSL_CERT_FILE"]).output
        assert isinstance(output, bytes)
        assert output.decode().strip() == "/etc/ssl/host-ca-bundle.crt"
    finally:
        lab.destroy(log=messages.append)
    assert not lab.status().exists
    assert lab.destroy(log=messages.append) is False
