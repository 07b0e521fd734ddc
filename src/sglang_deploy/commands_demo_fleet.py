"""`sglang-deploy lab demo --fleet`: a rolling upgrade behind SGLang's own router on the lab, with a live
count of the requests sent through the router and of those that failed.

The fleet (lab_fleet.py, the same code as the fleet e2e's): a router container whose sglang-router is
installed and started by the REAL sglang_router role, and two replica containers, each the real
sglang-kimi unit running the named TEST DOUBLE sglang-protocol-double (playbooks/lab/: SGLang's HTTP
protocol with simulated tokens, NOT an SGLang server; the unit's Description=, this output, the
production document and the report say so). On this machine's disk an 11 GB release per replica is
the cost that matters: the replicas share one release store, docker volumes mounted at
/opt/sglang/releases and /opt/sglang/locks (as hosts sharing a software mount; each keeps its own
`current`, unit, records and configuration). Steps:

1. the fleet's network, volumes and containers (made, or the running ones reused) and its inventory
   (artifacts/demo/<name>-fleet/inventory/fleet.yml, the router's client and admin keys made for it);
2. the release: `up --serial 1` of the replicas without the router (the first builds the release in
   the shared store, the second finds it complete and switches its `current`; one at a time, since two
   builds of one release directory would collide); skipped when every replica has one;
3. playbooks/lab/install_double.yml on the replicas;
4. `up` of the fleet with the double: the router installed and started, each unit started on the
   double, verify's baseline recorded per replica, Stage 6 registers both; the router lists both healthy;
5. the roll: `up --serial 1` of an upgrade (the double's launch changed, so every unit restarts) while
   client threads send /generate through the router (--disable-retries: zero failed comes from the
   drain, not from retries), a live count printed; each replica is drained out of the router before its
   restart and readmitted after its gated verify;
6. `verify` of the fleet: report.md, a chart per replica, production_v2.md;
7. `status`: every replica in the router and healthy.

Exit 0 only when every step did what it shows, the roll dropped no request among them."""

from __future__ import annotations

import json
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import commands_status, commands_verify
from .commands_demo import DESCRIPTION, PLAIN_VARS, Steps
from .lab import Lab
from .lab_fleet import (
    Fleet,
    Load,
    create_containers,
    double_vars,
    most_out_at_once,
    remove_fleet,
    write_inventory,
)
from .options import parse_serial
from .verify_report import collect

REPLICAS = 2
UNIT = "sglang-kimi"
DRAIN_TIMEOUT_S = 60
# verify's benchmark in each rolled replica's run: one level, small (tests/e2e/test_roll_lab.py's)
SERVER_VARS: dict[str, Any] = {
    "verify_levels": [1],
    "verify_bench_num_prompts": 12,
    "verify_bench_warmup_requests": 1,
    "verify_bench_output_len": 48,
    # the double imports SGLang's modules: 148 s to the first /health measured on a loaded 2-core machine
    "verify_http_wait_s": 400,
    "sglang_router_drain_timeout_s": DRAIN_TIMEOUT_S,
    "sglang_service_timeout_stop_sec": DRAIN_TIMEOUT_S,
    **double_vars(description=DESCRIPTION),
}
# zero failed requests must come from the drain, not from the router sending a failed request again
ROUTER_MORE: dict[str, Any] = {"sglang_router_disable_retries": True}
TTFT_MS, UPGRADE_TTFT_MS = 20, 22  # the upgrade: the double's time to first token (its launch changes)
UPGRADE = double_vars("--double-ttft-ms", str(UPGRADE_TTFT_MS), description=DESCRIPTION)
RELEASE_MOUNTS = {"releases": "/opt/sglang/releases", "locks": "/opt/sglang/locks"}


def fleet_prefix(name: str) -> str:
    """The fleet's containers are <name>-fleet-router and <name>-fleet-1..2 (never the lab host's name,
    nor the fleet e2e's sglang-lab-roll-*, -status-*, -cli-fleet-*, -fleet-seed)."""
    return f"{name}-fleet"


def mounts(prefix: str) -> dict[str, str]:
    """Named docker volumes -> the paths they hold on each replica (the shared release store)."""
    return {f"{prefix}-{volume}": path for volume, path in RELEASE_MOUNTS.items()}


def saved_keys(inventory: Path, router: str) -> tuple[str, str]:
    """The router's client and admin keys of an earlier demo's inventory, else ("", "")."""
    if not inventory.is_file():
        return "", ""
    data = yaml.safe_load(inventory.read_text()) or {}
    hosts = data.get("all", {}).get("children", {}).get("sglang_routers", {}).get("hosts", {})
    host = hosts.get(router) or {}
    return str(host.get("sglang_router_api_key") or ""), str(host.get("sglang_router_admin_api_key") or "")


