"""The read-only host probes of preflight, nccl_env and sglang_service (one round trip each; the
roles skip their change tasks when the probe shows the host as they would leave it). Run here on
real temp files and this machine's own accounts."""

from __future__ import annotations

import getpass
import grp
import hashlib
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from modload import REPO, load_module

host_probe = load_module("host_probe", REPO / "plugins/modules/preflight_host_probe.py")
env_probe = load_module("env_probe", REPO / "plugins/modules/nccl_env_probe.py")
service_probe = load_module("service_probe", REPO / "plugins/modules/sglang_service_probe.py")


def test_host_probe_nearest_parent_free_space_and_smi(tmp_path: Path) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n")
    not_exec = tmp_path / "plain"
    not_exec.write_text("")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "bin")
    spec = {
        "smi_candidates": [str(tmp_path / "nope"), str(not_exec), str(smi)],
        "root": str(link / "a" / "b"),
    }
    assert host_probe.probe(spec)["nvidia_smi"] == ""  # not executable yet
    smi.chmod(0o755)
    out = host_probe.probe(spec)
    assert out["nvidia_smi"] == str(smi)
    root = out["root"]
    assert (root["path"], root["realpath"]) == (str(link), str(tmp_path / "bin"))
    fs = os.statvfs(tmp_path)
    assert abs(root["size_available"] - fs.f_bavail * fs.f_frsize) < 64 * 1024 * 1024
    assert os.path.ismount(root["mount"])
    assert str(tmp_path / "bin").startswith(root["mount"])
    # as the role runs it: the collection's module through ansible (args, check mode, exit_json)
    ansible = Path(sys.executable).parent / "ansible"
    env = {
        **os.environ,
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
    }
    done = subprocess.run(
        [str(ansible), "localhost", "-c", "local", "--check", "-m", "sglang.deploy.preflight_host_probe",
         "-a", json.dumps({"spec": spec})],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{") :])[0]["plays"][0]["tasks"][0][
        "hosts"
    ]["localhost"]
    assert result["changed"] is False
    assert result["probe"]["root"]["path"] == str(link)


def test_env_probe_file_and_dir_state(tmp_path: Path) -> None:
    env = tmp_path / "etc" / "nccl.env"
    assert env_probe.probe({"file": str(env)}) == {"file": None, "dir": None}
    env.parent.mkdir(mode=0o750)
    env.parent.chmod(0o750)
    env.write_text("NCCL_P2P_LEVEL=SYS\n")
    env.chmod(0o640)
    me, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    out = env_probe.probe({"file": str(env)})
    assert out["file"] == {"sha256": hashlib.sha256(b"NCCL_P2P_LEVEL=SYS\n").hexdigest(),
                           "owner": me, "group": group, "mode": "0640"}  # fmt: skip
    assert out["dir"] == {"owner": me, "group": group, "mode": "0750"}
    # through ansible: the module ships the collection's module_utils (host_state) with it
    ansible = Path(sys.executable).parent / "ansible"
    cb = {
        **os.environ,
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
    }
    done = subprocess.run(
        [str(ansible), "localhost", "-c", "local", "-m", "sglang.deploy.nccl_env_probe",
         "-a", json.dumps({"spec": {"file": str(env)}})],
        cwd=REPO, env=cb, capture_output=True, text=True, check=True,
    )  # fmt: skip
    plays = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{") :])[0]["plays"]
    assert plays[0]["tasks"][0]["hosts"]["localhost"]["probe"] == out
    env.unlink()
    env.symlink_to(tmp_path)
    assert env_probe.probe({"file": str(env)})["file"] == {"type": "not a regular file"}


def test_service_probe_files_user_and_config_dirs(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-kimi.service"
    unit.write_text("[Service]\n")
    unit.chmod(0o644)
    conf = tmp_path / "conf"
    conf.mkdir()
    conf.chmod(0o700)
    me = getpass.getuser()
    group = grp.getgrgid(os.getgid()).gr_name
    spec = {
        "current": str(tmp_path / "current"), "modprobe": "/nonexistent",
        "groups": [group, "no-such-group-x"],
        "dropin_dir": str(tmp_path / "d"), "paths": [], "unit": str(unit), "key_file": None,
        "key_path": str(tmp_path / "api-key.env"), "files": [str(unit), str(tmp_path / "missing.json")],
        "config_paths": [{"path": str(conf), "owner": me, "group": group, "mode": "0755"}],
        "user": me, "group": group, "service": "sglang-no-such-unit.service",
    }  # fmt: skip
    out = service_probe.probe(spec)
    assert out["files"][str(unit)]["sha256"] == hashlib.sha256(b"[Service]\n").hexdigest()
    assert out["files"][str(unit)]["mode"] == "0644"
    assert out["files"][str(tmp_path / "missing.json")] is None
    assert out["config_drift"] == [{"path": str(conf), "why": "mode 0700 (want 0755)"}]
    assert out["user"]["home"] == pwd.getpwnam(me).pw_dir
    assert out["group_exists"] is True
    assert out["groups"] == [group]
    assert out["key_exists"] is False
    assert out["enabled"] != "enabled"  # no such unit (or no systemd here)
    assert out["active"] != "active"
