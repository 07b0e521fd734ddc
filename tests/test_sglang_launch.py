"""roles/sglang_service/files/sglang_launch.py, the unit's launcher: runs ``-m MODULE`` / a script as
python would, with ServerArgs' repr hiding the API keys, in the process and in its spawned children.

The ``sglang`` package here is a TEST STUB (a tmp dir on PYTHONPATH): a dataclass ``ServerArgs`` with
SGLang 0.5.9's secret field names and a ``launch_server`` that logs ``f"{server_args=}"`` the way
SGLang's engine.py does, in the parent and in a multiprocessing "spawn" child (SGLang's start method).
The real SGLang 0.5.9 ``ServerArgs`` behind the launcher is tested by tests/e2e/test_verify_lab.py
(the protocol double on the lab host, journal read back)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[1] / "roles" / "sglang_service" / "files" / "sglang_launch.py"
KEY = "LaunchTestKey-0123456789abcdef"  # test-only value

STUB_SERVER_ARGS = """
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str = "/m"
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: Optional[str] = None
    admin_api_key: Optional[str] = None
    served_model_name: Optional[str] = None
"""

# like SGLang's run_scheduler_process: the child's target lives in an importable module
STUB_CHILD = """
def child(server_args):
    print(f"child {server_args=}", flush=True)
"""

STUB_LAUNCH = """
import multiprocessing as mp
import sys

from sglang.srt.child import child
from sglang.srt.server_args import ServerArgs

if __name__ == "__main__":
    argv = sys.argv[1:]
    key = argv[argv.index("--api-key") + 1] if "--api-key" in argv else None
    server_args = ServerArgs(api_key=key, admin_api_key=key)
    print(f"{server_args=}", flush=True)
    mp.set_start_method("spawn", force=True)
    proc = mp.Process(target=child, args=(server_args,))
    proc.start()
    proc.join()
    print(f"argv0={sys.argv[0]} rest={len(argv)}", flush=True)
"""


@pytest.fixture
def stub(tmp_path: Path) -> Path:
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(textwrap.dedent(STUB_SERVER_ARGS))
    (pkg / "srt" / "child.py").write_text(textwrap.dedent(STUB_CHILD))
    (pkg / "launch_server.py").write_text(textwrap.dedent(STUB_LAUNCH))
    return tmp_path


def run(args: list[str], pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [sys.executable, str(SHIM), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_module_runs_with_the_key_masked_in_parent_and_spawned_child(stub: Path) -> None:
    done = run(["-m", "sglang.launch_server", "--api-key", KEY], stub)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert KEY not in out + done.stderr
    lines = out.splitlines()
    parent = next(ln for ln in lines if ln.startswith("server_args="))
    child = next(ln for ln in lines if ln.startswith("child server_args="))
    for line in (parent, child):
        assert "api_key='********'" in line, line
        assert "admin_api_key='********'" in line, line
        assert "host='127.0.0.1', port=30000" in line, line
    # the module saw python -m's argv: its name first, then exactly the arguments
    assert "argv0=sglang.launch_server rest=2" in out


def test_unset_key_shows_none(stub: Path) -> None:
    done = run(["-m", "sglang.launch_server"], stub)
    assert done.returncode == 0, done.stderr
    assert "api_key=None" in done.stdout


def test_script_target_and_no_sglang(tmp_path: Path) -> None:
    script = tmp_path / "target.py"
    script.write_text("import sys\nprint('ran', __name__, sys.argv[1:])\n")
    done = run([str(script), "--x", "1"], tmp_path)  # no sglang importable: nothing to mask
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran __main__ ['--x', '1']"


def test_usage_without_a_target(tmp_path: Path) -> None:
    done = run(["--model-path", "/m"], tmp_path)
    assert done.returncode != 0
    assert "usage: sglang_launch.py" in done.stderr
