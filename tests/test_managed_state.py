"""The state module sglang.deploy.managed_state: one description of a role's host state, compared
and applied in one pass (check mode = the same comparison, nothing written). Run on real temp files,
this machine's own accounts and, through ansible, the real module; systemctl is a recording test
double (no systemd PID 1 here). The last test is the issue's: a file added to a role's desired state
(a copy of the collection with roles/nccl_env/vars/main.yml edited, nothing else) is created,
reported by check mode after a tamper, and restored."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module

ms = load_module("managed_state_utils", REPO / "plugins/module_utils/managed_state.py")
diffs = load_module("diffs_for_state", REPO / "src/sglang_deploy/diffs.py")

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


def _by_path(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(i.get("path") or i.get("name")): i for i in result["items"]}


def test_check_reports_and_apply_makes_then_idempotent(tmp_path: Path) -> None:
    d = tmp_path / "etc" / "app"
    f = d / "app.conf"
    state = {
        "directories": [{"path": str(d), "mode": "0750", "owner": ME, "group": MY_GROUP}],
        "files": [{"path": str(f), "content": "a=1\n", "mode": "0640", "owner": ME, "group": MY_GROUP}],
        "links": [{"path": str(tmp_path / "current"), "src": "etc/app"}],
    }
    checked = ms.run(state, check=True)
    assert checked["changed"] is True
    assert not d.exists(), "check mode created the directory"
    items = _by_path(checked)
    assert items[str(d)]["why"] == ["missing"]
    assert items[str(f)]["why"] == ["missing"]
    assert items[str(tmp_path / "current")]["why"] == ["missing"]
    file_diff = next(x for x in checked["diff"] if x.get("after_header") == str(f))
    assert (file_diff["before"], file_diff["after"]) == ("", "a=1\n")

    applied = ms.run(state, check=False)
    assert [i["why"] for i in applied["items"]] == [i["why"] for i in checked["items"]]
    assert f.read_text() == "a=1\n"
    assert (_mode(d), _mode(f)) == ("0750", "0640")
    assert os.readlink(tmp_path / "current") == "etc/app"
    again = ms.run(state, check=False)
    assert again["changed"] is False
    assert again["diff"] == []
    assert all(i["why"] == [] for i in again["items"])


def test_content_mode_drift_each_named_and_only_it_repaired(tmp_path: Path) -> None:
    f = tmp_path / "x.env"
    state = {"files": [{"path": str(f), "content": "NCCL_A=1\nNCCL_B=2\n", "mode": "0644"}]}
    ms.run(state, check=False)
    inode = f.stat().st_ino
    f.chmod(0o600)
    checked = ms.run(state, check=True)
    assert checked["items"][0]["why"] == ["mode"]
    assert checked["diff"] == [
        {"before": {"path": str(f), "mode": "0600"}, "after": {"path": str(f), "mode": "0644"},
         "before_header": str(f), "after_header": str(f)}
    ]  # fmt: skip
    assert diffs.summarize_diff(checked["diff"]) == [f"{f}: mode: 0600 -> 0644"]
    assert _mode(f) == "0600"
    ms.run(state, check=False)
    assert _mode(f) == "0644"
    assert f.stat().st_ino == inode, "a mode-only repair rewrote the file"
    f.write_text("NCCL_A=1\nNCCL_B=9\n")
    checked = ms.run(state, check=True)
    assert checked["items"][0]["why"] == ["content"]
    summary = diffs.summarize_diff(checked["diff"])
    assert summary[0] == f"{f}: +1 -1 lines", summary
    assert "-NCCL_B=9" in summary[1], summary
    assert "+NCCL_B=2" in summary[2], summary
    ms.run(state, check=False)
    assert f.read_text() == "NCCL_A=1\nNCCL_B=2\n"
    assert f.stat().st_ino != inode, "content is written to a temp file and renamed"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another owner needs root")
def test_owner_and_group_drift(tmp_path: Path) -> None:
    f = tmp_path / "owned"
    state = {"files": [{"path": str(f), "content": "x", "owner": "root", "group": "root", "mode": "0644"}]}
    ms.run(state, check=False)
    os.chown(f, 65534, 65534)
    checked = ms.run(state, check=True)
    assert checked["items"][0]["why"] == ["owner", "group"]
    assert f.stat().st_uid == 65534
    ms.run(state, check=False)
    assert (f.stat().st_uid, f.stat().st_gid) == (0, 0)


def test_secret_content_never_returned(tmp_path: Path) -> None:
    key = tmp_path / "key.yaml"
    secret = '{"api-key": "Test-Secret-0123456789"}\n'
    state = {"files": [{"path": str(key), "secret_content": secret, "mode": "0600", "trigger": True}]}
    for check in (True, False):
        out = ms.run(state, check=check)
        assert "Test-Secret" not in json.dumps(out)
        assert out["items"][0]["secret"] is True
        assert out["triggered"] is True
    assert key.read_text() == secret
    assert _mode(key) == "0600"
    key.write_text('{"api-key": "Old-Secret-abcdef"}\n')
    out = ms.run(state, check=True)
    assert out["items"][0]["why"] == ["content"]
    text = json.dumps(out)
    assert "Old-Secret" not in text
    assert "Test-Secret" not in text
    assert ms.run(state, check=False)["changed"] is True
    assert ms.run(state, check=False)["triggered"] is False


def test_absent_and_prune(tmp_path: Path) -> None:
    legacy = tmp_path / "api-key.env"
    legacy.write_text("SGLANG_API_KEY=x\n")
    dropins = tmp_path / "app.service.d"
    dropins.mkdir()
    (dropins / "override.conf").write_text("[Service]\n")
    (dropins / "10-keep.conf").write_text("[Service]\n")
    (dropins / "ours.conf").write_text("[Service]\n")
    state = {
        "files": [{"path": str(dropins / "ours.conf"), "content": "[Service]\n"}],
        "absent": [str(legacy), {"path": str(tmp_path / "never-there")}],
        "prune": [{"path": str(dropins), "keep": ["10-keep.conf"], "trigger": True},
                  {"path": str(tmp_path / "no-such-dir")}],
    }  # fmt: skip
    out = ms.run(state, check=True)
    changed = {i["path"]: i["why"] for i in out["items"] if i["changed"]}
    assert changed == {str(legacy): ["present"], str(dropins / "override.conf"): ["present"]}
    assert out["triggered"] is True
    assert legacy.exists()
    assert (dropins / "override.conf").exists()
    ms.run(state, check=False)
    assert not legacy.exists()
    assert sorted(p.name for p in dropins.iterdir()) == ["10-keep.conf", "ours.conf"]
    assert ms.run(state, check=False)["changed"] is False


class RecordingSystemctl:
    """Test double of systemctl (no systemd PID 1 on this machine): answers is-enabled from its own
    table and records every other call."""

    def __init__(self, enabled: str) -> None:
        self.enabled = enabled
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[:2] == ["systemctl", "is-enabled"]:
            return (0 if self.enabled == "enabled" else 1), self.enabled + "\n", ""
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "enable"]:
            self.enabled = "enabled"
        return 0, "", ""


def test_unit_reload_only_when_its_files_changed_then_enable(tmp_path: Path) -> None:
    unit = tmp_path / "app.service"
    state = {
        "files": [{"path": str(unit), "content": "[Service]\nExecStart=/bin/true\n", "trigger": True}],
        "units": [{"name": "app.service", "enabled": True, "path": str(unit)}],
    }
    ctl = RecordingSystemctl("not-found")
    out = ms.run(state, check=True, runner=ctl)
    assert _by_path(out)["app.service"]["why"] == ["reload", "enabled"]
    # the enablement as the call leaves it (check mode: as it is), so the caller asks systemd no second time
    assert _by_path(out)["app.service"]["enabled"] == "not-found"
    assert ctl.calls == [], "check mode ran systemctl"
    out = ms.run(state, check=False, runner=ctl)
    assert ctl.calls == [["systemctl", "daemon-reload"], ["systemctl", "enable", "--", "app.service"]]
    assert _by_path(out)["app.service"]["enabled"] == "enabled"
    ctl.calls.clear()
    again = ms.run(state, check=False, runner=ctl)
    assert again["changed"] is False
    assert _by_path(again)["app.service"]["enabled"] == "enabled"
    assert ctl.calls == []
    ctl.enabled = "disabled"
    out = ms.run(state, check=False, runner=ctl)
    assert _by_path(out)["app.service"]["why"] == ["enabled"]
    assert diffs.summarize_diff(out["diff"]) == ["app.service: enabled: disabled -> enabled"]
    assert out["triggered"] is False  # enablement alone restarts nothing
    assert ctl.calls == [["systemctl", "enable", "--", "app.service"]]


def test_a_removed_dropin_of_another_directory_reloads_the_unit(tmp_path: Path) -> None:
    """A drop-in systemd loads from /run (the unit item's `dropins`) removed as an `absent` item:
    daemon-reload, and the item's trigger restarts; a removed file the unit does not load does not."""
    unit, runtime, other = tmp_path / "app.service", tmp_path / "run-x.conf", tmp_path / "other"
    unit.write_text("[Service]\n")
    runtime.write_text("[Service]\nEnvironment=X=1\n")
    other.write_text("x\n")
    state = {
        "absent": [{"path": str(runtime), "trigger": True}, str(other)],
        "units": [{"name": "app.service", "path": str(unit), "dropins": [str(runtime)]}],
    }
    ctl = RecordingSystemctl("enabled")
    out = ms.run(state, check=True, runner=ctl)
    assert _by_path(out)["app.service"]["why"] == ["reload"]
    assert out["triggered"] is True
    assert runtime.exists()
    ms.run(state, check=False, runner=ctl)
    assert not runtime.exists()
    assert ctl.calls == [["systemctl", "daemon-reload"]]
    ctl.calls.clear()
    other.write_text("x\n")
    state["absent"] = [str(tmp_path / "gone"), str(other)]
    assert ms.run(state, check=False, runner=ctl)["changed"] is True
    assert ctl.calls == []  # a file the unit does not load: no reload


def test_validate_failure_leaves_the_file(tmp_path: Path) -> None:
    f = tmp_path / "conf"
    f.write_text("good\n")
    state = {"files": [{"path": str(f), "content": "bad\n", "validate": "/bin/false %s"}]}
    with pytest.raises(ms.StateError, match="validate failed"):
        ms.run(state, check=False)
    assert f.read_text() == "good\n"
    assert [p.name for p in tmp_path.iterdir()] == ["conf"]
    ok = {"files": [{"path": str(f), "content": "new\n", "validate": "/bin/grep -q new %s"}]}
    ms.run(ok, check=False)
    assert f.read_text() == "new\n"


def test_bad_state_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ms.StateError, match="not an absolute path"):
        ms.run({"files": [{"path": "relative", "content": ""}]}, check=True)
    with pytest.raises(ms.StateError, match="unknown keys"):
        ms.run({"templates": []}, check=True)
    with pytest.raises(ms.StateError, match="octal"):
        ms.run({"directories": [{"path": str(tmp_path), "mode": "rwx"}]}, check=True)
    (tmp_path / "dir").mkdir()
    with pytest.raises(ms.StateError, match="a directory is in its place"):
        ms.run({"files": [{"path": str(tmp_path / "dir"), "content": ""}]}, check=True)


