"""Rolling deployment: `up --serial N --max-fail-percent P`.

site.yml is five plays (preflight, cuda, stack, service, verify). Ansible's play `serial` batches each
play on its own, so with it every host would get the new stack and unit (plays 2-4) before the first
batch is verified (play 5): a broken release would reach the whole fleet. A roll here runs the whole
site.yml on one batch at a time (`--limit` = the batch), in inventory order, and decides after each
batch: when more than P % of the batch failed (any stage, the verify gate included) or was
unreachable, the roll stops and the later batches are never touched. Inside a batch's run the plays
get `max_fail_percentage` = P (variable sglang_max_fail_percentage), so a batch whose hosts fail
beyond P stops at that stage instead of carrying its other hosts on.

A batch is made of whole replicas (host variable ``sglang_replica``, default the host's own name: one
host = one replica; the hosts of a replica in inventory order are its ranks): ``--serial N`` counts
replicas, so a multi-node replica rolls as one unit. With a router (group sglang_routers) each batch's
run takes its restarting replicas out of the router first and puts them back after a passed verify
(site.yml's Roll plays, docs/rolling-upgrade.md); a failed replica stays out and, with the roll's
default --max-fail-percent 0, stops the roll.

Pure logic (batches, the stop decision) plus the host list, read with Ansible's InventoryManager."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .options import Serial

HOSTS_PATTERN = "sglang_servers"  # every play of site.yml targets this group


def replica_groups(hosts: list[str], replica_of: dict[str, str] | None = None) -> list[list[str]]:
    """The hosts grouped by replica, in order of each replica's first host (its rank 0); a host without
    an entry in ``replica_of`` is a replica of its own (the plays' rule: filter
    sglang.deploy.roll_replicas)."""
    groups: dict[str, list[str]] = {}
    for host in hosts:
        groups.setdefault((replica_of or {}).get(host) or host, []).append(host)
    return list(groups.values())


def batches(hosts: list[str], serial: Serial, replica_of: dict[str, str] | None = None) -> list[list[str]]:
    """Batches of ``serial`` replicas each (a number, or a percentage of the replicas), every replica
    whole, in inventory order."""
    replicas = replica_groups(hosts, replica_of)
    size = serial.size(len(replicas))
    if not size:
        return []
    return [[h for replica in replicas[i : i + size] for h in replica] for i in range(0, len(replicas), size)]


def exceeds(failed: int, size: int, max_fail_percent: float) -> bool:
    """Ansible's rule: stop when the failed share of the batch is ABOVE the percentage."""
    return size > 0 and failed * 100.0 / size > max_fail_percent


def failed_hosts(summary: dict[str, Any], batch: list[str], rc: int) -> list[str]:
    """The hosts of a batch that failed or were unreachable. A run that failed without a recap for
    a host (the playbook did not start, a play aborted the run) counts that host as failed."""
    hosts: dict[str, Any] = summary.get("hosts", {})
    failed = [h for h in batch if h in hosts and hosts[h].get("status") != "ok"]
    if rc != 0:
        failed += [h for h in batch if h not in hosts]
    return [h for h in batch if h in failed]


@dataclass
class Rollout:
    serial: Serial
    max_fail_percent: float
    hosts: list[str]
    runs: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    replica_of: dict[str, str] = field(default_factory=dict)

    def plan(self) -> list[list[str]]:
        return batches(self.hosts, self.serial, self.replica_of)

    def replicas(self) -> int:
        return len(replica_groups(self.hosts, self.replica_of))

    def record(self, batch: list[str], run_id: str, rc: int, summary: dict[str, Any]) -> bool:
        """Note one batch's run; True when the roll goes on."""
        failed = failed_hosts(summary, batch, rc)
        self.runs.append({"hosts": batch, "run_id": run_id, "rc": rc, "failed": failed})
        if exceeds(len(failed), len(batch), self.max_fail_percent):
            self.stopped = (
                f"{len(failed)} of {len(batch)} host(s) of batch {len(self.runs)} failed "
                f"({', '.join(failed)}): more than --max-fail-percent {self.max_fail_percent:g}%"
            )
            return False
        return True

    def not_started(self) -> list[str]:
        done = {h for run in self.runs for h in run["hosts"]}
        return [h for h in self.hosts if h not in done]

    def rc(self) -> int:
        return next((int(run["rc"]) for run in self.runs if run["rc"]), 0)

    def report(self) -> dict[str, Any]:
        return {
            "serial": str(self.serial),
            "max_fail_percent": self.max_fail_percent,
            "hosts": self.hosts,
            "replicas": replica_groups(self.hosts, self.replica_of),
            "batches": self.runs,
            "stopped": self.stopped,
            "not_started": self.not_started(),
            "rc": self.rc(),
        }


def fleet_hosts(inventory: Path, limit: str | None, playbook_dir: Path) -> list[str]:
    """The hosts site.yml would run on (group sglang_servers, --limit applied), in inventory order.
    Ansible's inventory code is imported here, for a rolling `up` only (0.3 s at every CLI start)."""
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]  # noqa: PLC0415
    from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]  # noqa: PLC0415
    from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]  # noqa: PLC0415

    loader = DataLoader()
    loader.set_basedir(str(playbook_dir))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            manager = InventoryManager(loader=loader, sources=[str(inventory)])
            if limit:
                manager.subset(limit)
            return [host.name for host in manager.get_hosts(HOSTS_PATTERN)]
        except AnsibleError:
            return []


def fleet_replicas(inventory: Path, hosts: list[str], playbook_dir: Path) -> dict[str, str]:
    """host -> its ``sglang_replica`` where the inventory (host/group vars, group_vars/host_vars
    files) sets one as plain text; hosts without one are replicas of their own. A templated value is
    not rendered here: such a host counts as its own replica (say so in the inventory as text)."""
    from ansible.errors import AnsibleError  # noqa: PLC0415
    from ansible.inventory.manager import InventoryManager  # noqa: PLC0415
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415
    from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]  # noqa: PLC0415

    loader = DataLoader()
    loader.set_basedir(str(playbook_dir))
    out: dict[str, str] = {}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            manager = InventoryManager(loader=loader, sources=[str(inventory)])
            variables = VariableManager(loader=loader, inventory=manager)
            for name in hosts:
                host = manager.get_host(name)
                value = (
                    variables.get_vars(host=host, include_hostvars=False).get("sglang_replica")
                    if host
                    else None
                )
                if isinstance(value, str) and value and "{" not in value:
                    out[name] = str(value)
        except AnsibleError:
            return {}
    return out
