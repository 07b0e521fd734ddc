"""`sglang-deploy lab demo`: the whole job on the embedded lab host, visible on one machine.

The lab host has no GPU, so its real `sglang-kimi` unit runs the named TEST DOUBLE sglang-protocol-double
(playbooks/lab/sglang_protocol_double.py: SGLang's HTTP protocol with simulated tokens, NOT an SGLang
server; the unit's description, this output, the report and the production document say so). Steps:
the double installed (playbooks/lab/install_double.yml), `up` (the unit re-rendered with the double as
its launcher and started; verify records a baseline), `verify` (the benchmark at the seed's levels
scaled to the lab, gated against that baseline: passes; report.md and its chart), a deliberately
slower release (a copy of the release whose protocol-double.json makes the double 30 % slower, current
switched to it by hand) that `verify` fails at the gate and rolls back to the last good state.

The failed gate and the rollback are what the demo shows: exit 0 when every step did what it should
(the second verify failing and rolling back included), 1 when a step did something else."""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import commands_up, commands_verify
from .commands_run import execute, make_request
from .lab import Lab, LabError
from .lab_fleet import docker_host
from .paths import default_artifacts, repo_root
from .verify_report import collect

DOUBLE_NAME = "sglang-protocol-double"
DOUBLE = "/usr/local/lib/sglang-protocol-double/sglang_protocol_double.py"
ROOT = "/opt/sglang"
PYTHON = f"{ROOT}/current/venv/bin/python"
UNIT = "sglang-kimi"
TOKENS_PER_S = 100  # per request, the double's pace for the first release
SLOW_TOKENS_PER_S = 70  # the slower release: 30 % slower
SLOWER_PCT = 100 - 100 * SLOW_TOKENS_PER_S // TOKENS_PER_S
SLOW_SUFFIX = "-demo-slow"
DESCRIPTION = f"{DOUBLE_NAME}: a TEST DOUBLE of SGLang's HTTP server (sglang-deploy lab demo, no GPU)"
INSTALL_PLAYBOOK = "playbooks/lab/install_double.yml"
BANNER = (
    f"The server in this demo is {DOUBLE_NAME}, a TEST DOUBLE of SGLang's HTTP server (SGLang's own "
    "protocol models, simulated tokens, no GPU): every figure below is the double's, not SGLang's."
)
# The seed's table measured C = 1, 30, 250 (group_vars/all/baseline.yml); a tenth of it on the lab.
DEMO_VARS: dict[str, Any] = {
    "sglang_service_exec_override": [PYTHON, DOUBLE, "--double-tokens-per-s", str(TOKENS_PER_S)],
    "sglang_service_description": DESCRIPTION,
    "verify_levels": [1, 3, 25],
    "verify_bench_num_prompts": 25,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 32,
    # the double imports SGLang's modules: 148 s to the first /health measured on a loaded 2-core machine
    "verify_http_wait_s": 400,
}
# A converge of a fresh lab host, without the double (it needs the release's python to install).
PLAIN_VARS: dict[str, Any] = {
    "sglang_service_exec_override": [],
    "sglang_service_description": "",
    "verify_benchmark": "never",
}
# `current` -> a hard-linked copy of the release with a new receipt and the slower pace, switched the
# way the stack role switches (temporary link + rename(2)), the unit restarted on it.
SLOW_SCRIPT = """set -e
cd {root}/releases
rm -rf "$2"
cp -al "$1" "$2"
python3 -c 'import json, os, sys; p, rid = sys.argv[1:3]; d = json.load(open(p)); d["release_id"] = rid; \
os.unlink(p); open(p, "w").write(json.dumps(d, indent=2))' "$2/receipt.json" "$2"
printf '{{"tokens_per_s": %s}}\\n' "$3" > "$2/protocol-double.json"
ln -sfn "releases/$2" {root}/.current.demo
mv -T {root}/.current.demo {root}/current
systemctl restart {unit}
"""


