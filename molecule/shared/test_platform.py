"""Shared molecule check: the instance runs the distribution the scenario is about.

The image is picked by one variable, SGLANG_TEST_IMAGE (molecule/base.yml; default Debian 12), never by a
copied platform block. A scenario that needs Ubuntu 24.04 (a `.requires-ubuntu2404` file in its
directory: the seed's OS) must really have run there: scripts/test sets SGLANG_TEST_IMAGE for it; run
by hand without it, this test fails and says how to run it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# image name -> (ID, VERSION_ID) of its /etc/os-release
IMAGES = {
    "sglang-deploy/debian12:latest": ("debian", "12"),
    "sglang-deploy/ubuntu2404:latest": ("ubuntu", "24.04"),
}
UBUNTU = "sglang-deploy/ubuntu2404:latest"


def os_release(host: Any) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in host.file("/etc/os-release").content_string.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value.strip().strip('"')
    return fields


def test_instance_runs_the_scenarios_distribution(host: Any) -> None:
    scenario = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
    image = os.environ.get("SGLANG_TEST_IMAGE") or "sglang-deploy/debian12:latest"
    release = os_release(host)
    seen = (release.get("ID"), release.get("VERSION_ID"))
    if (scenario / ".requires-ubuntu2404").is_file():
        assert seen == ("ubuntu", "24.04"), (
            f"scenario {scenario.name} needs Ubuntu 24.04 but its instance runs {seen} (image {image}): "
            f"run it with SGLANG_TEST_IMAGE={UBUNTU} (scripts/test does)"
        )
    if image in IMAGES:
        assert seen == IMAGES[image], (
            f"image {image} should be {IMAGES[image]}, its /etc/os-release says {seen}"
        )
