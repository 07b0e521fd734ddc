"""plugins/modules/deploy_state.py: the deployed state as one transaction, on real files.

A release tree like the stack role's (releases/<id>/.complete, receipt.json, .launch-ok-<hash>), a
unit with a drop-in directory, an NCCL env file, a key file and launch-args.json under a temp dir: the
snapshot records them (copies 0600 in a 0700 dir), changes of every kind are put back by one restore
(files, modes, a removed file, an added drop-in, the link), the rollback rules refuse what they must,
and the verdict records (last good, known-bad) behave as the roles read them.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from ansible.plugins.filter.core import to_json  # type: ignore[import-untyped]
from modload import REPO, load_module

ds = load_module("deploy_state_module", REPO / "plugins/modules/deploy_state.py")
combination_rule = importlib.import_module(
    "ansible_collections.sglang.deploy.plugins.module_utils.combination"
)
known_bad_filter = importlib.import_module("ansible_collections.sglang.deploy.plugins.filter.deploy_state")
ARGV = ["--model-path", "/models/m", "--tp-size", "2", "--api-key", "${SGLANG_API_KEY}"]


def release(root: Path, rid: str, argv: list[str] | None = None, argv_ok: bool = True) -> None:
    argv = ARGV if argv is None else argv
    folder = root / "releases" / rid
    folder.mkdir(parents=True)
    (folder / ".complete").write_text("")
    (folder / "receipt.json").write_text(json.dumps({"release_id": rid, "checks": {"argv_ok": argv_ok}}))
    (folder / ds.launch_marker(argv)).write_text("")


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "opt"
    etc = tmp_path / "etc"
    (etc / "unit.service.d").mkdir(parents=True)
    release(root, "r1")
    release(root, "r2")
    os.symlink("releases/r1", root / "current")
    files = {
        "unit": etc / "unit.service",
        "nccl": etc / "nccl.env",
        "key": etc / "api-key.env",
        "args": etc / "launch-args.json",
    }
    files["unit"].write_text("[Service]\nExecStart=/opt/current/venv/bin/python -m sglang.launch_server\n")
    files["nccl"].write_text("NCCL_P2P_LEVEL=SYS\n")
    files["key"].write_text("SGLANG_API_KEY=secret-0123456789abcdef\n")
    files["key"].chmod(0o600)
    files["args"].write_text(json.dumps({"launch_spec": {"server_args": ARGV}}))
    params = {
        "state_dir": str(tmp_path / "state"),
        "files": [str(p) for p in files.values()],
        "dirs": [str(etc / "unit.service.d")],
        "link": str(root / "current"),
        "launch_args": str(files["args"]),
    }
    return {"root": root, "etc": etc, "files": files, "params": params, "state": ds.DeployState(params)}


def test_snapshot_records_the_state_in_force_with_private_copies(host: dict[str, Any]) -> None:
    state = host["state"]
    changed, why, now = state.snapshot(check=False)
    assert changed, why
    manifest = state.manifest()
    assert manifest["release"] == "r1"
    assert manifest["digest"] == now["digest"]
    assert stat.S_IMODE(os.stat(state.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state.snap).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state.snap / "files").st_mode) == 0o700
    for entry in manifest["entries"]:
        copy = state.snap / "files" / entry["copy"]
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        assert copy.read_bytes() == Path(entry["path"]).read_bytes()
    # the same state again: nothing written
    assert state.snapshot(check=False)[0] is False


def test_a_snapshot_of_a_lower_overlay_layer_is_replaced(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rename(2) of a directory from an image's lower layer fails with EXDEV on overlayfs (seen on a
    replica container made from a converged image): the old snapshot is copied aside instead."""
    state = host["state"]
    state.snapshot(check=False)
    assert state.mark_good(check=False, verdict="passed")
    host["files"]["nccl"].write_text("NCCL_P2P_LEVEL=NVL\n")
    real = os.replace

    def overlay_replace(src: Any, dst: Any) -> None:
        if Path(src) == state.snap:  # the lower-layer directory
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real(src, dst)

    monkeypatch.setattr(ds.os, "replace", overlay_replace)
    # marking the new state good records its snapshot at once (through the copy-aside path)
    assert state.mark_good(check=False, verdict="passed")
    nccl = next(e for e in state.manifest()["entries"] if e["path"] == str(host["files"]["nccl"]))
    assert (state.snap / "files" / nccl["copy"]).read_text() == "NCCL_P2P_LEVEL=NVL\n"
    assert [p.name for p in state.dir.iterdir() if p.name.startswith(".snapshot.old")] == []