def slow_release_argv(first: str, second: str, tokens_per_s: float) -> list[str]:
    """The command (for `docker exec`) that makes `second` a copy of release `first` whose test double
    runs at `tokens_per_s`, switches current to it and restarts the unit (SLOW_SCRIPT)."""
    return ["sh", "-c", SLOW_SCRIPT.format(root=ROOT, unit=UNIT), "sh", first, second, f"{tokens_per_s:g}"]


@dataclass
class Step:
    title: str
    expected: str
    ok: bool = False
    seconds: float = 0.0
    got: str = ""


@dataclass
class Steps:
    """What each demo (this one, commands_demo_fleet's) shares: the titled steps, each with what it
    should do and what it did, the in-process runs' options, the summary's rows."""

    args: argparse.Namespace
    root: Path
    out: Path
    steps: list[Step] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def inventory(self) -> Path:
        raise NotImplementedError

    def say(self, text: str) -> None:
        print(f"== lab demo: {text}", flush=True)

    def step(self, title: str, expected: str, action: Callable[[], tuple[bool, str]]) -> bool:
        self.say(f"{title} (expected: {expected})")
        started = time.monotonic()
        step = Step(title, expected)
        self.steps.append(step)
        try:
            step.ok, step.got = action()
        except (LabError, OSError, ValueError, KeyError) as exc:
            step.ok, step.got = False, f"{type(exc).__name__}: {exc}"
        step.seconds = time.monotonic() - started
        self.say(f"{title}: {'as expected' if step.ok else 'UNEXPECTED'} - {step.got} ({step.seconds:.0f} s)")
        return step.ok

    def run_plan(self, plan: list[tuple[str, str, Callable[[], tuple[bool, str]]]]) -> bool:
        """Each step in order until one does something else; True when all did what they should."""
        self.say(BANNER)
        for title, expected, action in plan:
            if not self.step(title, expected, action):
                return False
        return len(self.steps) == len(plan)

    def namespace(self, **more: Any) -> argparse.Namespace:
        base = {
            "inventory": self.inventory, "limit": None, "extra_vars": [], "vault_password_file": [],
            "vault_id": [], "artifacts": self.out / "artifacts", "verbose": self.args.verbose,
            "progress": self.args.progress, "json": False, "tags": None, "skip_tags": None,
        }  # fmt: skip
        return argparse.Namespace(**{**base, **more})

    def up(self, *extra: dict[str, Any], **more: Any) -> int:
        """`up` in this process on the demo's inventory: ``extra`` as -e, ``more``: other options."""
        args = self.namespace(**{
            "playbook": "site.yml", "check": False, "diff": False, "serial": None, "max_fail_percent": None,
            "extra_vars": [json.dumps(e) for e in extra], **more,
        })  # fmt: skip
        return commands_up.run(args)

    def playbook(self, playbook: str, title: str, **more: Any) -> tuple[bool, str]:
        """A playbook of the checkout on the demo's inventory (``more``: other options, such as another
        inventory), its progress and summary as `up`'s."""
        args = self.namespace(**more)
        request = make_request(args, playbook)
        if request is None:
            return False, "no run request"
        result = execute(request, args, f"lab demo: {title}")
        return result.rc == 0, f"{playbook} rc={result.rc}"

    def install_double(self, **more: Any) -> tuple[bool, str]:
        """playbooks/lab/install_double.yml on the demo's inventory (``more``: as for playbook())."""
        return self.playbook(INSTALL_PLAYBOOK, f"install the test double {DOUBLE_NAME}", **more)

    def print_steps(self, name: str) -> float:
        """The summary's head: the banner and one row per step; the minutes all steps took."""
        total = sum(s.seconds for s in self.steps)
        print("", flush=True)
        print(f"sglang-deploy lab demo on {name}: {BANNER}")
        for s in self.steps:
            print(f"  {'ok ' if s.ok else 'BAD'} {s.title:<26} {s.seconds:6.0f} s  {s.got}")
        return total / 60

    def print_paths(self) -> None:
        """The summary's tail: the files to open and the status command."""
        for name, path in self.paths.items():
            print(f"  {name}: {path}")
        print(f"  status: sglang-deploy status -i {self.inventory}")


