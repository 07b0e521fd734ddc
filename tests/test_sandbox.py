"""The one description of the service's sandbox (plugins/module_utils/sandbox.py): the unit's hardening
lines, unchanged by the move out of the template, and the systemd-run argv verify's benchmark runs in.
The transient unit itself runs for real in tests/e2e/test_verify_lab.py (bench_serving as the service
user, a model's tokenizer code that may not run as root)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from modload import REPO, load_module

S = load_module("sandbox_utils", REPO / "plugins/module_utils/sandbox.py")
F = load_module("sandbox_filters", REPO / "plugins/filter/sandbox.py")

# The unit's hardening block as roles/sglang_service/templates/sglang.service.j2 wrote it before the
# move, with the role's default filter: a host converged before keeps a byte-identical unit (no restart).
UNIT_BLOCK = """NoNewPrivileges=yes
CapabilityBoundingSet=
AmbientCapabilities=
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
KeyringMode=private
SystemCallArchitectures=native
SystemCallFilter=@system-service pidfd_getfd
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
UMask=0027
"""


def test_unit_lines_are_the_units_hardening() -> None:
    defaults = yaml.safe_load((REPO / "roles/sglang_service/defaults/main.yml").read_text())
    lines = F.sglang_sandbox_lines(
        defaults["sglang_service_syscall_filter"], defaults["sglang_service_syscall_deny"]
    )
    assert "\n".join(lines) + "\n" == UNIT_BLOCK
    # the module's defaults are the role's (used where the service role's variables are unknown)
    assert list(S.DEFAULT_SYSCALL_FILTER) == defaults["sglang_service_syscall_filter"]
    assert list(S.DEFAULT_SYSCALL_DENY) == defaults["sglang_service_syscall_deny"]
    assert F.sglang_sandbox_lines(None) == lines


def test_unit_lines_without_a_syscall_filter() -> None:
    lines = F.sglang_sandbox_lines([], ["@privileged"])
    assert not [line for line in lines if line.startswith("SystemCall") and "Architectures" not in line]
    assert F.sglang_sandbox_lines(["@system-service"], [])[-4:-2] == [
        "SystemCallFilter=@system-service",
        "SystemCallErrorNumber=EPERM",
    ]


def test_the_template_renders_the_one_description() -> None:
    template = (REPO / "roles/sglang_service/templates/sglang.service.j2").read_text()
    assert "sglang.deploy.sglang_sandbox_lines" in template
    for line in S.HARDENING + S.TAIL:
        assert line not in template, f"{line} written twice (template and module_utils/sandbox.py)"


def test_run_argv_is_the_units_sandbox_as_the_service_user() -> None:
    argv = F.sglang_sandbox_run(
        "sglang",
        unit="sglang-verify-x1.service",
        workdir="/var/lib/sglang-deploy/sglang-verify-x1",
        read_write=["/var/lib/sglang-deploy/sglang-verify-x1", "/var/lib/sglang-deploy/bench/run"],
        runtime_max_sec=600,
        loopback_only=True,
        setenv=["HOME=/var/lib/sglang-deploy/sglang-verify-x1"],
    )
    assert argv[0] == "systemd-run"
    assert argv[-1] == "--"
    for flag in (
        "--wait",
        "--pipe",
        "--collect",
        "--uid=sglang",
        "--gid=sglang",
        "--unit=sglang-verify-x1.service",
    ):
        assert flag in argv
    props = [argv[i + 1] for i, word in enumerate(argv) if word == "-p"]
    assert props[: len(S.HARDENING)] == list(S.HARDENING)
    for prop in (
        "SystemCallFilter=@system-service pidfd_getfd",
        "SystemCallFilter=~@privileged",
        "DevicePolicy=closed",
        "IPAddressDeny=any",
        "IPAddressAllow=localhost",
        "RuntimeMaxSec=600",
        "ReadWritePaths=/var/lib/sglang-deploy/sglang-verify-x1 /var/lib/sglang-deploy/bench/run",
    ):
        assert prop in props
    assert not [p for p in props if p.startswith("DeviceAllow")]  # a client needs no GPU
    remote = F.sglang_sandbox_run(
        "svc",
        group="gpu",
        unit="b.service",
        workdir="/w",
        read_write=["/w"],
        runtime_max_sec=5,
        loopback_only=False,
    )
    assert "--gid=gpu" in remote
    assert "IPAddressDeny=any" not in remote


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("unit", "x.service; rm -rf /"),
        ("unit", "x"),
        ("workdir", "relative"),
        ("workdir", "/a b"),
        ("read_write", ["/ok", "/tmp/x\n"]),
        ("setenv", ["A=$(id)"]),
        ("setenv", ["SECRET"]),
        ("syscall_filter", ["@system-service", "a b"]),
        ("runtime_max_sec", 0),
        ("read_write", []),
    ],
)
def test_run_argv_refuses_what_is_not_a_plain_word(field: str, value: object) -> None:
    args: dict[str, object] = {
        "unit": "b.service",
        "workdir": "/w",
        "read_write": ["/w"],
        "runtime_max_sec": 5,
        "loopback_only": True,
    }
    args[field] = value
    with pytest.raises(ValueError, match=r"sglang_s|syscall"):
        F.sglang_sandbox_run("sglang", **args)


def test_bad_user_refused() -> None:
    with pytest.raises(ValueError, match="user"):
        F.sglang_sandbox_run(
            "root;x", unit="b.service", workdir="/w", read_write=["/w"], runtime_max_sec=5, loopback_only=True
        )


def test_bench_runs_through_the_sandbox() -> None:
    tasks = (REPO / "roles/verify/tasks/bench_exec.yml").read_text()
    assert "sglang.deploy.sglang_sandbox_run(" in tasks
    assert Path(REPO / "roles/verify/files/verify_bench.py").read_text().count("pin_remote_code(") == 2
