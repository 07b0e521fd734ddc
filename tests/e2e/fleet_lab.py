"""The fleet of the fleet_lab tests (tests/e2e/test_roll_lab.py, test_status_lab.py): one router
container converged by the REAL sglang_router role (site.yml's router stages) and N replica
containers, each the real sglang-kimi unit running the named TEST DOUBLE
playbooks/lab/sglang_protocol_double.py (SGLang's protocol, no GPU) with the release python.

A full stack install takes most of an hour per container on 2 CPUs, so the replicas are made from ONE
converged replica: a seed container converged by site.yml (lab mode, the whole stack), given the
double and the lab tokenizer (playbooks/lab/install_double.yml), stopped and `docker commit`ted to an
image. Every replica container starts from that image, and the fleet's own site.yml run on it is the
stack's no-op rerun (the release, receipt and venv are there already) - the same state a real fleet
has after its first deployment. The image is made once per pytest session (the `replica_image`
fixture of conftest.py) and removed at its end; SGLANG_E2E_FLEET_IMAGE=<tag> names a prebuilt one
that is used and left in place (a developer's own: a fleet_lab run with SGLANG_E2E_KEEP_FLEET_IMAGE=1
keeps the image it made). scripts/test's second e2e lane makes the image from the verify lab's host instead
(SGLANG_E2E_LAB_SEEDS_FLEET=1): right after that host's first site.yml, before its tests change it, the
verify lab's worker adds the double, commits the host, replaces it by a container of the image (the
same host rebooted: the stack is stored once) and publishes the tag in the xdist workers' shared
directory; the fleet's worker waits for it there. The verify lab and the fleet then
share one whole-stack install and run side by side; scripts/test removes the image at the end.

The fleet itself - its containers and network, the inventory (each server's sglang_router_worker_url:
its IP on the fleet's network; sglang_router_url keeps its default, the router container's name), the
router exposed to the fleet's network with its client and admin keys, the live load through the router
(lab_fleet.Load, test_roll_lab's Traffic) - is src/sglang_deploy/lab_fleet.py, which `sglang-deploy lab
demo --fleet` uses too. Here: the replica image, and make_fleet with the e2e's test-only keys."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from e2e_lab import REPO, cli, docker_host, lab_group_vars, playbook, write_yaml

from sglang_deploy.lab_fleet import (
    ROUTER_PROM_PORT,
    Fleet,
    bearer,
    create_containers,
    double_vars,
    remove_fleet,
    write_inventory,
)

Run = TypeVar("Run")

__all__ = ["ROUTER_PROM_PORT", "Fleet", "double_vars", "make_fleet", "remove_fleet"]

IMAGE_ENV = "SGLANG_E2E_FLEET_IMAGE"
KEEP_ENV = "SGLANG_E2E_KEEP_FLEET_IMAGE"
# set by scripts/test for SGLANG_TEST_FLEET=required (.ci/run): no room for the image fails the fleet's tests
REQUIRED_ENV = "SGLANG_E2E_FLEET_REQUIRED"
IMAGE_TAG = "sglang-deploy/fleet-replica:e2e"
SEED = "sglang-lab-fleet-seed"
ROUTER_KEY = "Fleet-E2E-Router-Key-0123456789abcdef"  # test-only value (the fleet's inventory)
AUTH = bearer(ROUTER_KEY)
ADMIN_KEY = "Fleet-E2E-Router-Admin-Key-0123456789"  # test-only value (the fleet's inventory)
ADMIN_AUTH = bearer(ADMIN_KEY)


def docker(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, check=False, timeout=timeout)
    assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


def _seed_inventory(tmp: Path, name: str) -> Path:
    """An inventory naming the lab host ``name`` alone, with the lab's group_vars; its path."""
    (tmp / "group_vars").mkdir(parents=True, exist_ok=True)
    servers = {"children": {"lab": {"hosts": {name: docker_host(name)}}}}
    write_yaml(tmp / "seed.yml", {"all": {"children": {"sglang_servers": servers}}})
    write_yaml(tmp / "group_vars" / "lab.yml", lab_group_vars())
    link = tmp / "group_vars" / "all"
    if not link.exists():
        link.symlink_to(REPO / "group_vars" / "all")
    return tmp / "seed.yml"


def _commit(seed: Path | str, tmp: Path) -> None:
    """The double and the tokenizer onto ``seed`` (a converged lab host), then ``seed`` committed to
    IMAGE_TAG with its unit disabled: a replica made from the image must not start the real launcher
    at boot (no GPU: SGLang's import and a failure, five times over, on every replica), its first
    `up` enables it with the double. A commit that fails enables the seed's unit again (the verify
    lab's host goes on as it was); after one that succeeds, _rebase replaces the verify lab's host by a
    container of the image and enables it there, and build_replica_image's own seed is removed."""
    name = str(seed)
    double = playbook("-i", str(_seed_inventory(tmp, name)), "playbooks/lab/install_double.yml")
    assert double.returncode == 0, double.stdout[-6000:]
    docker("exec", name, "systemctl", "disable", "--quiet", "sglang-kimi.service", timeout=120)
    try:
        docker("commit", "--message", "sglang-deploy e2e: a converged replica", name, IMAGE_TAG, timeout=1800)
    except BaseException:  # no image: the seed goes on as it was (the verify lab's host keeps its tests)
        subprocess.run(
            ["docker", "exec", name, "systemctl", "enable", "--quiet", "sglang-kimi.service"],
            capture_output=True,
            check=False,
            timeout=120,
        )
        raise


