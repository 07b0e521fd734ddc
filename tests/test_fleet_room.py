"""The e2e's disk check before the fleet's replica image (tests/e2e/fleet_lab.py room_for_image,
publish_no_room, await_replica_image): it waits for the other lanes to give disk back, and with
SGLANG_E2E_FLEET_REQUIRED=1 (scripts/test's SGLANG_TEST_FLEET=required, .ci/run) no room fails the
fleet's tests instead of skipping them; a seed that does not converge fails them at once; a run past
its guard is recorded and says where it was (e2e_lab.run_recorded). docker is replaced by a stand-in
that answers the two questions the check asks (the seed's size, docker's root); the free space by a
list of answers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
import e2e_lab
import fleet_lab

GIB = 1024**3


@pytest.fixture
def docker_answers(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """fleet_lab.docker answering `inspect --size` (an 11 GiB seed) and `info` (its root dir)."""
    calls: list[list[str]] = []

    def docker(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        out = str(11 * GIB) if args[0] == "inspect" else "/var/lib/docker"
        return subprocess.CompletedProcess(["docker", *args], 0, stdout=out + "\n", stderr="")

    monkeypatch.setattr(fleet_lab, "docker", docker)
    return calls


def test_shortfall_names_free_and_needed() -> None:
    assert fleet_lab.room_shortfall(24 * GIB + 1, 11 * GIB, margin=13 * GIB) == ""
    why = fleet_lab.room_shortfall(20 * GIB, 11 * GIB, margin=13 * GIB)
    assert (
        why
        == "20.0 GiB free, 24.0 GiB needed (the seed's 11.0 GiB + 13 GiB for the lanes that run meanwhile)"
    )


def test_waits_until_the_other_lanes_give_disk_back(docker_answers: list[list[str]]) -> None:
    free = iter([10 * GIB, 20 * GIB, 30 * GIB])
    slept: list[float] = []
    why = fleet_lab.room_for_image(
        "seed", wait_s=600, poll_s=30, free_bytes=lambda root: next(free), sleep=slept.append
    )
    assert why == ""
    assert slept == [30, 30]
    # the seed's size is read once, not at every look
    assert [c[0] for c in docker_answers] == ["inspect", "info"]


def test_gives_up_after_the_wait_saying_why(
    monkeypatch: pytest.MonkeyPatch, docker_answers: list[list[str]]
) -> None:
    looks: list[str] = []
    slept: list[float] = []

    def free(root: str) -> int:
        looks.append(root)
        return 5 * GIB

    why = fleet_lab.room_for_image("seed", wait_s=0, poll_s=30, free_bytes=free, sleep=slept.append)
    assert why.startswith(
        "no room for the fleet's replica image beside the other lanes in /var/lib/docker: 5.0 GiB"
    )
    assert "waited 0 s of 0 s (SGLANG_TEST_FLEET_WAIT_S)" in why
    assert looks == ["/var/lib/docker"]
    assert slept == []
    # the wait comes from the environment when the caller names none
    monkeypatch.setenv(fleet_lab.ROOM_WAIT_ENV, "0")
    assert "of 0 s" in fleet_lab.room_for_image("seed", free_bytes=free, sleep=slept.append)


def test_no_room_skips_or_fails_the_fleet(tmp_path: Path) -> None:
    skipped, required = tmp_path / "skip", tmp_path / "required"
    skipped.mkdir()
    required.mkdir()
    fleet_lab.publish_no_room(skipped, "5.0 GiB free, 24.0 GiB needed", required=False)
    with pytest.raises(pytest.skip.Exception, match=r"24\.0 GiB needed"):
        fleet_lab.await_replica_image(skipped, timeout_s=5)
    fleet_lab.publish_no_room(required, "5.0 GiB free, 24.0 GiB needed", required=True)
    with pytest.raises(
        AssertionError, match=r"the fleet is required \(SGLANG_E2E_FLEET_REQUIRED=1\): 5.0 GiB"
    ):
        fleet_lab.await_replica_image(required, timeout_s=5)


def test_scripts_test_requires_the_fleet_for_ci() -> None:
    """.ci/run asks for the roll as required; scripts/test hands it to the e2e as REQUIRED_ENV."""
    repo = Path(__file__).resolve().parents[1]
    assert 'export SGLANG_TEST_FLEET="${SGLANG_TEST_FLEET:-required}"' in (repo / ".ci/run").read_text()
    script = (repo / "scripts/test").read_text()
    assert f"!= required ]] || export {fleet_lab.REQUIRED_ENV}=1" in script


def test_a_seed_converge_past_its_guard_fails_the_waiting_fleet_at_once(tmp_path: Path) -> None:
    """The CI run of eb8af7f: the verify lab's first site.yml ran past its guard; the fleet's worker then
    waited for a seed that never came until the e2e step's limit stopped everything, unprinted."""

    def converge() -> subprocess.CompletedProcess[str]:  # as run_recorded fails: the guard, 8000 characters
        guard = "ansible-playbook site.yml ran past its 1800 s guard; its last output:"
        raise AssertionError(f"{guard}\n{'x' * 8000}END")

    with pytest.raises(AssertionError):
        fleet_lab.converge_seed(tmp_path, converge)
    started = time.monotonic()
    said = r"(?s)the seed did not converge: AssertionError: ansible-playbook site\.yml .*\[\.\.\.\]\nx+END"
    with pytest.raises(AssertionError, match=said):
        fleet_lab.await_replica_image(tmp_path, timeout_s=60)
    assert time.monotonic() - started < 5
    done = subprocess.CompletedProcess(["ansible-playbook"], 2, stdout="", stderr="")
    other = tmp_path / "other"
    other.mkdir()
    assert fleet_lab.converge_seed(other, lambda: done) is done  # a run that returns publishes nothing itself
    assert not list(other.iterdir())


def test_a_run_past_its_guard_is_recorded_and_fails_with_its_last_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(e2e_lab, "ARTIFACTS", tmp_path)
    args = ("-c", "echo TASK [sglang_stack : Install the stack]; sleep 30")
    said = r"ran past its 1 s guard; its last output:\n.*Install the stack"
    with pytest.raises(AssertionError, match=said):
        e2e_lab.run_recorded("sh", Path("/bin/sh"), args, {"PATH": "/usr/bin:/bin"}, timeout=1)
    _test, command, seconds, rc = (tmp_path / "e2e-runs.tsv").read_text().rstrip("\n").split("\t")
    assert command.startswith("sh -c echo TASK")
    assert rc == "timeout"
    assert 1 <= float(seconds) < 10
    stopped = (tmp_path / "e2e-timeouts.log").read_text().splitlines()
    assert stopped[0].endswith(f": sh {' '.join(args)} (guard 1 s), its last lines:")
    assert stopped[1:] == ["TASK [sglang_stack : Install the stack]"]
    ran = e2e_lab.run_recorded("sh", Path("/bin/sh"), ("-c", "exit 3"), {"PATH": "/usr/bin:/bin"}, timeout=10)
    assert ran.returncode == 3
    assert (tmp_path / "e2e-runs.tsv").read_text().splitlines()[1].endswith("\t3")
