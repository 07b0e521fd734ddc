"""The REAL SGLang under the REAL unit on the converged lab host: the release venv site.yml built (SGLang
0.5.9 from the sdist with the 5 patches, torch, flashinfer, sgl-kernel of the lock), the launcher
(sglang_launch.py), the sandbox of sglang-kimi.service and the API key through the credential path
(LoadCredential= of /etc/sglang/sglang-config.yaml, SGLang's --config in $CREDENTIALS_DIRECTORY), as
production runs them. Lab mode installs the unit and never starts it; this test starts it once, with
two lab-only inputs (this test's extra vars, nothing in the lab inventory):

* ``sglang_extra_args: [--device, cpu]``: without it SGLang 0.5.9 stops in ServerArgs.__post_init__ at
  get_device() ("No accelerator (CUDA, XPU, HPU, NPU, MUSA) is available.");
* ``sglang_launch_environment: {LD_LIBRARY_PATH: <dir of libcuda-double>}``: the named test double
  libcuda-double (tests/e2e/data/make_libcuda_double.sh: the driver's libcuda.so.1 whose every function
  returns CUDA_ERROR_NO_DEVICE). Without it SGLang stops at ``import sgl_kernel`` (the CUDA build links
  libcuda.so.1), before it logs its server args or starts a child (measured 2026-12-04, README).

What it reaches, asserted in order: SGLang's own ``server_args=ServerArgs(...)`` line (``api_key=
'********'``, ``device='cpu'``), its scheduler and detokenizer as multiprocessing "spawn" children of
the launcher's process running as the service user, the scheduler's torch.distributed (gloo) and the
start of the weight load of the tiny model; then the failure where a CPU kernel is needed:
RotaryEmbedding's CPU path imports vllm._custom_ops (neither sgl-kernel's CPU build nor vllm is in a
CUDA release), and SGLang's watchdog kills the server. It never serves. The key is in no journal
field, unit file or process command line.

The model is the tiny Llama + EAGLE-3 pair the lab ships (src/sglang_deploy/data/lab-model, installed
at /opt/models/lab-* by `sglang-deploy lab create`). Afterwards the unit
is re-rendered from the lab's own inputs (no key, no extra args) and stopped: the roles' files are as
before (content, mode, owner; e2e_lab.TOUCHED and the deploy state), the key file gone."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_lab import LAB_HOST, REPO, SNAPSHOT, TOUCHED, lab_exec, lab_inventory, playbook

pytestmark = pytest.mark.e2e

KEY = "E2eRealSglangKey-0123456789abcdef"  # test-only value
UNIT = "sglang-kimi.service"
CREDENTIAL = "/run/credentials/sglang-kimi.service/sglang-config.yaml"
KEY_FILE = "/etc/sglang/sglang-config.yaml"
PYTHON = "/opt/sglang/current/venv/bin/python"
LAUNCHER = "/usr/local/lib/sglang-deploy/sglang_launch.py"
SGL_KERNEL = "/opt/sglang/current/venv/lib/python3.11/site-packages/sgl_kernel"
DRIVER_DOUBLE = "/usr/local/lib/sglang-e2e-libcuda-double"
MODELS = ("/opt/models/lab-target", "/opt/models/lab-eagle3")
# SGLang's stdout/stderr lands in the journal; one start ends when its main process is gone
START_TIMEOUT_S = 900


def message(entry: dict[str, Any]) -> str:
    """A journal entry's MESSAGE (journald stores lines with control characters as a byte array)."""
    value = entry.get("MESSAGE", "")
    return bytes(value).decode(errors="replace") if isinstance(value, list) else str(value)


def host_state() -> str:
    """What the roles wrote (e2e_lab.TOUCHED) without times, and the deploy state's checksums: the
    content, type, size, mode and owner of every file; a re-render rewrites the unit (a new mtime),
    and the service's cache directory gets entries removed again (its mtime moves)."""
    listing = lab_exec("sh", "-c", SNAPSHOT.format(paths=" ".join(TOUCHED)))
    timeless = [re.sub(r" [0-9.]+$", "", line) if re.match(r"^/\S+ [a-z] ", line) else line
                for line in listing.splitlines()]  # fmt: skip
    deploy = lab_exec(
        "sh", "-c", "find /var/lib/sglang-deploy -type f -print0 | sort -z | xargs -0 -r sha256sum"
    )
    return "\n".join([*timeless, deploy])


