"""The read-only host probes of preflight and sglang_service (one round trip each: what a role's
host state cannot describe, e.g. the running process; the files, users and units themselves are
compared by sglang.deploy.managed_state, tests/test_managed_state.py). Run here on real temp files
and this machine's own processes."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from modload import REPO, load_module, run_module

host_probe = load_module("host_probe", REPO / "plugins/modules/preflight_host_probe.py")
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
    result = run_module("preflight_host_probe", {"spec": spec}, "--check")
    assert result["changed"] is False
    assert result["probe"]["root"]["path"] == str(link)


def _smi_double(path: Path, query: str, topo: str, query_rc: int = 0) -> None:
    """TEST DOUBLE of nvidia-smi: prints the recorded samples for exactly the arguments preflight uses."""
    path.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  '--query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,nounits')\n"
        f"    printf '%s' {shlex.quote(query)}; exit {query_rc} ;;\n"
        f"  'topo -m') printf '%s' {shlex.quote(topo)} ;;\n"
        '  *) echo "unsupported: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )
    path.chmod(0o755)


def test_host_probe_queries_the_gpus_and_reads_the_topology_of_two(tmp_path: Path) -> None:
    """One round trip: --query-gpu always, topo -m for two GPUs or more; a no-GPU exit code is answered,
    any other fails the probe naming the command."""
    samples = REPO / "tests" / "data" / "nvidia-smi"
    smi = tmp_path / "nvidia-smi"
    query = {"fields": "index,name,compute_cap,driver_version,memory.total", "ok_rcs": [6, 9, 12]}
    spec = {"smi_candidates": [str(smi)], "root": str(tmp_path), "smi_query": query}
    two, topo = (
        (samples / "h200x2.query-gpu.csv").read_text(),
        (samples / "h200x2-nvlink.topo-m.txt").read_text(),
    )
    _smi_double(smi, two, topo)
    out = host_probe.probe(spec)
    assert out["smi_query"] == {"rc": 0, "stdout": two, "stderr": ""}
    assert out["smi_topo"] == topo
    _smi_double(smi, (samples / "h200x1.query-gpu.csv").read_text(), "not asked for one GPU")
    assert host_probe.probe(spec)["smi_topo"] == ""
    _smi_double(smi, "No devices were found", "", query_rc=6)
    assert host_probe.probe(spec)["smi_query"]["rc"] == 6
    _smi_double(smi, "boom", "", query_rc=3)
    with pytest.raises(host_probe.ProbeError, match="exited 3: boom"):
        host_probe.probe(spec)
    assert "smi_query" not in host_probe.probe({**spec, "smi_candidates": []})


def test_service_probe_live_inputs(tmp_path: Path) -> None:
    unit = tmp_path / "sglang-kimi.service"
    unit.write_text("[Service]\n")
    nccl = tmp_path / "nccl.env"
    nccl.write_text("NCCL_P2P_LEVEL=SYS\n")
    (tmp_path / "releases" / "r1").mkdir(parents=True)
    (tmp_path / "current").symlink_to(tmp_path / "releases" / "r1")
    spec = {
        "nccl_env": str(nccl), "current": str(tmp_path / "current"), "modprobe": "/nonexistent",
        "unit": str(unit), "service": "sglang-no-such-unit.service",
    }  # fmt: skip
    out = service_probe.probe(spec)
    assert out["nccl_sha256"] == hashlib.sha256(b"NCCL_P2P_LEVEL=SYS\n").hexdigest()
    assert out["release"] == str(tmp_path / "releases" / "r1")
    assert (out["modprobe"], out["unit_exists"]) == (False, True)
    assert out["active"] != "active"  # no such unit (or no systemd here)
    assert out["process"] is None
    # only the live answers: files, users and enablement are the state module's
    assert set(out) == {"nccl_sha256", "release", "modprobe", "unit_exists", "active", "process",
                        "nvidia_devices", "addresses", "foreign_dropins", "vendor_dropins"}  # fmt: skip
    assert (out["foreign_dropins"], out["vendor_dropins"]) == ([], [])
    assert service_probe.probe({"current": str(tmp_path / "nope")})["release"] == "(missing)"


def test_dropin_directory_names_are_systemds() -> None:
    """systemd.unit(5): <unit>.d/, each dash-truncated prefix (a-b-.service.d/, a-.service.d/), then the
    type's top-level service.d/."""
    assert service_probe.dropin_dirnames("sglang-kimi.service") == [
        "sglang-kimi.service.d", "sglang-.service.d", "service.d",
    ]  # fmt: skip
    assert service_probe.dropin_dirnames("a-b-c.service") == [
        "a-b-c.service.d", "a-b-.service.d", "a-.service.d", "service.d",
    ]  # fmt: skip


