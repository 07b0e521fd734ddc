"""Helpers of the sglang_service scenario tests: run the scenario's playbooks from the verifier."""

from __future__ import annotations

import os
from pathlib import Path

import moltest

SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path(__file__).resolve().parents[1]))
GOLDEN = SCENARIO / "golden"
TEST_KEY = "TestKey-0123456789-abcdefXYZ"
UNIT = "sglang-kimi"


def run_playbook(playbook: str = "service.yml", extra: dict | None = None, verbose: bool = False):
    """Run a playbook of the scenario against the test instance; returns (rc, output, recap)."""
    rc, out = moltest.run_playbook(
        playbook, *(["-v"] if verbose else []), extra=[extra] if extra else [], timeout=900
    )
    return rc, out, next(iter(moltest.recaps(out).values()), None)