def roll_verdict(rollout: dict[str, Any], replicas: list[str]) -> tuple[bool, str]:
    """Whether the roll's rollout.json shows one batch per replica in order, none failed or left out."""
    batches = [list(b["hosts"]) for b in rollout.get("batches", [])]
    failed = [h for b in rollout.get("batches", []) for h in b.get("failed", [])]
    ok = (
        batches == [[r] for r in replicas] and not failed and not rollout.get("stopped")
        and not rollout.get("not_started") and rollout.get("rc") == 0
    )  # fmt: skip
    text = f"{len(batches)} batch(es) of 1, failed: {', '.join(failed) or 'none'}"
    if rollout.get("stopped"):
        text += f", STOPPED: {rollout['stopped']}"
    return ok, text


@dataclass
class FleetDemo(Steps):
    fleet: Fleet = field(default_factory=lambda: Fleet.named("", 0, Path()))
    sent: int = 0
    failed: int = 0
    roll_s: float = 0.0

    def __post_init__(self) -> None:
        prefix = fleet_prefix(self.args.name)
        self.fleet = Fleet.named(prefix, REPLICAS, self.out)

    @property
    def inventory(self) -> Path:
        return self.out / "inventory" / "fleet.yml"

    @property
    def servers_inventory(self) -> Path:
        return self.out / "inventory" / "servers.yml"

    def lab(self, name: str) -> Lab:
        return Lab(self.root, name=name)

    def on_host(self, name: str, *cmd: str) -> str:
        code, output = self.lab(name).exec(*cmd)
        if code != 0:
            raise OSError(f"{name}: {' '.join(cmd[:3])}... exited {code}: {output[-600:]}")
        return output.strip()

    def invocations(self) -> dict[str, str]:
        return {
            n: self.on_host(n, "systemctl", "show", "-p", "InvocationID", "--value", UNIT)
            for n in self.fleet.replicas
        }

    def hosts(self) -> tuple[bool, str]:
        """The network, the shared release store's volumes, the containers; the inventory."""
        fleet = self.fleet
        fleet.router_key, fleet.admin_key = saved_keys(self.inventory, fleet.router)
        if not fleet.router_key or not fleet.admin_key:  # made for this fleet, kept in its inventory only
            fleet.router_key, fleet.admin_key = secrets.token_hex(24), secrets.token_hex(24)
        create_containers(fleet, self.root, mounts=mounts(fleet.prefix), log=lambda m: print(m, flush=True))
        write_inventory(fleet, self.root, SERVER_VARS, router_more=ROUTER_MORE)
        self.inventory.chmod(0o600)  # it holds the router's keys
        top = yaml.safe_load(self.inventory.read_text())
        del top["all"]["children"]["sglang_routers"]
        self.servers_inventory.write_text(yaml.safe_dump(top, sort_keys=False))
        for baseline in (self.out / "inventory" / "host_vars").glob("*/verify_baseline.yml"):
            baseline.unlink()  # each demo records its own
        names = ", ".join(fleet.replicas)
        return True, (
            f"router {fleet.router}, replicas {names} on {fleet.network} ({fleet.subnet}); release store "
            f"{', '.join(mounts(fleet.prefix))} shared by the replicas; inventory {self.inventory}"
        )

    def release(self) -> tuple[bool, str]:
        """`up --serial 1` of the replicas (no router in that inventory) without the double."""
        missing = [
            n
            for n in self.fleet.replicas
            if self.lab(n).exec("test", "-x", "/opt/sglang/current/venv/bin/python")[0]
        ]
        if not missing:
            current = {self.on_host(n, "readlink", "/opt/sglang/current") for n in self.fleet.replicas}
            return True, f"already there on every replica ({', '.join(sorted(current))})"
        rc = self.up(
            PLAIN_VARS, inventory=self.servers_inventory, serial=parse_serial("1"), max_fail_percent=0
        )
        current = {self.on_host(n, "readlink", "/opt/sglang/current") for n in self.fleet.replicas}
        ok = rc == 0 and len(current) == 1
        return (
            ok,
            f"`up --serial 1` of {', '.join(missing)} rc={rc}; current on every replica: "
            f"{', '.join(sorted(current))}",
        )

    def install(self) -> tuple[bool, str]:
        return self.install_double(inventory=self.servers_inventory)

    def fleet_up(self) -> tuple[bool, str]:
        rc = self.up()
        expected = self.fleet.expected_workers()
        seen = self.fleet.wait_workers(expected)
        units = {
            n: self.on_host(n, "systemctl", "show", "-p", "Description", "--value", UNIT)
            for n in self.fleet.replicas
        }
        baselines = [
            n
            for n in self.fleet.replicas
            if (self.out / "inventory" / "host_vars" / n / "verify_baseline.yml").is_file()
        ]
        ok = (
            rc == 0
            and seen == expected
            and all(u == DESCRIPTION for u in units.values())
            and len(baselines) == REPLICAS
        )
        healthy = sum(seen.values())
        return ok, (
            f"`up` rc={rc}; the router lists {healthy} of {REPLICAS} replicas healthy; baselines recorded: "
            f"{', '.join(baselines) or 'none'}; units: {'the test double' if ok else units}"
        )

    def live(self) -> bool:
        return self.args.progress == "live" or (self.args.progress == "auto" and sys.stdout.isatty())

    def roll(self) -> tuple[bool, str]:
        before = self.invocations()
        artifacts = self.out / "roll"
        every = 5.0 if self.live() else 30.0
        with Load(self.fleet, report=self.say, every=every) as load:
            time.sleep(2)  # the clients run before the roll starts
            started = time.monotonic()
            rc = self.up(UPGRADE, serial=parse_serial("1"), max_fail_percent=0, artifacts=artifacts)
            self.roll_s = time.monotonic() - started
            time.sleep(2)
        self.say(load.count_line())
        self.sent, self.failed = load.sent, len(load.failed)
        rollout = json.loads((artifacts / "rollout.json").read_text())
        batches_ok, batches = roll_verdict(rollout, self.fleet.replicas)
        after = self.invocations()
        restarted = [n for n in self.fleet.replicas if after[n] != before[n]]
        most_out = most_out_at_once(load.polls, REPLICAS)
        expected = self.fleet.expected_workers()
        back = self.fleet.wait_workers(expected) == expected
        self.paths["rollout.json"] = str(artifacts / "rollout.json")
        ok = (
            rc == 0 and batches_ok and self.sent > 0 and self.failed == 0 and restarted == self.fleet.replicas
            and most_out <= 1 and back
        )  # fmt: skip
        first = f"; first failures: {load.failed[:3]}" if load.failed else ""
        return ok, (
            f"`up --serial 1` rc={rc} in {self.roll_s:.0f} s, {batches}; {self.sent} requests sent through "
            f"the router, {self.failed} failed{first}; restarted: {', '.join(restarted) or 'none'}; at most "
            f"{most_out} replica out of the router at once; all back in: {back}"
        )

    def verify(self) -> tuple[bool, str]:
        report_dir = self.out / "verify"
        args = self.namespace(
            playbook="playbooks/verify.yml", report_dir=report_dir, extra_vars=[json.dumps(UPGRADE)]
        )
        rc = commands_verify.run(args)
        found = collect(report_dir / "fetched")
        statuses = {}
        for name in self.fleet.replicas:
            entry = found.get(name)
            statuses[name] = entry.data.get("status") if entry is not None else None
            if entry is not None and entry.doc_file is not None:
                self.paths[f"production_v2.md ({name})"] = str(entry.doc_file)
            chart = report_dir / f"throughput-{name}.png"
            if chart.is_file():
                self.paths[f"chart ({name})"] = str(chart)
        self.paths["report"] = str(report_dir / "report.md")
        ok = (
            rc == 0 and all(s == "passed" for s in statuses.values()) and (report_dir / "report.md").is_file()
        )
        return ok, f"verify rc={rc}; " + ", ".join(f"{n}: {s}" for n, s in statuses.items())

    def status(self) -> tuple[bool, str]:
        rc = commands_status.run(self.namespace(extra_vars=[json.dumps(UPGRADE)]))
        return rc == 0, f"status rc={rc} (0: every replica in the router and healthy)"

    def run(self) -> int:
        n = REPLICAS
        plan = [
            ("fleet hosts", f"a router host and {n} replica hosts, the fleet's inventory", self.hosts),
            ("release", "the release on every replica (built once, in the shared store)", self.release),
            ("test double", "sglang-protocol-double and the lab tokenizer on the replicas", self.install),
            ("up", f"sglang-router in front of {n} replicas on the test double, baselines", self.fleet_up),
            ("roll", "`up --serial 1` behind the router under load: 0 failed requests", self.roll),
            ("verify", "every replica passes its gate; report.md, charts, production_v2.md", self.verify),
            ("status", "every replica in the router and healthy", self.status),
        ]  # fmt: skip
        return self.summary(self.run_plan(plan))

    def summary(self, ok: bool) -> int:
        minutes = self.print_steps(f"{self.fleet.router} + {', '.join(self.fleet.replicas)}")
        setup = sum(
            s.seconds for s in self.steps if s.title in ("fleet hosts", "release", "test double", "up")
        )
        print(
            f"  roll behind the router: {self.sent} requests sent, {self.failed} failed ({self.roll_s:.0f} s)"
        )
        if ok:
            print(
                "  The roll is what the demo shows: one replica at a time drained out of SGLang's router, "
                "restarted, verified and readmitted, and no request through the router failed."
            )
        print(f"  took {minutes:.1f} min (setup {setup / 60:.1f} min)")
        self.print_paths()
        print(f"  remove the fleet: sglang-deploy lab destroy --fleet --name {self.args.name} (make down)")
        print(f"lab demo: {'done, as expected' if ok else 'UNEXPECTED: ' + self.steps[-1].title}", flush=True)
        return 0 if ok else 1


def destroy(root: Path, name: str) -> int:
    """`lab destroy --fleet`: the demo fleet's containers, network and release store removed."""
    prefix = fleet_prefix(name)
    removed = remove_fleet(
        Fleet.named(prefix, REPLICAS, root), tuple(mounts(prefix)), log=lambda m: print(m, flush=True)
    )
    if not removed:
        print(f"lab fleet {prefix}: absent, nothing to do")
    return 0