def test_user_missing_and_existing_compared(tmp_path: Path) -> None:
    """Users are compared from the passwd/group databases (created and changed only in molecule's
    containers: never on this shared machine)."""
    out = ms.run({"users": [{"name": "sgd-no-such-user-x", "group": "nogroup"}],
                  "groups": [{"name": "sgd-no-such-group-x"}]}, check=True)  # fmt: skip
    missing = {"sgd-no-such-group-x": ["missing"], "sgd-no-such-user-x": ["missing"]}
    assert {i["name"]: i["why"] for i in out["items"]} == missing
    me = pwd.getpwnam(ME)
    have_groups = sorted(g.gr_name for g in grp.getgrall() if ME in g.gr_mem)
    same = {"name": ME, "group": grp.getgrgid(me.pw_gid).gr_name, "groups": have_groups,
            "optional_groups": ["sgd-no-such-group-x"], "home": me.pw_dir, "shell": me.pw_shell,
            "comment": me.pw_gecos}  # fmt: skip
    assert ms.run({"users": [same]}, check=True)["changed"] is False
    other = {**same, "shell": "/usr/sbin/nologin-x"}
    out = ms.run({"users": [other]}, check=True)
    assert out["items"][0]["why"] == ["shell"]


# --- through ansible: the real module, its no_log option and the role's desired state ------------