def test_foreign_dropins_on_a_real_unit_path_tree(tmp_path: Path) -> None:
    """Drop-ins in every directory systemd reads for the unit, outside the role's own directory, are
    foreign: a runtime one, a vendor-directory one, a top-level service.d/ one, a prefix one; the
    role's own directory, another unit's, a non-.conf file and what systemd reported loaded count right."""
    etc, run, lib = tmp_path / "etc", tmp_path / "run", tmp_path / "lib"
    files = [
        etc / "sglang-kimi.service.d" / "managed.conf",  # the role's directory: pruned by the state
        run / "sglang-kimi.service.d" / "x.conf",
        lib / "sglang-kimi.service.d" / "y.conf",
        etc / "service.d" / "all.conf",
        run / "sglang-.service.d" / "prefix.conf",
        etc / "other.service.d" / "z.conf",  # another unit's
        run / "sglang-kimi.service.d" / "notes.txt",  # systemd reads *.conf only
    ]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("[Service]\n")
    loaded = [str(files[0]), "/run/systemd/system/sglang-kimi.service.d/seen.conf"]
    found = service_probe.foreign_dropins(
        "sglang-kimi.service", str(etc / "sglang-kimi.service.d"), loaded, [str(etc), str(run), str(lib)]
    )
    assert found == sorted(
        [str(files[1]), str(files[2]), str(files[3]), str(files[4]),
         "/run/systemd/system/sglang-kimi.service.d/seen.conf"]
    )  # fmt: skip


# --- the running process (sglang_service_probe's `process`): real child processes, real /proc -------

probe = load_module("probe", REPO / "plugins/module_utils/probe.py")
TEST_SECRET = "ProbeTestSecret-0123456789abcdef"  # test-only value


def _wait_for_exec(proc: subprocess.Popen[bytes], argv0: str) -> None:
    """Until the child's /proc/<pid>/cmdline shows the exec'd argv (not the forked parent's)."""
    for _attempt in range(200):
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            if fh.read().startswith(argv0.encode() + b"\0"):
                return
        time.sleep(0.01)
    raise AssertionError(f"{proc.pid} never exec'd {argv0}")


def _release_tree(tmp_path: Path) -> Path:
    """<root>/releases/{r1,r2}/bin/sh (copies of the real shell) and current -> r1."""
    root = tmp_path / "opt"
    for rel in ("r1", "r2"):
        (root / "releases" / rel / "bin").mkdir(parents=True)
        shutil.copy2(os.path.realpath("/bin/sh"), root / "releases" / rel / "bin" / "sh")
    (root / "current").symlink_to(root / "releases" / "r1")
    return root


def test_env_file_is_parsed_never_sourced() -> None:
    text = (
        "# comment\n; also a comment\n\nNCCL_PROTO=LL\n  NCCL_ALGO = Ring \nQUOTED=\"a b\"\nSINGLE='x'\n"
        "NOT A NAME=1\nno_equals\nNCCL_PROTO=Simple\nSUB=$(touch /tmp/x)\n"
    )
    assert probe.parse_env_file(text) == {
        "NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "QUOTED": "a b", "SINGLE": "x", "SUB": "$(touch /tmp/x)",
    }  # fmt: skip


def test_argv_words_systemd_expands_are_wildcards_or_their_wanted_value() -> None:
    match = probe.argv_word_matches
    assert match("${SGLANG_API_KEY}", TEST_SECRET, {"SGLANG_API_KEY": TEST_SECRET})
    assert not match("${SGLANG_API_KEY}", "OtherKey-0123456789", {"SGLANG_API_KEY": TEST_SECRET})
    assert match("${SGLANG_API_KEY}", "anything", {})  # value not known here: any word
    assert match("%d/api-key", "/run/credentials/sglang-kimi.service/api-key", {})
    assert not match("%d/api-key", "/run/credentials/sglang-kimi.service/other", {})
    assert match("${SGLANG_API_KEY}", "${SGLANG_API_KEY}", {"SGLANG_API_KEY": TEST_SECRET})  # quoted $$
    assert not match("--tp-size", "--tp-size=8", {})
    masked = probe.mask_argv(
        ["py", "--api-key", TEST_SECRET, "--hf-token=abc", "--tokenizer-path", "/m", "-x", f"x{TEST_SECRET}"],
        ["py", "--api-key", "${SGLANG_API_KEY}"],
        {"SGLANG_API_KEY": TEST_SECRET},
    )  # fmt: skip
    assert masked == [
        "py",
        "--api-key",
        "********",
        "--hf-token=********",
        "--tokenizer-path",
        "/m",
        "-x",
        "********",
    ]