def test_an_unverified_state_never_replaces_the_last_good_snapshot(host: dict[str, Any]) -> None:
    state = host["state"]
    state.snapshot(check=False)
    assert state.mark_good(check=False, verdict="passed")
    host["files"]["nccl"].write_text("NCCL_P2P_LEVEL=NVL\n")
    changed, why, _in_force = state.snapshot(check=False)
    assert not changed
    assert "never verified good" in why
    # verified now: marking it good records its snapshot at once, so the next snapshot changes nothing
    assert state.mark_good(check=False, verdict="passed")
    nccl = next(e for e in state.manifest()["entries"] if e["path"] == str(host["files"]["nccl"]))
    assert (state.snap / "files" / nccl["copy"]).read_text() == "NCCL_P2P_LEVEL=NVL\n"
    changed, why, _in_force = state.snapshot(check=False)
    assert not changed
    assert "already" in why


def test_one_restore_puts_back_files_modes_a_removed_file_a_dropin_and_the_link(host: dict[str, Any]) -> None:
    state, files, etc, root = host["state"], host["files"], host["etc"], host["root"]
    state.snapshot(check=False)
    before = state.in_force()["digest"]
    files["unit"].write_text("[Service]\nExecStart=/bad\n")
    files["nccl"].chmod(0o666)
    files["key"].unlink()
    (etc / "unit.service.d" / "override.conf").write_text("[Service]\nEnvironment=X=1\n")
    ds.switch_link(str(root / "current"), "releases/r2")
    planned, _snapshot = state.restore(check=True)
    assert files["unit"].read_text() == "[Service]\nExecStart=/bad\n"  # check mode changed nothing
    items, _snapshot = state.restore(check=False)
    assert {i["path"] for i in items} == {i["path"] for i in planned}
    assert {Path(i["path"]).name for i in items} == {
        "unit.service", "nccl.env", "api-key.env", "override.conf", "current",
    }  # fmt: skip
    assert state.in_force()["digest"] == before
    assert os.readlink(root / "current") == "releases/r1"
    assert stat.S_IMODE(files["key"].stat().st_mode) == 0o600
    assert not (etc / "unit.service.d" / "override.conf").exists()
    assert state.restore(check=False)[0] == []


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda r: (r / "releases/r1/.complete").unlink(), "not complete"),
        (
            lambda r: (r / "releases/r1/receipt.json").write_text(json.dumps({"checks": {"argv_ok": False}})),
            "checks failed",
        ),
        (lambda r: (r / "releases/r1" / ds.launch_marker(ARGV)).unlink(), "never parsed the launch argv"),
    ],
)
def test_the_rollback_rules_refuse_before_anything_changes(
    host: dict[str, Any], damage: Any, message: str
) -> None:
    state, files = host["state"], host["files"]
    state.snapshot(check=False)
    files["unit"].write_text("changed\n")
    damage(host["root"])
    with pytest.raises(RuntimeError, match=message):
        state.restore(check=False)
    assert files["unit"].read_text() == "changed\n"


def test_a_first_deployment_has_nothing_to_restore(tmp_path: Path) -> None:
    params = {"state_dir": str(tmp_path / "s"), "files": [str(tmp_path / "unit")], "dirs": [],
              "link": str(tmp_path / "current"), "launch_args": None}  # fmt: skip
    state = ds.DeployState(params)
    assert state.snapshot(check=False)[0]
    (tmp_path / "unit").write_text("x")
    with pytest.raises(RuntimeError, match="no release link"):
        state.restore(check=False)


