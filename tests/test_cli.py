"""The command line: parsing, repo discovery, and `up` end to end on localhost (no docker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_deploy import cli
from sglang_deploy.paths import RepoNotFoundError, default_inventory, repo_root

REPO = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "data" / "runner_project"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def login_shell_env() -> dict[str, str]:
    """The environment of a plain login shell running `make up`: no venv on PATH, no VIRTUAL_ENV."""
    return {
        "HOME": os.environ.get("HOME", "/root"),
        "PATH": SYSTEM_PATH,
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }


def test_up_defaults() -> None:
    args = cli.build_parser().parse_args(["up"])
    assert args.handler == "sglang_deploy.commands_up:run"
    assert args.inventory is None
    assert args.playbook == "site.yml"
    assert args.extra_vars == []
    assert args.check is False
    assert args.progress == "auto"


def test_up_options() -> None:
    args = cli.build_parser().parse_args(
        ["up", "-i", "inv.yml", "--limit", "lab", "--tags", "preflight", "--skip-tags", "x", "--check",
         "-e", "a=1", "-e", "@f.yml", "--artifacts", "out", "--vault-password-file", "pw"]
    )  # fmt: skip
    assert args.inventory == Path("inv.yml")
    assert (args.limit, args.tags, args.skip_tags, args.check) == ("lab", "preflight", "x", True)
    assert args.extra_vars == ["a=1", "@f.yml"]
    assert args.artifacts == Path("out")
    assert args.vault_password_file == [Path("pw")]


@pytest.mark.parametrize(
    "argv",
    [
        ["lab", "create", "--name", "x", "--image", "img:1", "--timeout", "5"],
        ["lab", "--name", "x", "--image", "img:1", "create", "--timeout", "5"],
        ["lab", "--name", "x", "create", "--image", "img:1", "--timeout", "5"],
        ["lab", "create", "--timeout", "5", "--image", "img:1", "--name", "x"],
    ],
)
def test_lab_options_before_or_after_the_action(argv: list[str]) -> None:
    args = cli.build_parser().parse_args(argv)
    assert (args.action, args.name, args.image, args.timeout) == ("create", "x", "img:1", 5)


@pytest.mark.parametrize("action", ["create", "destroy", "status", "demo"])
def test_lab_defaults_in_either_position(action: str) -> None:
    parser = cli.build_parser()
    plain = parser.parse_args(["lab", action])
    assert (plain.name, plain.image) == ("sglang-lab", "sglang-deploy/debian12:latest")
    after = parser.parse_args(["lab", action, "--name", "n2"])
    before = parser.parse_args(["lab", "--name", "n2", action])
    for args in (after, before):
        assert (args.action, args.name, args.image) == (action, "n2", "sglang-deploy/debian12:latest")


def test_lab_demo_options() -> None:
    args = cli.build_parser().parse_args(
        ["lab", "demo", "--name", "d", "--artifacts", "a", "--progress", "plain"]
    )
    assert (args.action, args.name, args.artifacts, args.progress, args.verbose) == (
        "demo",
        "d",
        Path("a"),
        "plain",
        0,
    )
    assert args.handler == "sglang_deploy.commands_lab:run"


def test_lab_name_after_the_action_through_the_binary() -> None:
    """The console script accepts `lab status --name X`: the status of a container that does not
    exist is "absent", exit 1 (without a docker daemon: exit 1 with the daemon's error)."""
    exe = Path(sys.executable).parent / "sglang-deploy"
    name = "sglang-deploy-test-no-such-lab"
    proc = subprocess.run([str(exe), "lab", "status", "--name", name], cwd=REPO, env=login_shell_env(),
                          capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    assert "unrecognized arguments" not in proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    if "lab status failed" not in proc.stderr:  # dockerd answered
        assert f"lab {name}: absent" in proc.stdout


def test_lab_actions() -> None:
    parser = cli.build_parser()
    for action in ("create", "destroy", "status"):
        args = parser.parse_args(["lab", action])
        assert (args.action, args.name, args.handler) == (
            action,
            "sglang-lab",
            "sglang_deploy.commands_lab:run",
        )
    assert parser.parse_args(["lab", "--name", "x", "create", "--timeout", "5"]).timeout == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["lab", "explode"])
    with pytest.raises(SystemExit):
        parser.parse_args([])


def test_handlers_resolve() -> None:
    for command in (["up"], ["lab", "status"]):
        handler = cli.resolve_handler(cli.build_parser().parse_args(command).handler)
        assert callable(handler)


def test_console_script_help() -> None:
    exe = Path(sys.executable).parent / "sglang-deploy"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True).stdout
    assert "lab" in out
    assert "up" in out


def test_repo_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_DEPLOY_ROOT", raising=False)
    assert repo_root(REPO / "roles") == REPO
    assert default_inventory(REPO) == REPO / "inventory" / "lab.yml"
    monkeypatch.setenv("SGLANG_DEPLOY_ROOT", str(tmp_path))
    with pytest.raises(RepoNotFoundError, match="not an sglang-deploy checkout"):
        repo_root()


