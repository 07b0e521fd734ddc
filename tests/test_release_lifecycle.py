"""The release lifecycle of the stack and the router (issue 33 item 1): the pure part
(plugins/module_utils/release.py) and the module sglang.deploy.release run as the roles run it
(through ansible, against directories under tmp_path, with a test double of uv that records its argv
and builds a stand-in venv, named as such). Build into a new directory with the partial directories of
interrupted builds removed first, receipt then .complete, the prune with the one protect rule, the
repair, the tools; check mode predicts each step and changes nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module, run_module

release = load_module("release_lifecycle", REPO / "plugins/module_utils/release.py")

# Test double of uv: `venv` makes venv/bin/python, `pip sync` records its argv; UV_DOUBLE_FAIL=1 makes
# the sync fail as a hash mismatch does; `--version` answers UV_DOUBLE_VERSION.
UV_DOUBLE = """#!/bin/sh
echo "$*" >> "$UV_DOUBLE_LOG"
case "$1" in
  --version) echo "uv ${UV_DOUBLE_VERSION:-0.9.7} (test double)";;
  venv) mkdir -p venv/bin && ln -sf /bin/true venv/bin/python;;
  pip) if [ "${UV_DOUBLE_FAIL:-0}" = 1 ]; then echo "error: Hash mismatch for idna" >&2; exit 1; fi;;
