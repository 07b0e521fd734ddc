"""sglang_extra_args may not set what the launch spec owns, under any spelling (issue 21 item 6).

Two layers, both real:
- preflight's check (plugins/module_utils/launch_spec.py, no SGLang needed): exact names, SGLang's
  aliases and prefixes of the spec's flags;
- the stack's launch check (roles/sglang_stack/files/stack_check.py), the authoritative one: every
  extra option is mapped to its argparse destination with SGLang 0.5.9's own parser (the heavy venv of
  tests/patches_fixtures.py), abbreviations resolved as ``sglang.launch_server`` resolves them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from modload import load_module
from test_launch_spec import KEY, cfg

REPO = Path(__file__).resolve().parents[1]
L = load_module("launch_spec", REPO / "plugins" / "module_utils" / "launch_spec.py")
STACK_CHECK = REPO / "roles" / "sglang_stack" / "files" / "stack_check.py"

pytest_plugins = ["patches_fixtures"]

# extra args -> the destination SGLang's parser stores them in (all owned by the spec)
OWNED: dict[str, tuple[list[str], str]] = {
    "alias_tp": (["--tensor-parallel-size", "2"], "tensor_parallel_size"),
    "alias_model": (["--model", "/data/other"], "model_path"),
    "abbrev_host": (["--hos", "0.0.0.0"], "host"),
    "abbrev_host_eq": (["--hos=0.0.0.0"], "host"),
    "exact_port_eq": (["--port=8080"], "port"),
    "abbrev_api_key": (["--api-k", "x" * 20], "api_key"),
    "abbrev_spec_algo": (["--speculative-algo", "NEXTN"], "speculative_algorithm"),
    "alias_draft": (["--speculative-draft-model", "/data/d"], "speculative_draft_model_path"),
    "spec_other": (["--speculative-accept-threshold-single", "0.5"], "speculative_accept_threshold_single"),
    "config_file": (["--config", "/tmp/flags.yaml"], "config"),
    "abbrev_tp": (["--tp", "4"], "tensor_parallel_size"),
}


def _spec(**over: Any) -> dict[str, Any]:
    out = L.resolve(cfg(**over))
    assert out["errors"] == [], out["errors"]
    spec: dict[str, Any] = out["spec"]
    return spec


@pytest.mark.parametrize("case", sorted(OWNED))
def test_preflight_refuses_owned_spellings(case: str) -> None:
    extra, _dest = OWNED[case]
    errors = L.resolve(cfg(extra_args=extra))["errors"]
    assert any(e.startswith("sglang_extra_args=") and "spec does not already set" in e for e in errors), (
        errors
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--admin-api-key", "x" * 20],
        ["--admin-api-key=" + "x" * 20],
        ["--admin-api", "x" * 20],
        ["--admin", "k"],
    ],
)
def test_preflight_refuses_the_admin_key_on_the_command_line(extra: list[str]) -> None:
    """Issue 32 item 5: --admin-api-key would put a secret on the command line: refused, unprinted."""
    errors = L.resolve(cfg(extra_args=extra))["errors"]
    flag = extra[0].split("=", 1)[0]
    assert any(
        e.startswith(f"sglang_extra_args holds {flag} (value not printed): not allowed") for e in errors
    ), errors
    assert not any("x" * 20 in e for e in errors)


def test_preflight_passes_a_foreign_flag_and_records_the_extras() -> None:
    spec = _spec(extra_args=["--log-level", "info", "--enable-cache-report"])
    assert spec["extra_args"] == ["--log-level", "info", "--enable-cache-report"]
    assert spec["server_args"][-5:-2] == ["--log-level", "info", "--enable-cache-report"]  # then --api-key


def _run_stack_check(python: Path, cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """stack_check's parser functions in the real SGLang venv, every case in one interpreter."""
    driver = (
        "import json, sys, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('stack_check', {str(STACK_CHECK)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "parser = m.server_parser()\n"
        "cases = json.loads(sys.stdin.read())\n"
        "out = {k: {'extra': m.check_extra(parser, c['argv'], c['extra']),\n"
        "           'argv': m.check_argv(c['argv'], parser)} for k, c in cases.items()}\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", driver],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_stack_check_maps_extra_flags_to_owned_destinations(sglang_venv_python: Path) -> None:
    base = _spec(preset="baseline", api_key=KEY)["server_args"]
    cases = {name: {"argv": base + extra, "extra": extra} for name, (extra, _d) in OWNED.items()}
    cases["foreign"] = {"argv": [*base, "--log-level", "info"], "extra": ["--log-level", "info"]}
    cases["foreign_abbrev"] = {"argv": [*base, "--log-requests-l", "1"], "extra": ["--log-requests-l", "1"]}
    got = _run_stack_check(sglang_venv_python, cases)
    for name, (extra, dest) in OWNED.items():
        flag = extra[0].split("=", 1)[0]
        assert any(repr(flag) in e and repr(dest) in e for e in got[name]["extra"]), (name, got[name])
    assert got["foreign"] == {"extra": [], "argv": None}
    assert got["foreign_abbrev"]["extra"] == []
    assert got["foreign_abbrev"]["argv"] is None  # SGLang's parser resolves the abbreviation itself


def test_stack_check_main_fails_on_an_owned_extra(sglang_venv_python: Path) -> None:
    base = _spec(preset="baseline", api_key=KEY)["server_args"]
    spec = {"argv": [*base, "--hos", "0.0.0.0"], "extra": ["--hos", "0.0.0.0"]}
    proc = subprocess.run(
        [str(sglang_venv_python), str(STACK_CHECK), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["argv_ok"] is False
    assert any("'--hos' sets 'host'" in e for e in doc["errors"]), doc["errors"]
