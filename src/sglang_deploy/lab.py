"""The embedded lab host: a local systemd container (the molecule test image, same run options as
molecule/base.yml), managed through the docker SDK."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.errors import ImageNotFound, NotFound
from docker.models.containers import Container

DEFAULT_NAME = "sglang-lab"
DEFAULT_IMAGE = "sglang-deploy/debian12:latest"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CONTAINER_CA_BUNDLE = "/etc/ssl/host-ca-bundle.crt"
CACHE_DIR = "/var/cache/sglang-deploy"
LABEL = "org.sglang-deploy.lab"
SYSTEMD_OK = ("running", "degraded")
# The lab's tiny model (scripts/make-lab-model): package data -> the paths inventory/group_vars/lab.yml
# names (sglang_model_path, sglang_draft_model_path), owned by root and world-readable, so preflight's
# model checks pass on the lab host and a real SGLang can load it.
LAB_MODEL_DATA = Path(__file__).resolve().parent / "data" / "lab-model"
LAB_MODEL_DIRS = {"target": "models/lab-target", "eagle3": "models/lab-eagle3"}  # under /opt


class LabError(RuntimeError):
    pass


@dataclass(frozen=True)
class LabStatus:
    name: str
    exists: bool
    state: str = "absent"
    systemd: str = ""
    image: str = ""

    def line(self) -> str:
        if not self.exists:
            return f"lab {self.name}: absent"
        return f"lab {self.name}: container {self.state}, systemd {self.systemd or '-'}, image {self.image}"


def run_options(name: str, image: str, mounts: dict[str, str] | None = None) -> dict[str, Any]:
    """docker run options of the lab container: molecule/base.yml's platform, as SDK arguments;
    ``mounts``: named docker volumes -> paths in the container, read-write (the fleet demo's shared
    release store, lab_fleet.py)."""
    cache = os.environ.get("SGLANG_DEPLOY_CACHE", CACHE_DIR)
    volumes = {
        "/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"},
        cache: {"bind": CACHE_DIR, "mode": "rw"},
        **{volume: {"bind": path, "mode": "rw"} for volume, path in (mounts or {}).items()},
    }
    env = {"UV_CACHE_DIR": f"{CACHE_DIR}/uv", "PIP_CACHE_DIR": f"{CACHE_DIR}/pip", "LC_ALL": "C.UTF-8"}
    if Path(HOST_CA_BUNDLE).is_file():  # test/lab only: HTTPS may leave through a proxy with a private CA
        volumes[HOST_CA_BUNDLE] = {"bind": CONTAINER_CA_BUNDLE, "mode": "ro"}
        env |= dict.fromkeys(("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"), CONTAINER_CA_BUNDLE)
    return {
        "image": image,
        "name": name,
        "hostname": name,
        "command": "/lib/systemd/systemd",
        "detach": True,
        "cgroupns": "host",
        "privileged": False,
        "volumes": volumes,
        "tmpfs": {"/run": "", "/run/lock": ""},
        "environment": env,
        "labels": {LABEL: "1"},
    }


def lab_model_archive(data: Path = LAB_MODEL_DATA) -> bytes:
    """A tar of the lab model for /opt: models/, models/lab-target/..., models/lab-eagle3/... (root,
    directories 0755, files 0644)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, source: Path | None) -> None:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if source is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                raw = source.read_bytes()
                info.size, info.mode = len(raw), 0o644
                tar.addfile(info, io.BytesIO(raw))

        add("models", None)
        for sub, dest in LAB_MODEL_DIRS.items():
            add(dest, None)
            for file in sorted((data / sub).iterdir()):
                if file.is_file():
                    add(f"{dest}/{file.name}", file)
    return buf.getvalue()


