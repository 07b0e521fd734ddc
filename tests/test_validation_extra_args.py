"""sglang_extra_args may not set what the launch spec owns, under any spelling (issue 21 item 6).

Two layers, both real:
- preflight's check (plugins/module_utils/launch_spec.py, no SGLang needed): exact names, SGLang's
  aliases and prefixes of the spec's flags;
- the stack's launch check (roles/sglang_stack/files/stack_check.py), the authoritative one: every
  extra option is mapped to its argparse destination with SGLang 0.5.9's own parser (the heavy venv of
  tests/patches_fixtures.py), abbreviations resolved as ``sglang.launch_server`` resolves them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
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


# --- issue 32 item 8: SGLang's flag table in preflight (plugins/module_utils/sglang_argv.py) ----------

A = load_module("sglang_argv", REPO / "plugins" / "module_utils" / "sglang_argv.py")
FLAGS = load_module("sglang_flags", REPO / "plugins" / "module_utils" / "sglang_flags.py")
GEN = REPO / "scripts" / "gen-sglang-flags"

ARGV_CASES: dict[str, list[str]] = {
    "ok_flags": ["--log-level", "info", "--enable-cache-report", "--log-requests-format=json"],
    "ok_abbrev": ["--enable-cache-rep", "--log-requests-f", "text"],
    "ok_negative_value": ["--watchdog-timeout", "-1"],
    "unknown": ["--no-such-flag"],
    "unknown_with_value": ["--enable-metricz", "1"],
    "stray_word": ["--enable-cache-report", "stray"],
    "ambiguous": ["--enable-m"],
    "missing_value": ["--log-level"],
    "value_is_an_option": ["--log-level", "--enable-cache-report"],
    "bad_int": ["--max-running-requests", "many"],
    "bad_choice": ["--log-requests-format", "xml"],
    "explicit_on_flag": ["--enable-cache-report=yes"],
    "double_dash": ["--", "--enable-cache-report"],
    "short_unknown": ["-x"],
}


def _argparse_from_table() -> argparse.ArgumentParser:
    """A real argparse parser with the table's options (nargs, choices, type), as SGLang declares them."""
    parser = argparse.ArgumentParser(prog="sglang.launch_server", add_help=False)
    kinds = {"int": int, "float": float}
    for option, entry in FLAGS.FLAGS.items():
        if option in ("-h", "--help"):
            parser.add_argument(option, action="store_true", dest=f"help_{len(option)}")
            continue
        kw: dict[str, Any] = {"dest": option.lstrip("-").replace("-", "_")}
        if entry["nargs"] == "0":
            kw["action"] = "store_true"
        else:
            if entry["nargs"] != "1":
                kw["nargs"] = entry["nargs"]
            if "type" in entry:
                kw["type"] = kinds[entry["type"]]
            if "choices" in entry:
                kw["choices"] = [kinds.get(entry.get("type", ""), str)(c) for c in entry["choices"]]
        parser.add_argument(option, **kw)
    return parser