def service_dirs() -> list[str]:
    """Everything in the unit's state and cache directories (StateDirectory=, CacheDirectory=), and the
    service user's entries in /tmp: the lab container cannot give the unit its own mount namespace, so
    PrivateTmp= is not in force there and SGLang's temporary directories (prometheus_client's
    multiprocess directory of --enable-metrics, one per start) land in the host's /tmp."""
    found = lab_exec("find", "/var/cache/sglang", "/var/lib/sglang", "-mindepth", "1")
    found += lab_exec("find", "/tmp", "-mindepth", "1", "-maxdepth", "1", "-user", "sglang")
    return found.splitlines()


def cmdlines() -> str:
    """Every process's command line on the host (NULs as spaces), one a line."""
    return lab_exec(
        "sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <\"$f\"; echo; done 2>/dev/null"
    )


def start_and_watch() -> dict[str, Any]:
    """Start the unit once and watch it until its main process is gone (SGLang failed) or it answers
    /health; then stop it (before Restart=on-failure starts it again). Returns the start's journal
    entries, the main pid, what ps saw below it, the main's command line and environment names, the
    credentials directory seen while it ran, systemd's result and the seconds it took."""
    lab_exec("systemctl", "reset-failed", UNIT, check=False)
    started = time.monotonic()
    lab_exec("systemctl", "start", UNIT)
    invocation = lab_exec("systemctl", "show", UNIT, "--property=InvocationID", "--value").strip()
    main_pid = lab_exec("systemctl", "show", UNIT, "--property=MainPID", "--value").strip()
    assert main_pid != "0", "the unit's main process was gone at once: " + lab_exec(
        "systemctl", "status", UNIT
    )
    seen: dict[str, dict[str, str]] = {}
    lines: set[str] = set()
    cmdline = environ = credentials = ""
    health = ""
    while time.monotonic() - started < START_TIMEOUT_S:
        show = lab_exec(
            "systemctl",
            "show",
            UNIT,
            "--property=MainPID,ActiveState,SubState,Result,ExecMainStatus,ExecMainCode",
        )
        props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
        if props["MainPID"] != main_pid:
            break
        ps = lab_exec("ps", "-eo", "pid=,ppid=,user=,args=")
        for row in ps.splitlines():
            pid, ppid, user, args = row.split(None, 3)
            if ppid == main_pid or ppid in seen:
                seen.setdefault(pid, {"ppid": ppid, "user": user, "args": args})
                seen[pid]["args_last"] = args
        lines.update(cmdlines().splitlines())
        if not cmdline:
            cmdline = lab_exec("sh", "-c", f"tr '\\0' ' ' </proc/{main_pid}/cmdline", check=False)
            # root of the container lacks CAP_SYS_PTRACE: the service user reads its own process' environ
            environ = lab_exec(
                "sh", "-c", f"runuser -u sglang -- cat /proc/{main_pid}/environ | tr '\\0' '\\n'", check=False
            )
            credentials = lab_exec("ls", "-ln", "/run/credentials/sglang-kimi.service", check=False)
        health = lab_exec(
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "http://127.0.0.1:30000/health",
            check=False,
        )
        if health == "200":
            break
        time.sleep(2)
    took = time.monotonic() - started
    lab_exec("systemctl", "stop", UNIT)
    # --all: the server_args line is longer than the 4096 bytes journalctl prints of a field by default
    raw = lab_exec("journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json", "--all", "--no-pager")
    entries = [json.loads(line) for line in raw.splitlines() if line.startswith("{")]
    return {
        "invocation": invocation, "main_pid": main_pid, "props": props, "entries": entries,
        "text": "\n".join(message(e) for e in entries), "children": seen, "cmdlines": lines,
        "cmdline": cmdline, "environ": environ, "credentials": credentials, "health": health, "took": took,
    }  # fmt: skip


def extra_vars(tmp: Path) -> str:
    """The run's inputs in a file (the key never on a command line): key on, the lab-only --device cpu,
    the driver double's directory on the loader path (the double is built there before the start)."""
    data = {
        "sglang_api_key_required": True,
        "sglang_api_key": KEY,
        "sglang_extra_args": ["--device", "cpu"],
        "sglang_launch_environment": {"LD_LIBRARY_PATH": DRIVER_DOUBLE},
    }
    path = tmp / "real-sglang.json"
    path.write_text(json.dumps(data))
    return f"@{path}"