def test_known_bad_records_match_on_the_combination(host: dict[str, Any]) -> None:
    state = host["state"]
    bad = {"release_id": "r2", "launch_spec_sha256": "a" * 64, "env_sha256": "b" * 64}
    assert state.mark_bad(check=False, combination=bad, reason="gate failed at C=30") == (
        True, "recorded known-bad",
    )  # fmt: skip
    again = state.mark_bad(check=False, combination=bad, reason="again")
    assert again == (False, "recorded known-bad already")
    status = state.status(None, bad)
    assert status["known_bad_match"]["reason"] == "gate failed at C=30"
    assert state.status(None, {**bad, "env_sha256": "c" * 64})["known_bad_match"] is None
    assert stat.S_IMODE((state.dir / "known-bad.json").stat().st_mode) == 0o600


def test_the_launch_combination_is_the_roles_earlier_jinja(host: dict[str, Any]) -> None:
    """What the role computed in Jinja before the module did (deploy_state's combination.yml, records on
    hosts are written with it): `{'argv': argv, 'environment': env} | to_json | hash('sha256')`, this run's
    release and NCCL env digest first, the host's else ("absent" without the file)."""
    state, files = host["state"], host["files"]
    env = {"NCCL_P2P_LEVEL": "SYS", "NOTE": 'caf\u00e9 \u2014 "q"'}  # to_json escapes both
    argv = ["/opt/current/venv/bin/python", *ARGV]
    launch = {"argv": argv, "environment": env, "env_file": str(files["nccl"])}
    want = hashlib.sha256(to_json({"argv": launch["argv"], "environment": env}).encode()).hexdigest()
    ours = ds.launch_combination(launch, state.in_force())
    assert ours == {
        "release_id": "r1",
        "launch_spec_sha256": want,
        "env_sha256": hashlib.sha256(files["nccl"].read_bytes()).hexdigest(),
    }
    run = {**launch, "release_id": "r2", "env_sha256": "e" * 64}
    assert ds.launch_combination(run, state.in_force())["release_id"] == "r2"
    assert ds.launch_combination(run, state.in_force())["env_sha256"] == "e" * 64
    files["nccl"].unlink()
    assert ds.launch_combination(launch, state.in_force())["env_sha256"] == "absent"


def test_the_controller_known_bad_check_is_the_modules_own(host: dict[str, Any]) -> None:
    """The filter sglang.deploy.deploy_state_known_bad (the known_bad entry point, on the controller, from
    the status the run read when it took the lock) gives the module's combination and match."""
    state, files = host["state"], host["files"]
    launch = {
        "argv": ["/opt/current/venv/bin/python", *ARGV],
        "environment": {},
        "env_file": str(files["nccl"]),
    }
    combination = ds.launch_combination(launch, state.in_force())
    state.mark_bad(check=False, combination=combination, reason="gate failed at C=4")
    status = state.status(None, None)
    decided = combination_rule.known_bad(status, launch)
    assert decided["combination"] == combination
    assert decided["match"]["reason"] == "gate failed at C=4"
    assert decided["match"] == state.status(None, combination)["known_bad_match"]
    # another release (this run's) is another combination: no match
    other = combination_rule.known_bad(status, {**launch, "release_id": "r2"})
    assert other["combination"]["release_id"] == "r2"
    assert other["match"] is None
    filters = known_bad_filter.FilterModule().filters()
    assert filters["deploy_state_known_bad"] is combination_rule.known_bad


def test_switch_follows_the_same_rules_and_names_the_allowed(host: dict[str, Any]) -> None:
    state, root = host["state"], host["root"]
    release(root, "r3", argv=["--other"])
    assert ds.allowed_releases(str(root / "current"), ARGV) == ["r2"]
    with pytest.raises(RuntimeError, match=r"never parsed.*Allowed: r2"):
        state.switch(False, "r3", ARGV)
    assert state.switch(False, "r2", ARGV)[0]["path"].endswith("current")
    assert os.readlink(root / "current") == "releases/r2"