@dataclass
class Demo(Steps):
    lab: Lab | None = None

    @property
    def host(self) -> Lab:
        if self.lab is None:
            raise LabError("the demo has no lab host")
        return self.lab

    @property
    def inventory(self) -> Path:
        return self.out / "inventory" / "lab.yml"

    @property
    def baseline(self) -> Path:
        return self.out / "inventory" / "host_vars" / self.host.name / "verify_baseline.yml"

    def exec(self, *cmd: str) -> str:
        code, output = self.host.exec(*cmd)
        if code != 0:
            raise LabError(f"{' '.join(cmd[:3])}... exited {code}: {output[-600:]}")
        return output

    def current(self) -> str:
        return self.exec("readlink", f"{ROOT}/current").strip().rsplit("/", 1)[-1]

    def prepare(self) -> tuple[bool, str]:
        """The demo's inventory (the lab host by its name, inventory/group_vars/lab.yml + the demo's
        variables, group_vars/all linked): its baseline and the slow release of an earlier demo gone."""
        inv = self.inventory.parent
        (inv / "group_vars").mkdir(parents=True, exist_ok=True)
        servers = {"children": {"lab": {"hosts": {self.host.name: docker_host(self.host.name)}}}}
        self.inventory.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": servers}}}))
        settings = yaml.safe_load((self.root / "inventory" / "group_vars" / "lab.yml").read_text())
        (inv / "group_vars" / "lab.yml").write_text(
            yaml.safe_dump({**settings, **DEMO_VARS}, sort_keys=False)
        )
        link = inv / "group_vars" / "all"
        if not link.is_symlink():
            link.symlink_to(self.root / "group_vars" / "all")
        self.baseline.unlink(missing_ok=True)
        code, _output = self.host.exec("test", "-x", PYTHON)
        if code == 0:
            release = self.current()
            if release.endswith(SLOW_SUFFIX):  # an earlier demo stopped before its rollback
                first = release.removesuffix(SLOW_SUFFIX)
                self.exec("sh", "-c", f"ln -sfn releases/{first} {ROOT}/.current.demo && "
                          f"mv -T {ROOT}/.current.demo {ROOT}/current")  # fmt: skip
            self.exec("sh", "-c", f"rm -rf {ROOT}/releases/*{SLOW_SUFFIX}")
        return True, f"inventory {self.inventory}"

    def converge(self) -> tuple[bool, str]:
        code, _output = self.host.exec("test", "-x", PYTHON)
        if code == 0:
            return True, f"already converged ({self.current()})"
        rc = self.up(PLAIN_VARS)
        return rc == 0, f"`up` rc={rc} (the lab host's first converge, without the double)"

    def up_with_double(self) -> tuple[bool, str]:
        rc = self.up({"verify_benchmark": "always"})
        unit = self.exec("systemctl", "show", "-p", "Description", "--value", UNIT).strip()
        active = self.exec("sh", "-c", f"systemctl is-active {UNIT} || true").strip()
        ok = rc == 0 and self.baseline.is_file() and unit == DESCRIPTION and active == "active"
        recorded = "baseline recorded" if self.baseline.is_file() else "NO baseline recorded"
        return ok, f"`up` rc={rc}, unit {active}, Description={unit!r}, {recorded} ({self.baseline})"

    def verify(self, name: str) -> tuple[int, dict[str, Any]]:
        report_dir = self.out / name
        shutil.rmtree(report_dir, ignore_errors=True)
        rc = commands_verify.run(self.namespace(playbook="playbooks/verify.yml", report_dir=report_dir))
        hosts = collect(report_dir / "fetched")
        entry = hosts.get(self.host.name)
        data = entry.data if entry is not None else {}
        if entry is not None and entry.doc_file is not None:
            self.paths["production_v2.md"] = str(entry.doc_file)
        self.paths[f"report ({name})"] = str(report_dir / "report.md")
        chart = report_dir / f"throughput-{self.host.name}.png"
        if chart.is_file():
            self.paths[f"chart ({name})"] = str(chart)
        return rc, data

    def verify_passes(self) -> tuple[bool, str]:
        rc, data = self.verify("verify-pass")
        results = data.get("results", {})
        gate = results.get("gate", {}).get("status")
        ok = rc == 0 and data.get("status") == "passed" and gate == "passed"
        return ok, f"verify rc={rc}, status {data.get('status')}, gate {gate}"

    def slow_release(self) -> tuple[bool, str]:
        first = self.current()
        second = f"{first}{SLOW_SUFFIX}"
        self.exec(*slow_release_argv(first, second, SLOW_TOKENS_PER_S))
        self.paths["first release"], self.paths["slow release"] = first, second
        ok = self.current() == second
        pace = f"the double at {SLOW_TOKENS_PER_S} instead of {TOKENS_PER_S} tok/s per request"
        return ok, f"current {first} -> {second} ({pace})"

    def verify_rolls_back(self) -> tuple[bool, str]:
        rc, data = self.verify("verify-rollback")
        results = data.get("results", {})
        gate = results.get("gate", {}).get("status")
        after = results.get("gate_after_rollback", {}).get("status")
        current = self.current()
        active = self.exec("sh", "-c", f"systemctl is-active {UNIT} || true").strip()
        first = self.paths.get("first release", "")
        ok = (
            rc != 0 and data.get("status") == "rolled back" and gate == "failed" and current == first
            and active == "active"
        )  # fmt: skip
        verdict = data.get("verdict") or {}
        failed = ", ".join(verdict.get("failed") or []) or "-"
        return ok, (
            f"verify rc={rc}, status {data.get('status')} (failed: {failed}), gate {gate}, gate after the "
            f"rollback {after}; current {current}, unit {active}"
        )

    def run(self) -> int:
        plan: list[tuple[str, str, Callable[[], tuple[bool, str]]]] = [
            ("prepare", "the demo's inventory", self.prepare),
            ("converge", "the lab host converged (`make up`)", self.converge),
            ("test double", f"{DOUBLE_NAME} and the lab tokenizer installed", self.install_double),
            ("up", "the unit runs the test double; verify records a baseline", self.up_with_double),
            ("verify", "the gate against the baseline passes; report and chart", self.verify_passes),
            ("slower release", f"a release {SLOWER_PCT} % slower made current", self.slow_release),
            ("verify the slower release", "the gate FAILS, the release rolled back", self.verify_rolls_back),
        ]  # fmt: skip
        return self.summary(self.run_plan(plan))

    def summary(self, ok: bool) -> int:
        minutes = self.print_steps(self.host.name)
        if ok:
            print(
                "  The failed gate and the rollback of the slower release are what the demo shows: the gate "
                "caught a 30 % regression and the last good state came back."
            )
        print(f"  took {minutes:.1f} min")
        self.print_paths()
        print("  `make up` puts the lab host back to the plain deployment (the unit installed, not started)")
        print(f"lab demo: {'done, as expected' if ok else 'UNEXPECTED: ' + self.steps[-1].title}", flush=True)
        return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    root = repo_root()
    artifacts = args.artifacts.expanduser().resolve() if args.artifacts else default_artifacts(root)
    if args.fleet:  # the fleet's own containers; the lab host <name> is not touched
        from .commands_demo_fleet import FleetDemo  # noqa: PLC0415 (a module of its own, imports this one)

        return FleetDemo(args, root, artifacts / "demo" / f"{args.name}-fleet").run()
    lab = Lab(root, name=args.name, image=args.image)
    lab.create(log=lambda message: print(message, flush=True))
    return Demo(args, root, artifacts / "demo" / args.name, lab=lab).run()