@pytest.fixture(scope="module")
def real(
    converged_lab: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    tmp = Path(tmp_path_factory.mktemp("real-sglang"))
    inventory = str(lab_inventory(tmp / "inventory"))
    before = host_state()
    kept = service_dirs()
    # the lab ships its model (sglang-deploy lab create installs it)
    for model in MODELS:
        lab_exec("test", "-f", f"{model}/config.json")
    result: dict[str, Any] = {"tmp": tmp}
    try:
        setup = playbook("-i", inventory, "tests/e2e/data/real_sglang.yml", "-e", extra_vars(tmp))
        assert setup.returncode == 0, setup.stdout[-6000:]
        assert KEY not in setup.stdout + setup.stderr
        result["setup"] = setup.stdout
        result["unit"] = lab_exec("systemctl", "cat", UNIT)
        result["key_file"] = lab_exec("stat", "-c", "%U %G %a", KEY_FILE).strip()
        result["key_in_file"] = KEY in lab_exec("cat", KEY_FILE)
        built = subprocess.run(
            ["docker", "exec", "-i", LAB_HOST, "sh", "-s", "--", DRIVER_DOUBLE, SGL_KERNEL],
            input=(REPO / "tests" / "e2e" / "data" / "make_libcuda_double.sh").read_text(),
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout + built.stderr
        result["double"] = built.stdout.strip()
        result["driver"] = start_and_watch()
        # the whole journal of the unit: what an operator reads, and every field of every entry
        result["journal"] = lab_exec("journalctl", "-u", UNIT, "--no-pager", "--all") + lab_exec(
            "journalctl", "-u", UNIT, "--no-pager", "--all", "-o", "json"
        )
        yield result
    finally:
        lab_exec("systemctl", "stop", UNIT, check=False)
        lab_exec("systemctl", "reset-failed", UNIT, check=False)
        lab_exec("rm", "-rf", DRIVER_DOUBLE)
        # what SGLang wrote as the service user (its cache directories, /tmp), nothing else
        made = sorted(set(service_dirs()) - set(kept))
        made = [p for p in made if not any(p.startswith(f"{q}/") for q in made)]
        if made:
            lab_exec("rm", "-rf", "--", *made)
        # the unit, launch-args.json and the key file from the lab's own inputs (key off, no extra args)
        restored = playbook("-i", inventory, "tests/e2e/data/real_sglang.yml")
        assert restored.returncode == 0, restored.stdout[-4000:]
        assert lab_exec("systemctl", "is-active", UNIT, check=False).strip() == "inactive"
        assert host_state() == before


def test_the_key_reaches_sglang_only_through_the_credential(real: dict[str, Any]) -> None:
    unit = real["unit"]
    assert "LoadCredential=sglang-config.yaml:/etc/sglang/sglang-config.yaml" in unit
    assert "--config %d/sglang-config.yaml" in unit
    assert "--device cpu" in unit
    assert real["key_file"] == "root root 600"
    assert real["key_in_file"]
    start = real["driver"]
    assert start["cmdline"].startswith(f"{PYTHON} {LAUNCHER} -m sglang.launch_server "), start["cmdline"]
    assert start["cmdline"].rstrip().endswith(f"--device cpu --config {CREDENTIAL}"), start["cmdline"]
    assert "CREDENTIALS_DIRECTORY=/run/credentials/sglang-kimi.service" in start["environ"].splitlines()
    assert KEY not in start["environ"]
    # systemd's copy of the credential while the unit runs: root's, 0440, an ACL entry for the service user
    assert re.search(r"^-r--r-----\+ 1 0 0 +\d+ .* sglang-config\.yaml$", start["credentials"], re.M), start[
        "credentials"
    ]
    # no process of the host had the key on its command line at any poll
    assert start["cmdlines"]
    assert not [line for line in start["cmdlines"] if KEY in line]
    assert KEY not in real["journal"]
    units = lab_exec("sh", "-c", "cat /etc/systemd/system/sglang-kimi.service /etc/sglang/launch-args.json; "
                     "cat /etc/systemd/system/sglang-kimi.service.d/*.conf 2>/dev/null || true")  # fmt: skip
    assert KEY not in units
    assert KEY not in real["setup"]


def test_with_the_driver_double_sglang_logs_its_server_args_masked(real: dict[str, Any]) -> None:
    assert real["double"].startswith("built "), real["double"]
    text = real["driver"]["text"]
    (line,) = [ln for ln in text.splitlines() if "server_args=ServerArgs(" in ln]
    assert line.split("] ", 1)[1].startswith(
        "server_args=ServerArgs(model_path='/opt/models/lab-target', "
    ), line
    for field in ("api_key='********'", "admin_api_key=None", "device='cpu'", "tp_size=1",
                  "speculative_algorithm='EAGLE3'", "speculative_draft_model_path='/opt/models/lab-eagle3'",
                  "attention_backend='flashinfer'", "served_model_name='lab'", "port=30000",
                  "enable_metrics=True"):  # fmt: skip
        assert f", {field}," in line or f"({field}," in line, field


def test_sglang_starts_its_processes_through_the_launcher_as_the_service_user(real: dict[str, Any]) -> None:
    """SGLang's scheduler and detokenizer are multiprocessing "spawn" children of the launcher's process:
    the journal records their pid, uid and command line (the release python's spawn_main); ps saw them
    under the main process as the service user."""
    start = real["driver"]
    uid = lab_exec("id", "-u", "sglang").strip()
    by_pid: dict[str, list[dict[str, Any]]] = {}
    for entry in start["entries"]:
        if "_PID" in entry and entry.get("_UID") is not None:
            by_pid.setdefault(entry["_PID"], []).append(entry)
    main = by_pid.pop(start["main_pid"])
    # systemd's own lines before the exec (root) and then SGLang's, as the service user. journald takes
    # a line's uid from the sender's credentials when it is sent but reads _COMM from /proc when it
    # gets to it, so a root line of the pre-exec child may already show "python" (seen on a loaded
    # machine): what must hold is that nothing of the main pid is root once it ran as the service user
    users = [e["_UID"] for e in main]
    assert uid in users, users
    first = users.index(uid)
    assert set(users[first:]) == {uid}, [(e["_UID"], e["_COMM"], message(e)[:80]) for e in main]
    assert set(users[:first]) <= {"0"}, users
    sglang = [e for e in main[first:] if e["_COMM"] == "python"]
    assert sglang
    assert {e["_CMDLINE"].split(" --model-path ", 1)[0] for e in sglang} == {
        f"{PYTHON} {LAUNCHER} -m sglang.launch_server"
    }
    spawn = f'{PYTHON} -c "from multiprocessing.spawn import spawn_main;'
    spawned = {pid: es for pid, es in by_pid.items() if es[0]["_CMDLINE"].startswith(spawn)}
    assert len(spawned) == 2, {pid: es[0]["_CMDLINE"] for pid, es in by_pid.items()}
    for entries in spawned.values():
        assert {e["_UID"] for e in entries} == {uid}
        assert entries[0]["_CMDLINE"].endswith("--multiprocessing-fork")
    scheduler = [
        pid for pid, es in spawned.items() if any("Scheduler hit an exception" in message(e) for e in es)
    ]
    assert len(scheduler) == 1, spawned.keys()
    # ps: the spawn children and multiprocessing's resource tracker, below the main process, all the
    # service user's
    children = start["children"]
    for pid in spawned:
        assert pid in children, (pid, children)
        assert children[pid]["ppid"] == start["main_pid"]
    # their titles come late and briefly (the detokenizer's after its imports, on a loaded machine
    # often after the scheduler failed): the scheduler's, set before it logs its set-up, is in the
    # journal (_COMM, 15 characters)
    assert "sglang::schedul" in {e["_COMM"] for e in spawned[scheduler[0]]}
    assert {c["user"] for c in children.values()} == {"sglang"}


def test_with_the_driver_double_sglang_fails_at_the_first_cpu_kernel(real: dict[str, Any]) -> None:
    """What it reached, in order, and where it stopped: the scheduler's torch.distributed (gloo) and the
    start of the weight load, then RotaryEmbedding's CPU fallback imports vllm (no CPU kernel in a CUDA
    release); the main process is killed by SGLang's own child watchdog (SIGQUIT -> kill)."""
    start = real["driver"]
    text = start["text"]
    reached = ["server_args=ServerArgs(", "Init torch distributed begin.", "Init torch distributed ends.",
               "Load weight begin.", "Scheduler hit an exception: Traceback",
               'sglang/srt/layers/rotary_embedding.py", line 139, in __init__',
               "from vllm._custom_ops import rotary_embedding", "ModuleNotFoundError: No module named 'vllm'",
               "Received sigquit from a child process. It usually means the child failed."]  # fmt: skip
    at = [text.find(step) for step in reached]
    assert -1 not in at, dict(zip(reached, at, strict=True))
    assert at == sorted(at), dict(zip(reached, at, strict=True))
    assert "Load weight end" not in text
    assert "The server is fired up and ready to roll!" not in text
    assert start["health"] != "200"
    assert start["props"]["Result"] == "signal", start["props"]
    assert start["props"]["ExecMainStatus"] == "9", start["props"]
    print(f"real SGLang: stopped at the first CPU kernel {start['took']:.0f}s after the start")