def test_the_launch_marker_is_the_stack_roles() -> None:
    """The stack role: `.launch-ok-{{ (argv | to_json) | hash('sha256') | truncate(16, true, '') }}`."""
    expected = ".launch-ok-" + hashlib.sha256(to_json(ARGV).encode()).hexdigest()[:16]
    assert ds.launch_marker(ARGV) == expected


def kept_key(host: dict[str, Any]) -> Any:
    """The roles' description: the key file is kept (outside the state), not managed."""
    files = [p for p in host["params"]["files"] if p != str(host["files"]["key"])]
    return ds.DeployState({**host["params"], "files": files, "kept": [str(host["files"]["key"])]})


def test_a_rotated_key_stays_in_force_with_the_restored_release(host: dict[str, Any]) -> None:
    """A run that rotates the key and fails verify: the restore puts the release and the unit back
    and leaves the key file as this run wrote it (a rollback never brings a retired key back)."""
    state, files, root = kept_key(host), host["files"], host["root"]
    state.snapshot(check=False)
    assert str(files["key"]) not in {e["path"] for e in state.manifest()["entries"]}
    assert state.mark_good(check=False, verdict="passed")
    files["key"].write_text("SGLANG_API_KEY=rotated-fedcba9876543210\n")
    # the key alone does not change the state (the verified state is still in force)
    assert state.status(None, None)["in_force_is_verified"]
    files["unit"].write_text("[Service]\nExecStart=/bad\n")
    ds.switch_link(str(root / "current"), "releases/r2")
    items, _snapshot = state.restore(check=False)
    assert {Path(i["path"]).name for i in items} == {"unit.service", "current"}
    assert files["key"].read_text() == "SGLANG_API_KEY=rotated-fedcba9876543210\n"
    assert os.readlink(root / "current") == "releases/r1"


def test_an_older_snapshot_with_the_key_never_restores_it(host: dict[str, Any]) -> None:
    """A snapshot taken before the key was kept (it has the key file): the restore skips it."""
    host["state"].snapshot(check=False)  # the key file among the managed files
    state, files = kept_key(host), host["files"]
    assert str(files["key"]) in {e["path"] for e in state.manifest()["entries"]}
    files["key"].write_text("SGLANG_API_KEY=rotated-fedcba9876543210\n")
    assert state.restore(check=False)[0] == []
    assert files["key"].read_text() == "SGLANG_API_KEY=rotated-fedcba9876543210\n"
    files["key"].unlink()
    assert state.restore(check=False)[0] == []
    assert not files["key"].exists()


def test_the_last_good_combination_is_never_recorded_known_bad(host: dict[str, Any]) -> None:
    state = host["state"]
    good = {"release_id": "r1", "launch_spec_sha256": "a" * 64, "env_sha256": "b" * 64}
    assert state.mark_good(check=False, verdict="passed", combination=good)
    assert json.loads((state.dir / "verified.json").read_text())["combination"] == good
    # a failed verdict of the same combination (a key-only change, a host fault): not recorded
    changed, note = state.mark_bad(check=False, combination=good, reason="http 401")
    assert not changed
    assert note.startswith(
        "not recorded known-bad: it is the last good combination; the failure is not the combination's"
    )
    assert not (state.dir / "known-bad.json").exists()
    # another combination fails: recorded
    assert state.mark_bad(check=False, combination={**good, "release_id": "r2"}, reason="gate")[0]
    # the same state marked good with its combination (an older verified.json had none): rewritten
    (state.dir / "verified.json").write_text(json.dumps({"digest": state.in_force()["digest"]}))
    assert state.mark_good(check=False, verdict="passed", combination=good)
    assert not state.mark_good(check=False, verdict="passed", combination=good)