def _rebase(seed: str) -> None:
    """``seed`` replaced by a container of IMAGE_TAG of the same name and run options (`sglang-deploy lab
    create --image`), its unit enabled again: the committed host, rebooted. The whole stack (~11 GB)
    is then stored once, in the image's layer, instead of twice (the seed's writable layer and the
    image): the fleet costs the disk only its replicas' small writable layers."""
    docker("rm", "-f", "-v", seed, timeout=600)
    made = cli("lab", "create", "--name", seed, "--image", IMAGE_TAG)
    assert made.returncode == 0, made.stdout + made.stderr
    docker("exec", seed, "systemctl", "enable", "--quiet", "sglang-kimi.service", timeout=120)


def build_replica_image(tmp: Path, seed: str = "") -> str:
    """IMAGE_TAG from ``seed``, a lab host site.yml has just converged (scripts/test: the verify lab's,
    before its tests change it; committed, then rebased on the image: _rebase), or from a fresh seed
    host converged here by site.yml (the whole stack, lab mode) and removed once committed; its tag."""
    started = time.monotonic()
    if seed:
        _commit(seed, tmp)
        _rebase(seed)
    else:
        subprocess.run(["docker", "rm", "-f", "-v", SEED], capture_output=True, check=False)
        made = cli("lab", "create", "--name", SEED)
        assert made.returncode == 0, made.stderr
        try:
            converge = playbook("-i", str(_seed_inventory(tmp, SEED)), "site.yml", timeout=5400)
            assert converge.returncode == 0, converge.stdout[-6000:]
            _commit(SEED, tmp)
        finally:
            subprocess.run(["docker", "rm", "-f", "-v", SEED], capture_output=True, check=False)
    print(f"replica image {IMAGE_TAG} made from {seed or SEED} in {time.monotonic() - started:.0f}s")
    return IMAGE_TAG


# What a replica image needs besides its own size (the seed's writable layer, copied by `docker commit`):
# room for what the other lanes may write meanwhile - one more whole-stack install, a molecule scenario's
# (about 12 GB) - and a floor. The seed is rebased on the image (_rebase), which gives the copy back
# minutes later, so only the commit's window needs the room. The measured peaks and the runs the check
# skipped: bench/results/make-test-history.md.
DISK_MARGIN_BYTES = 13 * 1024**3
# How long the check waits for the other lanes to give disk back (a molecule scenario destroyed, a lab
# host removed) before it gives up (SGLANG_TEST_FLEET_WAIT_S), and how often it looks
ROOM_WAIT_ENV = "SGLANG_TEST_FLEET_WAIT_S"
ROOM_WAIT_S = 1200.0
ROOM_POLL_S = 30.0


def room_shortfall(free: int, size: int, margin: int = DISK_MARGIN_BYTES) -> str:
    """'' when ``free`` bytes hold an image of ``size`` bytes and ``margin`` beside it, else why not."""
    if free >= size + margin:
        return ""
    gib = 1024**3
    return (
        f"{free / gib:.1f} GiB free, {(size + margin) / gib:.1f} GiB needed (the seed's "
        f"{size / gib:.1f} GiB + {margin / gib:.0f} GiB for the lanes that run meanwhile)"
    )