def test_process_compare_of_a_real_child(tmp_path: Path) -> None:
    root = _release_tree(tmp_path)
    exe = str(root / "current" / "bin" / "sh")  # exec'd through current: the kernel resolves it
    env = {"NCCL_PROTO": "LL", "NCCL_NTHREADS": "512", "SGLANG_API_KEY": TEST_SECRET, "HOME": str(tmp_path)}
    # the shell keeps its own argv (the flags are its positional parameters) while its sleep runs
    child = subprocess.Popen([exe, "-c", "sleep 60; :", "--api-key", TEST_SECRET], env=env, cwd=tmp_path)
    try:
        _wait_for_exec(child, exe)
        proc = probe.read_process(child.pid)
        assert proc["argv"] == [exe, "-c", "sleep 60; :", "--api-key", TEST_SECRET]
        assert proc["environ"] == env
        assert proc["cwd"] == str(tmp_path)
        # the release at exec time, although current moves now (argv[0] still names current)
        (root / "current").unlink()
        (root / "current").symlink_to(root / "releases" / "r2")
        unit_argv = [exe, "-c", "sleep 60; :", "--api-key", "${SGLANG_API_KEY}"]
        file_env = {"NCCL_PROTO": "LL", "NCCL_NTHREADS": "512", "HOME": str(tmp_path)}
        key_env = {"SGLANG_API_KEY": TEST_SECRET}

        def compare(**over: Any) -> dict[str, Any]:
            args: dict[str, Any] = {
                "want_argv": unit_argv, "want_env": {**file_env, **key_env}, "prefixes": ["NCCL_", "SGLANG_"],
                "want_release": str(root / "releases" / "r1"), "root": str(root),
            }  # fmt: skip
            result: dict[str, Any] = probe.compare_process(proc, **(args | over))
            assert TEST_SECRET not in json.dumps(result), result  # never a secret, masked or compared only
            return result

        same = compare()
        assert same["differs"] == [], same
        assert same["release"] == str(root / "releases" / "r1")
        assert same["argv"] == [exe, "-c", "sleep 60; :", "--api-key", "********"]
        assert same["argv_sha256"] == hashlib.sha256("\0".join(same["argv"]).encode()).hexdigest()
        assert same["env_checked"] == ["HOME", "NCCL_NTHREADS", "NCCL_PROTO", "SGLANG_API_KEY"]
        # the NCCL file changed behind the process' back, a variable was removed from it, the key rotated
        changed = compare(
            want_env={"NCCL_NTHREADS": "256", "HOME": str(tmp_path), "SGLANG_API_KEY": "NewKey-0123456789xyz"}
        )
        assert changed["differs"] == [
            "argv: argv[4] '********' (want '${SGLANG_API_KEY}')",
            "environment: NCCL_NTHREADS=512 (want 256), SGLANG_API_KEY differs, "
            "NCCL_PROTO set (not in the unit or its environment files)",
        ], changed
        assert changed["env_mismatch"] == ["NCCL_NTHREADS", "SGLANG_API_KEY", "NCCL_PROTO"]
        assert "NewKey" not in json.dumps(changed)
        # an older unit: other flags, one more word
        older = compare(want_argv=[exe, "-c", "sleep 61; :", "--api-key", "${SGLANG_API_KEY}", "--port"])
        assert older["differs"] == [
            "argv: 5 argv words (want 6), argv[2] 'sleep 60; :' (want 'sleep 61; :'),"
            " argv[5] (none) (want '--port')"
        ]
        # a process of another release than the one wanted (the stack moved current)
        moved = compare(want_release=str(root / "releases" / "r2"))
        assert moved["differs"] == [f"release: {root}/releases/r1 (want {root}/releases/r2)"]
        # a secret-named variable that differs is named, never shown
        assert compare(want_env={**file_env, "SGLANG_API_KEY": "x"})["differs"] == [
            "argv: argv[4] '********' (want '${SGLANG_API_KEY}')", "environment: SGLANG_API_KEY differs"
        ]  # fmt: skip
    finally:
        child.kill()
        child.wait()


