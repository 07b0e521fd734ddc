"""autotune scenario (testinfra): the NCCL part says it skipped in lab mode; from the recorded
dual-H200 measurements it keeps the NCCL defaults, records that in the (temporary) inventory's
host_vars and writes the report on the host; the nccl_env role renders the record with profile
tuned; bad input fails naming the variable."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import moltest
import yaml

SCENARIO = Path(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", Path(__file__).resolve().parents[1]))
MEASUREMENTS = SCENARIO / "files" / "2026-11-30-h200x2-autotune-run1.json"
REPORT_DIR = "/var/lib/sglang-deploy"
ENV_FILE = "/etc/sglang/nccl.env"
KEPT = (
    "kept the NCCL defaults: no candidate's decode gain exceeded the measured noise "
    "(best: algo_ring +14.2% vs noise 21.6%, minimum gain 2%)"
)
SAFETY = ["NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1"]


def env_file(why: str, variables: list[str]) -> str:
    return "\n".join(
        [
            "# Managed by Ansible (role nccl_env): do not edit, changes are overwritten.",
            "# profile: tuned (requested: tuned, interconnect: nvlink)",
            f"# why: {why}",
            "# Loaded by the SGLang service (systemd EnvironmentFile=) and by benchmarks (set -a; . FILE).",
            *variables,
            "",
        ]
    )


def record(host: Any) -> dict[str, Any]:
    name = host.backend.get_hostname()
    path = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "autotune-inventory" / "host_vars" / name
    doc: dict[str, Any] = yaml.load((path / "nccl_tuned.yml").read_text(), Loader=UnsafeLoader)
    return doc


class UnsafeLoader(yaml.SafeLoader):
    """A YAML loader that reads Ansible's !unsafe strings as plain strings (what the record holds)."""


UnsafeLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))  # type: ignore[arg-type,union-attr]


def test_record_in_the_inventory(host: Any) -> None:
    doc = record(host)
    name = host.backend.get_hostname()
    text = (Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "autotune-inventory" / "host_vars" / name
            / "nccl_tuned.yml").read_text()  # fmt: skip
    assert "!unsafe 'reason': !unsafe 'kept the NCCL defaults" in text, text  # host data is never a template
    assert "\nsglang_nccl_profile: tuned\n" in text, text  # the switch is written plain
    assert doc["sglang_nccl_profile"] == "tuned"  # autotune_apply: true
    tuned = doc["nccl_env_tuned"]
    assert tuned["choice"] == "defaults"
    assert tuned["vars"] == {}
    assert tuned["changed_from_defaults"] is False
    assert tuned["reason"] == KEPT
    assert tuned["recorded_at"] == "2026-11-30T19:12:51Z"
    assert tuned["hardware"] == "2x NVIDIA H200"
    assert (tuned["torch"], tuned["nccl"]) == ("2.11.0+cu130", "2.28.9")
    assert tuned["source"] == f"recorded measurements {MEASUREMENTS}"
    assert tuned["rules"] == {"floor_pct": 5.0, "min_gain_pct": 2.0, "tie_pct": 1.0}
    table = tuned["table"]
    assert len(table) == 2 + 12, table  # header, rule, one row per candidate
    assert table[0].startswith("| candidate | variables | 8K us |")
    pcie = next(row for row in table if row.startswith("| pcie_seed |"))
    assert "78 (-74%)" in pcie
    assert "busbw -74% at 256M (floor -5%)" in pcie


def test_report_and_measurements_on_the_host(host: Any) -> None:
    for suffix in ("md", "json"):
        f = host.file(f"{REPORT_DIR}/autotune-nccl.{suffix}")
        assert f.is_file
        assert (f.user, f.group, f.mode) == ("root", "root", 0o644)
    md = host.file(f"{REPORT_DIR}/autotune-nccl.md").content_string
    assert f"**defaults**: {KEPT}" in md
    assert "- GPUs: 2x NVIDIA H200 (tp group);" in md
    assert "| **defaults** | (NCCL defaults) |" in md
    raw = json.loads(host.file(f"{REPORT_DIR}/autotune-nccl.json").content_string)
    assert raw == json.loads(MEASUREMENTS.read_text())


def test_env_file_renders_the_record(host: Any) -> None:
    f = host.file(ENV_FILE)
    assert f.is_file
    assert (f.user, f.group, f.mode) == ("root", "root", 0o644)
    why = "tuned: autotune result of this host (defaults, recorded 2026-11-30T19:12:51Z)"
    assert f.content_string == env_file(why, SAFETY)


def test_lab_mode_says_the_nccl_part_skipped() -> None:
    rc, out = moltest.run_playbook("lab.yml")
    assert rc == 0, out[-3000:]
    assert '"msg": "autotune NCCL part skipped: no GPU (lab mode)"' in out, out[-3000:]
    assert '"msg": "autotune preset part skipped: not in autotune_parts"' in out, out[-3000:]
    assert moltest.totals(out)["changed"] == 0


def test_check_mode_measures_and_restarts_nothing() -> None:
    """Check mode on a live server: neither part runs (no all-reduce on its GPUs, no restart, no
    benchmark), each saying why; check mode's reason comes before lab mode's."""
    rc, out = moltest.run_playbook("lab.yml", "--check", extra=[{"autotune_parts": ["nccl", "preset"]}])
    assert rc == 0, out[-3000:]
    nccl = "autotune NCCL part skipped: check mode (read-only: no all-reduce on the GPUs of a live server)"
    assert f'"msg": "{nccl}"' in out, out[-3000:]
    assert '"msg": "autotune preset part skipped: check mode (read-only: no restart, no benchmark)"' in out
    assert moltest.totals(out)["changed"] == 0