def room_for_image(
    seed: str,
    wait_s: float | None = None,
    poll_s: float = ROOM_POLL_S,
    free_bytes: Callable[[str], int] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """'' when docker's storage has room for an image of ``seed`` beside the other lanes (its writable
    layer + DISK_MARGIN_BYTES free), else why not (a disk that fills up fails every lane at once). Short
    of room, it looks again every ``poll_s`` for up to ``wait_s`` (default: SGLANG_TEST_FLEET_WAIT_S,
    else ROOM_WAIT_S): the other lanes give their disk back as their scenarios and hosts end."""
    size = int(docker("inspect", "--size", "--format", "{{.SizeRw}}", seed, timeout=600).stdout.strip() or 0)
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip() or "/var/lib/docker"
    free_of = free_bytes or (lambda path: shutil.disk_usage(path).free)
    wait = float(os.environ.get(ROOM_WAIT_ENV, ROOM_WAIT_S)) if wait_s is None else wait_s
    started = time.monotonic()
    while why := room_shortfall(free_of(root), size):
        waited = time.monotonic() - started
        if waited + poll_s > wait:
            return (
                f"no room for the fleet's replica image beside the other lanes in {root}: {why}; "
                f"waited {waited:.0f} s of {wait:.0f} s ({ROOM_WAIT_ENV}) for the other lanes to give "
                "disk back"
            )
        sleep(poll_s)
    return ""


def publish_no_room(shared: Path, why: str, required: bool) -> None:
    """Tell the worker waiting in await_replica_image that there is no image, and why: its tests skip,
    or fail when the fleet is ``required`` (scripts/test under CI: a passing run then proves the roll
    ran)."""
    if required:
        publish_error(shared, f"the fleet is required ({REQUIRED_ENV}=1): {why}")
    else:
        (shared / "replica-image.skip").write_text(why)


def publish_error(shared: Path, why: str) -> None:
    """Tell the worker waiting in await_replica_image that no image will come, and why: its tests fail
    at once instead of waiting out await_replica_image's timeout (past the e2e step's own limit). A long
    ``why`` keeps its start (what failed) and its end (the last output)."""
    text = why if len(why) <= 4000 else f"{why[:1000]}\n[...]\n{why[-3000:]}"
    (shared / "replica-image.error").write_text(text)


def converge_seed(shared: Path | None, converge: Callable[[], Run]) -> Run:
    """``converge()``: the seed host's first site.yml. One that raises (its guard ran out) publishes
    its error in ``shared`` first when a fleet's worker waits there (SGLANG_E2E_LAB_SEEDS_FLEET=1), so
    that worker fails at once instead of waiting for a seed that will not come."""
    try:
        return converge()
    except BaseException as exc:
        if shared is not None:
            publish_error(shared, f"the seed did not converge: {type(exc).__name__}: {exc}")
        raise


def publish_replica_image(shared: Path, build: Callable[[], str]) -> str:
    """Build the image and publish its tag in ``shared`` (the xdist workers' common directory) for a
    worker waiting in await_replica_image; a build that fails publishes its error instead."""
    try:
        tag = build()
    except BaseException as exc:
        publish_error(shared, f"{type(exc).__name__}: {exc}")
        raise
    (shared / "replica-image.tag.new").write_text(tag)
    (shared / "replica-image.tag.new").rename(shared / "replica-image.tag")
    return tag


def await_replica_image(shared: Path, timeout_s: float = 5400) -> str:
    """The tag another worker published in ``shared`` (publish_replica_image); fails with its error,
    or after ``timeout_s``; skips the fleet's tests, saying why, when it published no room
    (publish_no_room)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (shared / "replica-image.tag").is_file():
            return (shared / "replica-image.tag").read_text()
        error = shared / "replica-image.error"
        assert not error.is_file(), f"the replica image was not made: {error.read_text()}"
        if (shared / "replica-image.skip").is_file():
            pytest.skip((shared / "replica-image.skip").read_text())
        time.sleep(10)
    raise AssertionError(f"no replica image was published in {shared} within {timeout_s:.0f} s")


def remove_replica_image(tag: str) -> None:
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, check=False)


def make_fleet(  # noqa: PLR0917 - a test fixture's one constructor
    tmp: Path,
    prefix: str,
    replicas: int,
    image: str,
    server_vars: dict[str, Any],
    all_vars: dict[str, Any] | None = None,
    router_vars: dict[str, Any] | None = None,
) -> Fleet:
    """The router (base lab image) and ``replicas`` containers from ``image``, on a network of their
    own (lab_fleet.create_containers, after removing any of an earlier run); then the README's command,
    `sglang-deploy up` with the double: the router role installs and starts the router, each replica
    starts the double behind its unit and records its baseline, and Stage 6 registers the verified
    replicas. Every replica is then healthy in the router."""
    fleet = Fleet.named(prefix, replicas, tmp, ROUTER_KEY, ADMIN_KEY)
    started = time.monotonic()
    remove_fleet(fleet)
    create_containers(fleet, REPO, replica_image=image)
    # scripts/test runs the fleet beside the verify lab, lane 1 and molecule on 2 CPUs: as the verify lab's
    # host (test_verify_lab.py's `double`), the fleet's containers get 8x the default CPU weight, so that a
    # replica's gate during the roll judges the release, not the load the other lanes put on the machine
    for name in [fleet.router, *fleet.replicas]:
        docker("update", "--cpu-shares", str(8 * 1024), name, timeout=60)
    inventory = write_inventory(fleet, REPO, server_vars, all_vars, router_vars)
    first = cli("up", "-i", str(inventory), "-e", fleet.extra("double", double_vars()),
                "--artifacts", str(tmp / "art-first"), "--progress", "plain", timeout=3600)  # fmt: skip
    assert first.returncode == 0, first.stdout[-8000:]
    expected = fleet.expected_workers()
    assert fleet.wait_workers(expected) == expected, fleet.workers()
    fleet.created_s = time.monotonic() - started
    print(f"fleet {prefix} ready in {fleet.created_s:.0f}s")
    return fleet


def replica_image_from_env() -> str | None:
    return os.environ.get(IMAGE_ENV) or None