def test_process_release_from_mapped_files(tmp_path: Path) -> None:
    """A venv's python is a link to the base interpreter: the release shows in what it mapped."""
    root = _release_tree(tmp_path)
    lib = root / "releases" / "r1" / "lib.so"
    lib.write_bytes(b"\0" * 4096)
    code = (
        "import mmap, sys, time; fh = open(sys.argv[1], 'rb');"
        " m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ); print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(root / "current" / "lib.so")], stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        (root / "current").unlink()
        (root / "current").symlink_to(root / "releases" / "r2")
        proc = probe.read_process(child.pid)
        assert str(lib) in proc["mapped"]
        assert probe.process_release(proc, str(root)) == str(root / "releases" / "r1")
        assert probe.process_release(proc, str(tmp_path / "elsewhere")) == ""
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a child as another user (needs root)")
def test_process_of_another_user_is_read_as_its_owner(tmp_path: Path) -> None:
    """Root without CAP_SYS_PTRACE (a container host) cannot read another user's environ: the
    module reads it as that user. Exercised here directly on a child running as nobody."""
    nobody = pwd.getpwnam("nobody")
    exe = shutil.which("sleep") or "/bin/sleep"
    child = subprocess.Popen(
        [exe, "60"], env={"NCCL_P2P_LEVEL": "SYS"}, user=nobody.pw_uid, group=nobody.pw_gid,
        extra_groups=[], cwd="/",
    )  # fmt: skip
    try:
        _wait_for_exec(child, exe)
        environ, maps, real_exe, cwd = probe.read_process_as_owner(child.pid)
        assert environ == b"NCCL_P2P_LEVEL=SYS\0"
        assert real_exe == os.path.realpath(exe)
        assert cwd == "/"
        assert real_exe.encode() in maps
    finally:
        child.kill()
        child.wait()


def test_service_probe_process_of_an_inactive_unit_is_no_drift(tmp_path: Path) -> None:
    spec = {
        "current": str(tmp_path / "current"),
        "process": {"unit": "sglang-no-such-unit.service", "root": str(tmp_path), "argv": ["x"], "env": {}},
    }
    out = service_probe.probe(spec)["process"]
    assert out["active"] != "active"
    assert out["differs"] == []
    assert service_probe.probe({"current": str(tmp_path / "current")})["process"] is None


def test_host_probe_models_service_user_and_pcie(tmp_path: Path) -> None:
    """The probe on real directories (the shipped lab model, a missing path) and a TEST DOUBLE of
    lspci printing a recorded-layout sample (no PCIe switch here), through the real module in check
    mode: read-only answers, nothing changed."""
    model = tmp_path / "target"
    shutil.copytree(REPO / "src/sglang_deploy/data/lab-model/target", model)
    lspci = tmp_path / "lspci"
    sample = REPO / "tests/data/lspci/acs-enabled-pex-switch.txt"
    lspci.write_text(f'#!/bin/sh\n# TEST DOUBLE of lspci\n[ "$*" = -vvv ] && exec cat {sample}\nexit 2\n')
    lspci.chmod(0o755)
    spec = {
        "smi_candidates": [],
        "root": str(tmp_path),
        "models": {"model": str(model), "draft": str(tmp_path / "none")},
        "service_user": "root",
        "pcie": True,
        "lspci_candidates": [str(tmp_path / "no-lspci"), str(lspci)],
    }
    out = host_probe.probe(spec)
    assert out["models"]["model"]["config"]["architectures"] == ["LlamaForCausalLM"]
    assert out["models"]["model"]["weights"]["files"] == ["model.safetensors"]
    assert out["models"]["draft"]["exists"] is False
    assert out["service_user"]["uid"] == 0
    assert out["pcie"]["lspci"] == str(lspci)
    assert [d["bdf"] for d in out["pcie"]["devices"]][:3] == ["00:01.0", "15:00.0", "16:00.0"]
    assert isinstance(out["pcie"]["iommu"], list)
    assert out["pcie"]["cmdline"] == Path("/proc/cmdline").read_text().strip()
    missing = host_probe.probe({**spec, "lspci_candidates": [str(tmp_path / "no-lspci")]})["pcie"]
    assert missing["lspci"] == ""
    assert missing["devices"] is None
    result = run_module("preflight_host_probe", {"spec": spec}, "--check")
    assert result["changed"] is False
    assert result["probe"]["models"]["model"]["tokenizer"] == ["tokenizer.json", "tokenizer_config.json"]
    assert len(result["probe"]["pcie"]["devices"]) == 7