def test_a_chosen_candidate_is_rendered_then_the_record_again(host: Any) -> None:
    # A hand-written record (not measured: the recorded runs kept the defaults) choosing ALGO=Ring.
    chosen = {"choice": "algo_ring", "vars": {"NCCL_ALGO": "Ring"}, "recorded_at": "hand-written"}
    rc, out = moltest.run_playbook("render.yml", extra=[{"nccl_env_tuned": chosen}])
    assert rc == 0, out[-3000:]
    why = "tuned: autotune result of this host (algo_ring, recorded hand-written)"
    assert host.file(ENV_FILE).content_string == env_file(why, ["NCCL_ALGO=Ring", *SAFETY])
    rc, out = moltest.run_playbook("render.yml")
    assert rc == 0, out[-3000:]
    assert "NCCL_ALGO" not in host.file(ENV_FILE).content_string


def test_target_concurrency_not_in_the_levels_is_named() -> None:
    rc, out = moltest.run_playbook("lab.yml", extra=[{"autotune_preset_target_concurrency": 7}])
    assert rc != 0
    assert "bad autotune input: autotune_preset_target_concurrency=7" in out, out[-3000:]
    assert "allowed one of autotune_preset_levels (1, 30)" in out, out[-3000:]


def test_tuned_without_a_record_is_named(host: Any) -> None:
    before = host.file(ENV_FILE).sha256sum
    rc, out = moltest.run_playbook("tuned_no_record.yml")
    assert rc != 0
    assert "nccl_env_profile=tuned (sglang_nccl_profile) needs this host's recorded autotune result" in out
    assert f"host_vars/{host.backend.get_hostname()}/nccl_tuned.yml" in out, out[-3000:]
    assert host.file(ENV_FILE).sha256sum == before  # failed before any change


def test_a_host_printing_jinja_in_every_field_runs_nothing_on_the_controller(
    host: Any, tmp_path: Path
) -> None:
    """Issue 21 item 1: the measurements (what autotune_nccl.py prints on the host) hold Jinja in every
    string field; the NCCL part records them, a second run reads the record back (include_vars, as
    host_vars are read) and the nccl_env role renders it: the pipe lookup never runs on the
    controller (no marker file) and the literal text is in the record and in the env file."""
    marker = tmp_path / "pwned"
    evil = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    doc = json.loads(MEASUREMENTS.read_text())
    for key, value in list(doc.items()):
        if isinstance(value, str):
            doc[key] = f"{value} {evil}"
    doc["force_env"] = {k: f"{v}{evil}" for k, v in doc["force_env"].items()}
    for cand in doc["candidates"]:
        if cand["name"] != "defaults":  # the chosen name must fit [a-z0-9_]+ (next test)
            cand["name"] = f"{cand['name']} {evil}"
        cand["env_seen"] = {k: f"{v}{evil}" for k, v in cand["env_seen"].items()}
    measurements = tmp_path / "evil.json"
    measurements.write_text(json.dumps(doc))
    record_dir = tmp_path / "host_vars"
    extra = {"autotune_nccl_measurements_file": str(measurements), "autotune_record_dir": str(record_dir)}
    try:
        for play in ("recorded.yml", "render.yml", "render.yml"):
            rc, out = moltest.run_playbook(play, extra=[extra])
            assert rc == 0, out[-3000:]
        assert not marker.exists()
        tuned = yaml.load((record_dir / "nccl_tuned.yml").read_text(), Loader=UnsafeLoader)["nccl_env_tuned"]
        assert tuned["recorded_at"] == f"2026-11-30T19:12:51Z {evil}"
        assert tuned["hardware"] == f"2x NVIDIA H200 {evil}"
        assert (tuned["torch"], tuned["nccl"]) == (f"2.11.0+cu130 {evil}", f"2.28.9 {evil}")
        assert any(evil in row for row in tuned["table"])
        why = f"tuned: autotune result of this host (defaults, recorded 2026-11-30T19:12:51Z {evil})"
        assert host.file(ENV_FILE).content_string == env_file(why, SAFETY)
        assert evil in host.file(f"{REPORT_DIR}/autotune-nccl.md").content_string
    finally:
        for play in ("recorded.yml", "render.yml"):
            rc, out = moltest.run_playbook(play)
            assert rc == 0, out[-3000:]
    assert not marker.exists()


def test_a_chosen_candidate_outside_the_schema_is_not_recorded(tmp_path: Path) -> None:
    """A host whose measurements make a candidate with a Jinja name and variable win: refused before
    anything is written, naming what is allowed."""
    marker = tmp_path / "pwned"
    evil = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    doc = json.loads(MEASUREMENTS.read_text())
    fast = next(c for c in doc["candidates"] if c["name"] == "algo_ring")
    fast["name"] = f"algo_ring{evil}"
    fast["vars"] = {"NCCL_ALGO": f"Ring{evil}"}
    fast["samples"] = {
        k: ([v / 10 for v in vals] if int(k) < 2**25 else vals) for k, vals in fast["samples"].items()
    }
    measurements = tmp_path / "evil.json"
    measurements.write_text(json.dumps(doc))
    record_dir = tmp_path / "host_vars"
    extra = {"autotune_nccl_measurements_file": str(measurements), "autotune_record_dir": str(record_dir)}
    rc, out = moltest.run_playbook("recorded.yml", extra=[extra])
    assert rc != 0
    assert "autotune NCCL record refused: choice=" in out, out[-3000:]
    assert "allowed a candidate name [a-z0-9_]+ and variables NCCL_[A-Z0-9_]+" in out, out[-3000:]
    assert not (record_dir / "nccl_tuned.yml").exists()
    assert not marker.exists()
