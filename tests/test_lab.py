"""The lab host: its run options mirror molecule/base.yml, and a real create/status/destroy cycle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import docker
import pytest
import yaml
from docker.errors import ImageNotFound

from sglang_deploy.lab import DEFAULT_IMAGE, Lab, LabStatus, run_options

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


class _Images:
    def __init__(self) -> None:
        self.calls = 0

    def get(self, name: str) -> object:
        self.calls += 1
        if self.calls == 1:
            raise ImageNotFound(f"no {name}")
        return object()


class _Client:
    def __init__(self) -> None:
        self.images = _Images()


def test_missing_image_is_built_with_the_image_script(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kwargs: object) -> None:
        calls.append(cmd)

    monkeypatch.setattr("sglang_deploy.lab.subprocess.run", fake_run)
    lab = Lab(REPO, client=cast("docker.DockerClient", _Client()))
    lab.ensure_image(log=lambda message: None)
    assert calls == [[str(REPO / "molecule" / "images" / "build.sh"), "debian12"]]


class _Running:
    """A running container as the docker SDK describes it (a test double for the SDK object only)."""

    status = "running"
    started = 0

    def reload(self) -> None:
        return None

    def start(self) -> None:
        self.started += 1


def test_a_running_lab_whose_systemd_answers_late_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd answered other than running/degraded once (a loaded machine): create waits for it and
    then reports the container that was already there, starting and creating nothing."""
    container = _Running()
    answers = iter(["starting", "running"])
    lab = Lab(REPO, client=cast("docker.DockerClient", _Client()))
    monkeypatch.setattr(lab, "_container", lambda: container)
    monkeypatch.setattr(lab, "systemd_state", lambda _c: next(answers))
    monkeypatch.setattr(lab, "install_model", lambda _c, _log: False)
    status = LabStatus("sglang-lab", True, "running", "running", DEFAULT_IMAGE)
    monkeypatch.setattr(lab, "status", lambda: status)
    messages: list[str] = []
    assert lab.create(timeout=5, log=messages.append) is status
    assert container.started == 0
    assert messages == [
        "lab sglang-lab is running but systemd is not up yet (starting): waiting",
        "lab sglang-lab already running (systemd running), its model up to date: nothing to do",
    ]


def _docker_ok() -> bool:
    try:
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
        assert any(m.startswith("lab model installed: /opt/models/lab-target") for m in messages)
        assert lab.create(timeout=60, log=messages.append) == lab.status()
        assert "its model up to date: nothing to do" in messages[-1]
        container = lab.client.containers.get(lab.name)
        # the shipped lab model, where inventory/group_vars/lab.yml points, root-owned and world-readable
        listing = container.exec_run(
            ["sh", "-c", "stat -c '%a %U %n' /opt/models /opt/models/lab-* /opt/models/lab-*/*"]
        ).output
        assert isinstance(listing, bytes)
        lines = listing.decode().splitlines()
        assert "755 root /opt/models/lab-target" in lines
        assert "644 root /opt/models/lab-target/model.safetensors" in lines
        assert "644 root /opt/models/lab-eagle3/config.json" in lines
        assert "644 root /opt/models/lab-target/tokenizer.json" in lines
        container.exec_run(["rm", "/opt/models/lab-eagle3/config.json"])
        lab.create(timeout=60, log=messages.append)
        assert messages[-2].startswith("lab model installed"), messages[-3:]
        assert container.exec_run(["test", "-f", "/opt/models/lab-eagle3/config.json"]).exit_code == 0
        assert container.attrs["HostConfig"]["Privileged"] is False
        assert container.attrs["HostConfig"]["CgroupnsMode"] == "host"
        output = container.exec_run(["printenv", "SSL_CERT_FILE"]).output
        assert isinstance(output, bytes)
        assert output.decode().strip() == "/etc/ssl/host-ca-bundle.crt"
        container.stop(timeout=10)
        assert lab.status().state == "exited"
        assert lab.create(timeout=60, log=messages.append).systemd in ("running", "degraded")
        assert any("starting it" in m for m in messages)
    finally:
        lab.destroy(log=messages.append)
    assert not lab.status().exists
    assert lab.destroy(log=messages.append) is False