class Lab:
    def __init__(
        self,
        repo_root: Path,
        name: str = DEFAULT_NAME,
        image: str = DEFAULT_IMAGE,
        client: docker.DockerClient | None = None,
        mounts: dict[str, str] | None = None,
    ) -> None:
        self.root = repo_root
        self.name = name
        self.image = image
        self.mounts = dict(mounts or {})
        self.client = client or docker.from_env()

    def _container(self) -> Container | None:
        try:
            return self.client.containers.get(self.name)
        except NotFound:
            return None

    def systemd_state(self, container: Container) -> str:
        result = container.exec_run(["systemctl", "is-system-running"])
        output = result.output if isinstance(result.output, bytes) else b""
        return output.decode(errors="replace").strip() or f"rc={result.exit_code}"

    def status(self) -> LabStatus:
        container = self._container()
        if container is None:
            return LabStatus(self.name, exists=False)
        container.reload()
        state = str(container.status)
        systemd = self.systemd_state(container) if state == "running" else ""
        tags = container.image.tags if container.image is not None else []
        return LabStatus(self.name, True, state, systemd, tags[0] if tags else str(container.image))

    def ensure_image(self, log: Any = print) -> None:
        try:
            self.client.images.get(self.image)
            return
        except ImageNotFound:
            pass
        flavour = self.image.split("/")[-1].split(":")[0]
        script = self.root / "molecule" / "images" / "build.sh"
        log(f"image {self.image} missing: building it with {script.relative_to(self.root)} {flavour}")
        subprocess.run([str(script), flavour], check=True, env={**os.environ, "DOCKER_BUILDKIT": "0"})
        self.client.images.get(self.image)

    def wait_systemd(self, container: Container, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            container.reload()
            if container.status != "running":
                logs = container.logs(tail=20).decode(errors="replace")
                raise LabError(f"lab container {self.name} stopped ({container.status}):\n{logs}")
            state = self.systemd_state(container)
            if state in SYSTEMD_OK:
                return state
            time.sleep(0.5)
        raise LabError(
            f"systemd in {self.name} did not reach running/degraded in {timeout:.0f}s (last: {state})"
        )

    def create(self, timeout: float = 120, log: Any = print) -> LabStatus:
        container = self._container()
        if container is not None and container.status == "running":
            # A running container is never touched: when systemd answers other than running/degraded
            # at this instant (still booting, or a D-Bus answer late on a loaded machine: seen once as
            # "ready after 0.1s"), wait for it, then it is the same container that was already there.
            state = self.systemd_state(container)
            if state not in SYSTEMD_OK:
                log(f"lab {self.name} is running but systemd is not up yet ({state}): waiting")
                state = self.wait_systemd(container, timeout)
            if self.install_model(container, log):
                log(f"lab {self.name} already running (systemd {state})")
            else:
                log(f"lab {self.name} already running (systemd {state}), its model up to date: nothing to do")
            return self.status()
        if container is not None:
            log(f"lab {self.name} exists ({container.status}): starting it")
            container.start()
        else:
            self.ensure_image(log)
            if not Path(CACHE_DIR).exists() and "SGLANG_DEPLOY_CACHE" not in os.environ:
                Path(CACHE_DIR).mkdir(parents=True, exist_ok=True)
            container = self.client.containers.run(**run_options(self.name, self.image, self.mounts))
            log(f"lab {self.name} created from {self.image}")
        started = time.monotonic()
        state = self.wait_systemd(container, timeout)
        log(f"lab {self.name} ready: systemd {state} after {time.monotonic() - started:.1f}s")
        self.install_model(container, log)
        return self.status()

    def install_model(self, container: Container, log: Any = print) -> bool:
        """Copy the lab model to /opt/models/lab-{target,eagle3} unless the same files are there
        (sha256 of each, mode and owner); True when copied."""
        wanted = []
        for sub, dest in LAB_MODEL_DIRS.items():
            for file in sorted((LAB_MODEL_DATA / sub).iterdir()):
                if file.is_file():
                    digest = hashlib.sha256(file.read_bytes()).hexdigest()
                    wanted.append(f"{digest} 644 0:0 /opt/{dest}/{file.name}")
        script = (
            'for f in "$@"; do printf "%s %s %s\\n" "$(sha256sum < "$f" | cut -d" " -f1)" '
            '"$(stat -c "%a %u:%g" "$f")" "$f"; done'
        )
        paths = [line.split(" ", 3)[3] for line in wanted]
        found = container.exec_run(["sh", "-c", script, "sh", *paths])
        output = found.output if isinstance(found.output, bytes) else b""
        if found.exit_code == 0 and output.decode(errors="replace").splitlines() == wanted:
            return False
        container.exec_run(["mkdir", "-p", "/opt"])
        if not container.put_archive("/opt", lab_model_archive()):
            raise LabError(f"could not copy the lab model into {self.name}:/opt/models")
        log(f"lab model installed: /opt/{LAB_MODEL_DIRS['target']}, /opt/{LAB_MODEL_DIRS['eagle3']}")
        return True

    def exec(self, *cmd: str) -> tuple[int, str]:
        """A command in the running lab container (docker exec): its exit code and output."""
        container = self._container()
        if container is None or container.status != "running":
            raise LabError(f"lab {self.name} is not running: sglang-deploy lab create --name {self.name}")
        result = container.exec_run(list(cmd))
        output = result.output if isinstance(result.output, bytes) else b""
        return int(result.exit_code or 0), output.decode(errors="replace")

    def destroy(self, log: Any = print) -> bool:
        container = self._container()
        if container is None:
            log(f"lab {self.name} absent: nothing to do")
            return False
        container.remove(force=True, v=True)
        log(f"lab {self.name} removed")
        return True