def _ansible_env() -> dict[str, str]:
    return {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "LC_ALL": "C.UTF-8",
    }


def _task_results(stdout: str) -> list[dict[str, Any]]:
    doc = json.JSONDecoder().raw_decode(stdout[stdout.index("{") :])[0]
    return [t["hosts"]["localhost"] for play in doc["plays"] for t in play["tasks"]]


def test_module_through_ansible_masks_the_secret(tmp_path: Path) -> None:
    key = tmp_path / "key.yaml"
    secret = '{"api-key": "Through-Ansible-Secret-42"}\n'
    args = {"state": {"files": [{"path": str(key), "secret": True, "mode": "0600"},
                                {"path": str(tmp_path / "plain"), "content": "p\n"}]},
            "secrets": [{"path": str(key), "content": secret}]}  # fmt: skip
    ansible = Path(sys.executable).parent / "ansible"
    base = [str(ansible), "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
            "-m", "sglang.deploy.managed_state", "-a", json.dumps(args), "-v"]  # fmt: skip
    for extra in (["--check", "--diff"], ["--diff"], []):
        done = subprocess.run(
            base + extra, cwd=REPO, env=_ansible_env(), capture_output=True, text=True, check=True
        )
        assert "Through-Ansible-Secret" not in done.stdout + done.stderr
        result = _task_results(done.stdout)[0]
        masked = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
        assert result["invocation"]["module_args"]["secrets"] == [{"path": str(key), "content": masked}]
        # the key file's path stays readable: a no_log path was masked in every message naming it
        reported = {k: v for k, v in result.items() if k != "invocation"}
        assert masked not in json.dumps(reported)
        if extra == ["--check", "--diff"]:
            assert str(key) in json.dumps(reported)
    assert key.read_text() == secret
    assert _mode(key) == "0600"
    assert result["changed"] is False
    bad = dict(args, secrets=[])
    done = subprocess.run([*base[:-3], "-a", json.dumps(bad)], cwd=REPO, env=_ansible_env(),
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode != 0
    assert "its content must be the secrets entry of its path" in done.stdout


def test_a_file_added_to_the_roles_state_is_created_drift_reported_and_restored(tmp_path: Path) -> None:
    """The issue's test: one edit (a file item appended to a copy of roles/nccl_env/vars/main.yml),
    no other: the role creates it, check mode reports it after a tamper (and the CLI's drift summary
    names it), a run restores it."""
    coll = tmp_path / "ansible_collections" / "sglang" / "deploy"
    coll.parent.mkdir(parents=True)
    # the checkout without what .gitignore names: .cache holds the patch tests' 11 GB SGLang venv,
    # which a copy would write out in full (hard links into uv's cache in the checkout)
    skip = (".venv", ".git", ".collections", "artifacts", "__pycache__", ".mypy_cache", ".ruff_cache")
    ignored = (".pytest_cache", ".cache", ".ansible", ".whl", ".device", "wheelhouse", "*.egg-info")
    shutil.copytree(REPO, coll, symlinks=True, ignore=shutil.ignore_patterns(*skip, *ignored))
    added = tmp_path / "host" / "added.conf"
    added.parent.mkdir()
    vars_file = coll / "roles/nccl_env/vars/main.yml"
    text = vars_file.read_text()
    assert text.rstrip().endswith('mode: "{{ nccl_env_file_mode | string }}"'), "the state's last item moved"
    vars_file.write_text(
        text.rstrip("\n") + f'\n    - {{path: "{added}", content: "added by the test\\n", mode: "0640"}}\n'
    )
    env_file = tmp_path / "host" / "nccl.env"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n"
        "  roles: [{role: sglang.deploy.nccl_env}]\n"
    )
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    env = {
        **_ansible_env(),
        "ANSIBLE_COLLECTIONS_PATH": str(tmp_path),
        "ANSIBLE_ROLES_PATH": str(tmp_path / "none"),
    }
    inputs = {"nccl_env_file": str(env_file), "nccl_env_profile": "pcie",
              "nccl_env_dir_unmanaged": [str(env_file.parent)]}  # fmt: skip
    cmd = [str(ansible_playbook), "-i", "localhost,", str(playbook), "-e", json.dumps(inputs),
           "-e", f"ansible_python_interpreter={sys.executable}"]  # fmt: skip

    def play(*extra: str) -> dict[str, Any]:
        done = subprocess.run(
            cmd + list(extra), cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return next(r for r in _task_results(done.stdout) if "items" in r and "triggered" in r)

    first = play()
    assert first["changed"] is True
    assert added.read_text() == "added by the test\n"
    assert _mode(added) == "0640"
    assert "NCCL_PROTO=LL\n" in env_file.read_text()
    assert play()["changed"] is False
    added.write_text("tampered\n")
    added.chmod(0o666)
    drift = play("--check", "--diff")
    assert {i["path"]: i["why"] for i in drift["items"] if i["changed"]} == {str(added): ["content", "mode"]}
    summary = diffs.change_summary(drift)
    assert f"{added}: +1 -1 lines" in summary, summary
    assert f"{added}: mode: 0666 -> 0640" in summary, summary
    assert added.read_text() == "tampered\n", "check mode restored the file"
    restored = play()
    assert restored["changed"] is True
    assert added.read_text() == "added by the test\n"
    assert _mode(added) == "0640"
    assert play("--check")["changed"] is False