def _argparse_error(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(words)
    except SystemExit:
        return err.getvalue().strip().splitlines()[-1].split(": error: ", 1)[1]
    return None


@pytest.mark.parametrize("case", sorted(ARGV_CASES))
def test_preflight_parser_says_what_argparse_says(case: str) -> None:
    """The table-driven reader gives argparse's own first error (or none) for the same words."""
    words = ARGV_CASES[case]
    ours = A.parse_errors(words)
    theirs = _argparse_error(_argparse_from_table(), words)
    assert (ours[0] if ours else None) == theirs, (ours, theirs)
    assert bool(ours) == (not case.startswith("ok_"))


def test_preflight_refuses_an_unknown_flag_naming_the_variable_and_sglangs_message() -> None:
    errors = L.resolve(cfg(extra_args=["--enable-metricz"]))["errors"]
    assert errors == [
        "sglang_extra_args SGLang 0.5.9's parser would refuse it: sglang.launch_server: error: "
        "unrecognized arguments: --enable-metricz"
    ]


def test_the_flag_table_holds_the_patched_flag_and_the_spec_flags() -> None:
    flags = FLAGS.FLAGS
    assert FLAGS.SGLANG_VERSION == "0.5.9"
    assert flags["--speculative-disable-batch-threshold"]["nargs"] == "1"  # patch 0005
    assert flags["--enable-metrics"]["nargs"] == "0"
    for word in _spec(api_key=KEY)["server_args"]:
        if word.startswith("--"):
            assert word in flags, word


def test_the_flag_table_is_the_sdists(tmp_path: Path) -> None:
    """scripts/gen-sglang-flags --check against the real sdist of the pinned release (downloaded once
    into the patch tests' cache): the committed table is what the sdist + patches declare."""
    from patches_fixtures import SOURCES_CACHE, _fetch_sglang_sdist, load_series  # noqa: PLC0415

    version = load_series().sglang_version
    _fetch_sglang_sdist(version)
    archive = SOURCES_CACHE / "download" / f"sglang-{version}.tar.gz"
    proc = subprocess.run(
        [sys.executable, str(GEN), str(archive), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _flags_the_patches_add() -> set[str]:
    """The option strings our patches add to ServerArgs.add_cli_args (the + lines of patches/*.patch)."""
    added: set[str] = set()
    for patch in sorted((REPO / "patches").glob("*.patch")):
        plus = "\n".join(line[1:] for line in patch.read_text().splitlines() if line.startswith("+"))
        for call in re.findall(r"add_argument\(([^)]*)", plus):
            added.update(re.findall(r'"(--[a-z0-9-]+)"', call))
    return added


def test_the_flag_table_is_sglangs_parser(sglang_venv_python: Path) -> None:
    """Every option string and its nargs, against SGLang's own parser in its venv: the venv holds the
    unpatched release, so its parser lacks exactly the flags our patches add (patch 0005's
    --speculative-disable-batch-threshold), which the table, made from the sdist + patches, has."""
    driver = (
        "import argparse, json\n"
        "from sglang.srt.server_args import ServerArgs\n"
        "p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p)\n"
        "table = p._option_string_actions.items()\n"
        "print(json.dumps({o: str(a.nargs if a.nargs is not None else 1) for o, a in table}))\n"
    )
    proc = subprocess.run(
        [str(sglang_venv_python), "-c", driver], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    real: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    patched = _flags_the_patches_add()
    assert patched == {"--speculative-disable-batch-threshold"}
    assert patched <= set(FLAGS.FLAGS)
    assert set(real) == set(FLAGS.FLAGS) - patched
    assert real == {o: e["nargs"] for o, e in FLAGS.FLAGS.items() if o not in patched}


def test_stack_check_reports_sglangs_own_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack stage's real parser check: SGLang's `error:` line (not argparse's whole usage, not
    "non-zero return code"), also on stderr, where the stack stage's failure message reads it. A
    stand-in argparse parser replaces SGLang's (whose venv is the heavy fixture) - named as such."""
    check = load_module("stack_check_stderr", STACK_CHECK)
    stand_in = argparse.ArgumentParser(prog="sglang.launch_server")  # STAND-IN for SGLang's parser
    for n in range(40):
        stand_in.add_argument(f"--flag-{n}")
    problem = check.check_argv(["--flag-1", "x", "--no-such"], stand_in)
    assert problem is not None
    assert problem.endswith("exit 2: sglang.launch_server: error: unrecognized arguments: --no-such")
    assert "usage:" not in problem
    monkeypatch.setattr(check, "server_parser", lambda: stand_in)
    monkeypatch.setattr(sys, "argv", ["stack_check.py", json.dumps({"argv": ["--no-such"], "extra": []})])
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert check.main() == 1
    assert "stack_check: SGLang's argument parser rejected ['--no-such']: exit 2: " in err.getvalue()
    assert "error: unrecognized arguments: --no-such" in err.getvalue()
    assert json.loads(out.getvalue().strip().splitlines()[-1])["argv_ok"] is False