esac
"""


@pytest.fixture
def uv(tmp_path: Path) -> Path:
    path = tmp_path / "uv-double"
    path.write_text(UV_DOUBLE)
    path.chmod(0o755)
    return path


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"UV_DOUBLE_LOG": str(tmp_path / "uv.log"), **extra}


def complete_release(releases: Path, rid: str, mtime: float) -> Path:
    (releases / rid).mkdir(parents=True)
    marker = releases / rid / ".complete"
    marker.write_text(rid + "\n")
    os.utime(marker, (mtime, mtime))
    return releases / rid


# --- pure part -------------------------------------------------------------------------------------


def test_scan_lists_complete_and_partial_releases(tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    complete_release(releases, "a", 100)
    (releases / "b").mkdir()
    (releases / "stray-file").write_text("")
    (releases / "link").symlink_to("a")
    markers, partial = release.scan(str(releases))
    assert [m["path"] for m in markers] == [str(releases / "a/.complete")]
    assert markers[0]["mtime"] == 100
    assert partial == [str(releases / "b")]
    assert release.scan(str(tmp_path / "missing")) == ([], [])


def test_current_release(tmp_path: Path) -> None:
    current = tmp_path / "current"
    assert release.current_release(str(current)) == ""
    current.symlink_to("releases/abc/")
    assert release.current_release(str(current)) == "abc"
    current.unlink()
    current.write_text("")
    with pytest.raises(release.ReleaseError, match="exists and is not a symlink"):
        release.current_release(str(current))


def test_complete_writes_the_receipt_then_the_marker_and_never_rewrites(tmp_path: Path) -> None:
    rdir = tmp_path / "r1"
    with pytest.raises(release.ReleaseError, match="does not exist"):
        release.complete(str(rdir), "r1", {})
    rdir.mkdir()
    assert release.complete(str(rdir), "r1", {"b": 1, "a": "x"})
    assert (rdir / "receipt.json").read_text() == '{\n  "a": "x",\n  "b": 1\n}\n'
    assert (rdir / ".complete").read_text() == "r1\n"
    assert (rdir / ".complete").stat().st_mtime >= (rdir / "receipt.json").stat().st_mtime
    assert not release.complete(str(rdir), "r1", {"other": True})
    assert json.loads((rdir / "receipt.json").read_text()) == {"a": "x", "b": 1}
    assert sorted(p.name for p in rdir.iterdir()) == [".complete", "receipt.json"]  # no temporary left


def test_parsers_and_the_sync_command() -> None:
    out = "python3-venv ii \npython3-packaging un \nlibc6:amd64 ii \ng++ hi \npatch rc \n"
    assert release.missing_packages(out, ["python3-venv", "python3-packaging", "patch", "libc6", "g++"]) == [
        "python3-packaging",
        "patch",
    ]
    assert release.uv_version("uv 0.9.7 (0adb44480 2025-10-30)\n") == "0.9.7"
    assert release.uv_version("garbage") == ""
    assert release.sync_argv("/u", "/p", ["--only-binary", "x"], ["idna"]) == [
        "/u", "pip", "sync", "--python", "/p", "--require-hashes", "--compile-bytecode",
        "--reinstall-package=idna", "--only-binary", "x", "requirements.lock",
    ]  # fmt: skip


def test_remaining_lists_the_release_in_force_first_then_newest() -> None:
    markers = [{"path": "/r/a/.complete", "mtime": 1}, {"path": "/r/b/.complete", "mtime": 3}]
    assert release.remaining(markers, "/r/c", ["/r/a"]) == ["c", "b"]


# --- the module, as the roles run it ---------------------------------------------------------------


def build_args(tmp_path: Path, uv: Path, rid: str = "r2", **extra: Any) -> dict[str, Any]:
    return {
        "state": "built",
        "releases_dir": str(tmp_path / "releases"),
        "release_id": rid,
        "current": str(tmp_path / "current"),
        "python": "python3",
        "uv": str(uv),
        "uv_args": ["--only-binary", "sglang-router"],
        "lock_content": "idna==3.10 --hash=sha256:" + "0" * 64 + "\n",
        "files": [{"name": "requirements.in", "content": "idna\n"}],
        **extra,
    }


def test_built_predicts_in_check_mode_removes_partials_and_builds(tmp_path: Path, uv: Path) -> None:
    releases = tmp_path / "releases"
    complete_release(releases, "r1", 100)
    (releases / "r2" / "venv").mkdir(parents=True)  # this id's interrupted build
    (releases / "other").mkdir()  # another interrupted build
    (tmp_path / "current").symlink_to("releases/r1")

    res = run_module("release", build_args(tmp_path, uv), "--check")
    assert res["changed"], res
    assert "would remove incomplete release(s)" in res["msg"]
    assert "would build release r2" in res["msg"]
    assert res["previous"] == "r1"
    assert not res["built"]
    assert (releases / "other").exists()
    assert not (tmp_path / "uv.log").exists()

    res = run_module("release", build_args(tmp_path, uv), env=env_for(tmp_path))
    assert (res["changed"], res["built"], res["complete"]) == (True, True, False), res
    assert not (releases / "other").exists()
    assert (releases / "r2/requirements.lock").read_text().startswith("idna==3.10")
    assert (releases / "r2/requirements.in").read_text() == "idna\n"
    assert stat.S_IMODE((releases / "r2").stat().st_mode) == 0o755
    log = (tmp_path / "uv.log").read_text().splitlines()
    assert log[0] == "venv --quiet --python python3 venv"
    assert log[1].startswith(
        f"pip sync --python {releases}/r2/venv/bin/python --require-hashes --compile-bytecode"
    )
    assert log[1].endswith("--only-binary sglang-router requirements.lock")

    done = run_module(
        "release",
        {
            "state": "complete",
            "releases_dir": str(releases),
            "release_id": "r2",
            "receipt": {"release_id": "r2"},
        },
    )
    assert done["changed"]
    assert done["complete"]
    assert (releases / "r2/.complete").read_text() == "r2\n"

    again = run_module("release", build_args(tmp_path, uv), env=env_for(tmp_path))
    assert (again["changed"], again["built"], again["complete"]) == (False, False, True), again
    again = run_module("release", build_args(tmp_path, uv), "--check")
    assert not again["changed"], again


def test_a_failed_sync_leaves_no_release_directory(tmp_path: Path, uv: Path) -> None:
    res = run_module("release", build_args(tmp_path, uv), env=env_for(tmp_path, UV_DOUBLE_FAIL="1"))
    assert res.get("failed"), res
    assert "uv pip sync (the lock) failed" in res["msg"]
    assert "Hash mismatch" in res["msg"]
    assert not (tmp_path / "releases/r2").exists()


def test_built_refuses_a_current_that_is_not_a_link(tmp_path: Path, uv: Path) -> None:
    (tmp_path / "current").mkdir()
    res = run_module("release", build_args(tmp_path, uv), env=env_for(tmp_path))
    assert res.get("failed"), res
    assert "is not a symlink" in res["msg"]
    assert not (tmp_path / "releases/r2").exists()


def test_pruned_keeps_the_newest_and_every_protected_release(tmp_path: Path) -> None:
    releases = tmp_path / "releases"
    for i, rid in enumerate(["a", "b", "c", "d", "e"]):
        complete_release(releases, rid, 100 + i)
    args = {
        "state": "pruned",
        "releases_dir": str(releases),
        "release_id": "e",
        "keep": 2,
        "protected": ["a", ""],
    }
    res = run_module("release", args, "--check")
    assert res["changed"], res
    assert res["removed"] == [str(releases / "c"), str(releases / "b")]
    assert "would remove releases beyond the newest 2" in res["msg"]
    assert (releases / "b").exists()
    res = run_module("release", args)
    assert res["changed"], res
    assert res["releases"] == ["e", "d", "a"]
    assert sorted(p.name for p in releases.iterdir()) == ["a", "d", "e"]
    assert not run_module("release", args)["changed"]


def test_listed_reads_every_release_newest_first_and_changes_nothing(tmp_path: Path) -> None:
    """`sglang-deploy releases`' listing (playbooks/releases.yml): the complete releases newest first with
    their receipt's summary, a partial one after them, current's release marked; check mode the same."""
    releases = tmp_path / "releases"
    old = complete_release(releases, "old", 100)
    new = complete_release(releases, "new", 200)
    (releases / "partial").mkdir()
    (old / "receipt.json").write_text(
        json.dumps(
            {
                "installed_at": "2026-12-01T00:00:00Z",
                "checks": {"argv_ok": False},
                "versions": {"sglang": "0.5.9", "torch": "2.9.1+cu130", "extra": "x"},
                "sources": {"sglang_source": "git+https://example.invalid/sglang@bbe9c7eeb"},
                "patches": [{"name": "0001-a.patch"}, {"name": "0002-b.patch"}],
                "python": {"version": "3.12.3"},
            }
        )
    )
    (new / "receipt.json").write_text("not json")
    current = tmp_path / "current"
    current.symlink_to("releases/old")
    args = {"state": "listed", "releases_dir": str(releases), "current": str(current)}
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for flags in (("--check",), ()):
        res = run_module("release", args, *flags)
        assert not res["changed"], res
        listing = res["listing"]
        assert (listing["current"], listing["current_exists"]) == ("old", True)
        assert [r["id"] for r in listing["releases"]] == ["new", "old", "partial"]
        by_id = {r["id"]: r for r in listing["releases"]}
        assert by_id["old"]["current"]
        assert not by_id["new"]["current"]
        assert by_id["old"]["versions"] == {
            "sglang": "0.5.9",
            "torch": "2.9.1+cu130",
            "sgl-kernel": "",
            "flashinfer-python": "",
            "transformers": "",
        }
        assert by_id["old"]["checks_ok"] is False
        assert by_id["old"]["patches"] == ["0001-a.patch", "0002-b.patch"]
        assert (by_id["old"]["python"], by_id["old"]["completed_at"]) == ("3.12.3", 100)
        # a receipt that cannot be read is no receipt; an incomplete release has none
        assert by_id["new"]["checks_ok"] is None
        assert by_id["new"]["complete"]
        assert (by_id["partial"]["complete"], by_id["partial"]["completed_at"]) == (False, 0)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    current.unlink()
    empty = run_module("release", {**args, "releases_dir": str(tmp_path / "none")})["listing"]
    assert empty == {"current": "", "current_exists": False, "releases": []}


def test_synced_reports_the_drift_and_repairs_it(tmp_path: Path, uv: Path) -> None:
    rdir = complete_release(tmp_path / "releases", "r1", 100)
    (rdir / "zz.pth").write_text("import os\n")
    args = {
        "state": "synced", "releases_dir": str(tmp_path / "releases"), "release_id": "r1", "uv": str(uv),
        "reinstall": ["transformers"], "remove": [str(rdir / "zz.pth")],
        "drift": ["drift: release r1: transformers 4.57.0 installed, the lock pins 4.57.1"],
    }  # fmt: skip
    res = run_module("release", args, "--check")
    assert res["changed"], res
    assert res["msg"].splitlines() == [
        "drift: release r1: transformers 4.57.0 installed, the lock pins 4.57.1",
        "a real run would sync the venv to the lock reinstalling transformers pristine, remove zz.pth",
    ]
    assert (rdir / "zz.pth").exists()
    res = run_module("release", args, env=env_for(tmp_path))
    assert res["changed"]
    assert not (rdir / "zz.pth").exists()
    assert "--reinstall-package=transformers" in (tmp_path / "uv.log").read_text()
    outside = dict(args, remove=[str(tmp_path / "elsewhere")])
    assert "is not inside" in run_module("release", outside)["msg"]


def test_tools_installs_uv_only_when_its_version_differs(tmp_path: Path, uv: Path) -> None:
    venv = tmp_path / "tools/uv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/uv").symlink_to(uv)
    args = {"state": "tools", "uv_venv": str(venv), "uv_version": "0.9.7", "uv_requirements": "/nonexistent"}
    res = run_module("release", args, env=env_for(tmp_path))
    assert not res["changed"], res
    res = run_module("release", dict(args, uv_version="0.9.8"), "--check", env=env_for(tmp_path))
    assert res["changed"], res
    assert res["installed"] == ["uv 0.9.8"]
    assert res["msg"] == "would install: uv 0.9.8"


def test_release_id_is_one_rule_stable_and_input_sensitive() -> None:
    """One id rule for the stack and the router (the filter sglang.deploy.release_id): key order does
    not matter, any input does, and the value is the sha256 of the canonical JSON that the stack has
    always used (a golden value: a changed rule would rename every existing stack release)."""
    a = {"requirements_in": "torch==2.9.1\n", "patches": ["x"]}
    assert release.release_id(a) == "1ac9fa63bf8c"
    assert release.release_id(a) == release.release_id(dict(reversed(a.items())))
    assert release.release_id(a) != release.release_id({**a, "patches": ["y"]})
    assert len(release.release_id(a, 16)) == 16
    for bad in (4, 65):
        with pytest.raises(ValueError, match=f"length={bad}: allowed an integer from 8 to 64"):
            release.release_id(a, bad)


def test_the_roles_name_their_releases_through_the_one_rule() -> None:
    """Neither role hashes its own way: the stack's and the router's ids go through release_id (the
    stack's on the host, by its probe: module_utils/release.py's release_id, the filter's function)."""
    stack = (REPO / "roles/sglang_stack/vars/main.yml").read_text()
    router = (REPO / "roles/sglang_router/vars/main.yml").read_text()
    probe = (REPO / "plugins/modules/sglang_stack_audit.py").read_text()
    assert '__sglang_stack_release_id: "{{ __sglang_stack_probe_run.probe.lock.release_id }}"' in stack
    assert "from ansible_collections.sglang.deploy.plugins.module_utils.release import release_id" in probe
    assert "rid = release_id(" in probe
    rule = "{'router_lock_sha256': __sglang_router_lock | hash('sha256')} | sglang.deploy.release_id"
    assert rule in router
    for text in (stack, router):
        assert "hash('sha256'))[:12]" not in text


def test_a_tool_venv_installed_checked_and_reinstalled_on_drift(tmp_path: Path) -> None:
    """state=venv (the CUDA toolkit's wheels; uv's venv goes through the same installer): a real venv and
    a real hash-checked pip install, offline, of the pip wheel Python bundles (ensurepip): check mode
    reports, a run installs, an in-place venv is no change, a drift forces the reinstall."""
    import ensurepip  # noqa: PLC0415
    import hashlib  # noqa: PLC0415
    import sys  # noqa: PLC0415

    bundled = Path(ensurepip.__file__).parent / "_bundled"
    if not list(bundled.glob("pip-*.whl")):
        pytest.skip(f"this Python bundles no pip wheel in {bundled} (a distribution's stripped ensurepip)")
    wheel = next(bundled.glob("pip-*.whl"))
    version = wheel.name.split("-")[1]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"pip=={version} --hash=sha256:{digest}\n")
    venv = tmp_path / "venv"
    args = {
        "state": "venv", "venv": str(venv), "python": sys.executable, "requirements": str(requirements),
        "pip_args": ["--no-index", "--find-links", str(bundled)], "distribution": "pip", "version": version,
    }  # fmt: skip
    checked = run_module("release", args, "--check", "--diff")
    assert checked["changed"] is True, checked
    assert checked["msg"] == f"{venv}: pip not installed; would install pip {version} in {venv}"
    assert checked["diff"]["after"] == f"pip {version}\n"
    assert not venv.exists(), "check mode created the venv"
    done = run_module("release", args)
    assert done["changed"] is True, done
    assert done["installed"] == [f"pip {version}"]
    assert run_module("release", args)["changed"] is False
    drifted = dict(args, drift=[f"{venv}: bin/tool is missing"])
    checked = run_module("release", drifted, "--check")
    assert checked["msg"] == (
        f"drift: {venv}: bin/tool is missing; a real run reinstalls pip {version} in {venv}"
    )
    repaired = run_module("release", drifted)
    assert repaired["changed"] is True, repaired
    assert repaired["msg"].startswith("drift: ")
    assert "installed pip" in repaired["msg"]
    # a requirement whose hash does not match is refused by pip's hash-checking mode
    requirements.write_text(f"pip=={version} --hash=sha256:{'0' * 64}\n")
    refused = run_module("release", drifted)
    assert refused.get("failed") is True, refused
    assert f"installing pip {version} failed" in refused["msg"]
