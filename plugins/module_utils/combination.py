"""The combination a verify verdict judges - the release, the launch spec's digest and the NCCL env
file's digest - and the known-bad match: one computation for the module sglang.deploy.deploy_state (on
the host: mark_bad, mark_good, status) and the filter sglang.deploy.deploy_state_known_bad (on the
controller: the service stage's refusal of a known-bad combination, from the state the run recorded when
it took the host lock).

Pure Python (no Ansible import); tests/test_deploy_state.py tests it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

KEYS = ("release_id", "launch_spec_sha256", "env_sha256")


def normalized(value: Mapping[str, Any] | None) -> dict[str, str]:
    """A combination's three keys as strings (a record's further keys - when, why - dropped)."""
    return {key: str((value or {}).get(key, "")) for key in KEYS}


def of_launch(
    launch: Mapping[str, Any], release_in_force: str, file_sha256: Mapping[str, Any]
) -> dict[str, str]:
    """The combination of a launch spec (deploy_state's option ``launch``) and the state in force (the
    release ``current`` points at, each managed file's sha256): this run's release and NCCL env digest
    first, the host's else. The launch spec's digest is that of Ansible's ``{'argv': ..., 'environment':
    ...} | to_json | hash('sha256')`` (json.dumps' defaults)."""
    spec = {"argv": list(launch["argv"]), "environment": launch.get("environment") or {}}
    env_file = str(launch.get("env_file") or "")
    return {
        "release_id": str(launch.get("release_id") or release_in_force),
        "launch_spec_sha256": hashlib.sha256(json.dumps(spec).encode()).hexdigest(),
        "env_sha256": str(launch.get("env_sha256") or file_sha256.get(env_file) or "absent"),
    }


def known_bad_match(records: Iterable[Mapping[str, Any]], combination: Mapping[str, Any] | None) -> Any:
    """The first known-bad record equal to ``combination`` (its three keys), or None."""
    if not combination:
        return None
    want = normalized(combination)
    return next((record for record in records if normalized(record) == want), None)


def known_bad(status: Mapping[str, Any], launch: Mapping[str, Any]) -> dict[str, Any]:
    """{combination, match}: the combination of ``launch`` against a deploy_state status (its ``release``,
    ``file_sha256``) and the status' known-bad record equal to it (None when there is none)."""
    combination = of_launch(launch, str(status.get("release") or ""), status.get("file_sha256") or {})
    return {"combination": combination, "match": known_bad_match(status.get("known_bad") or [], combination)}