def test_up_through_the_cli_plain_progress(tmp_path: Path) -> None:
    """`sglang-deploy up` as a subprocess, stdout not a TTY: plain progress lines, rc of the playbook."""
    exe = Path(sys.executable).parent / "sglang-deploy"
    base = [str(exe), "up", "-i", str(PROJECT / "inventory.yml"), "--artifacts", str(tmp_path)]
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    ok = subprocess.run([*base, "--playbook", str(PROJECT.relative_to(REPO) / "pass.yml")],
                        cwd=REPO, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "TASK demo : Report changed" in ok.stdout
    assert "changed     localhost  demo : Report changed" in ok.stdout
    assert "status=successful rc=0" in ok.stdout
    assert "\x1b[" not in ok.stdout  # no terminal escapes in CI logs
    fail_args = ["--playbook", str(PROJECT.relative_to(REPO) / "fail.yml"), "-e", "demo_port=0"]
    bad = subprocess.run([*base, *fail_args], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "FAILED localhost: Validate the port" in bad.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed_tasks"][0]["task"] == "Validate the port"
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_up_missing_inventory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["up", "-i", str(tmp_path / "nope.yml")]) == 5
    assert "does not exist" in capsys.readouterr().err


def test_up_from_a_login_shell_without_the_venv_on_path(tmp_path: Path) -> None:
    """`make up` runs `.venv/bin/sglang-deploy up` from a shell whose PATH lacks .venv/bin: the CLI
    runs the ansible-playbook beside its interpreter and puts that dir first on the child's PATH."""
    exe = REPO / ".venv" / "bin" / "sglang-deploy"
    if not exe.exists():  # a venv elsewhere: the one running these tests
        exe = Path(sys.executable).parent / "sglang-deploy"
    env = login_shell_env()
    assert str(exe.parent) not in env["PATH"].split(os.pathsep)
    assert "VIRTUAL_ENV" not in env
    playbook = str(PROJECT.relative_to(REPO) / "path_tools.yml")
    inventory = PROJECT / "inventory.yml"
    proc = subprocess.run(
        [str(exe), "up", "-i", str(inventory), "--playbook", playbook, "--artifacts", str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "not found or was not executable" not in output
    assert proc.returncode == 0, output
    assert "status=successful rc=0" in proc.stdout
    command = json.loads(next((tmp_path / "runner" / "artifacts").glob("*/command")).read_text())
    assert command["command"][0] == str(exe.parent / "ansible-playbook")
    assert playbook in command["command"]
    assert command["env"]["PATH"].split(os.pathsep)[0] == str(exe.parent)


def test_up_closes_with_what_was_deployed_where(tmp_path: Path) -> None:
    """A successful `up` ends with what was deployed where, what the host could not do and the next
    commands, all from the facts the run exported (real runner; fixture playbook setting the roles'
    exported facts as a lab run does). In check mode, or when the run failed, no such block."""
    exe = Path(sys.executable).parent / "sglang-deploy"
    inventory = PROJECT / "inventory.yml"
    base = [str(exe), "up", "-i", str(inventory), "--artifacts", str(tmp_path),
            "--playbook", str(PROJECT.relative_to(REPO) / "up_closing.yml")]  # fmt: skip
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(base, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    closing = out[out.index("\ndeployed:\n") :]
    assert "  localhost: release 735752877b66 (/opt/sglang/releases/735752877b66)" in closing
    assert (
        "    unit sglang-kimi.service (/etc/systemd/system/sglang-kimi.service): enablement unknown"
        in closing
    )
    assert "    NCCL env /etc/sglang/nccl.env (profile none)" in closing
    assert "    verify verdict: skipped: not gated: the benchmark and the gate did not run" in closing
    assert "what could not be done here:" in closing
    assert (
        "  localhost: no GPU (lab mode): unit installed (enablement unknown, state unknown), not started"
        in closing
    )
    assert "  localhost: verify gpu, cuda, torch, nccl skipped: no GPU (lab mode)" in closing
    assert "  localhost: verify http skipped: sglang-kimi not running: not started in lab mode" in closing
    assert "benchmark and gate not run: verdict skipped" in closing
    inv = os.path.relpath(inventory, REPO)
    for command in ("drift", "verify", "releases"):
        assert f"  sglang-deploy {command} -i {inv}    # " in closing
    deployed = json.loads((tmp_path / "summary.json").read_text())["deployed"]["localhost"]
    assert deployed["release_id"] == "735752877b66"
    assert deployed["lab_mode"] is True
    assert deployed["verify_layers"]["http"]["status"] == "skipped"

    gpu = subprocess.run([*base, "-e", "fixture_lab_mode=false"], cwd=REPO, env=env, capture_output=True,
                         text=True, check=False, timeout=300)  # fmt: skip
    assert gpu.returncode == 0, gpu.stdout + gpu.stderr
    assert "no GPU (lab mode)" not in gpu.stdout.split("\ndeployed:\n")[1].split("what could not")[0]
    assert "unit installed" not in gpu.stdout  # the unit was to be started: nothing to say about it

    check = subprocess.run([*base, "--check"], cwd=REPO, env=env, capture_output=True, text=True,
                           check=False, timeout=300)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "\ndeployed:\n" not in check.stdout
