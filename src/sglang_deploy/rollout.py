"""Rolling deployment: `up --serial N --max-fail-percent P`.

site.yml is five plays (preflight, cuda, stack, service, verify). Ansible's play `serial` batches each
play on its own, so with it every host would get the new stack and unit (plays 2-4) before the first
batch is verified (play 5): a broken release would reach the whole fleet. A roll here runs the whole
site.yml on one batch at a time (`--limit` = the batch), in inventory order, and decides after each
batch: when more than P % of the batch failed (any stage, the verify gate included) or was
unreachable, the roll stops and the later batches are never touched. Inside a batch's run the plays
get `max_fail_percentage` = P (variable sglang_max_fail_percentage), so a batch whose hosts fail
beyond P stops at that stage instead of carrying its other hosts on.

Pure logic (batches, the stop decision) plus the host list, read with Ansible's InventoryManager."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .options import Serial

HOSTS_PATTERN = "sglang_servers"  # every play of site.yml targets this group


def batches(hosts: list[str], serial: Serial) -> list[list[str]]:
    size = serial.size(len(hosts))
    return [hosts[i : i + size] for i in range(0, len(hosts), size)] if size else []


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

    def plan(self) -> list[list[str]]:
        return batches(self.hosts, self.serial)

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
