"""Acceptance checks of a freshly built SGLang release, run with the release's own interpreter.

usage: stack_check.py SPEC_JSON        (prints one JSON document on stdout; exit 1 on failure)
SPEC: {"expect": {dist: version}, "modules": [...], "argv": [...], "extra": [...], "lock": "path"}

* dist versions come from importlib.metadata (works for sgl-kernel, which cannot be IMPORTED
  without a GPU: its common_ops library needs the CUDA driver);
* modules are imported (torch, flashinfer, sglang, transformers work on a CPU-only host);
* argv is parsed by SGLang's own argument parser (ServerArgs.add_cli_args + parse_args): flag
  names, types and choices are validated without a GPU (prepare_server_args would then demand an
  accelerator, so it is not called);
* extra (the operator's sglang_extra_args, a part of argv) must not set what the launch spec owns:
  each of its options is mapped to its argparse destination with the same parser, abbreviations
  resolved as SGLang's parser resolves them (``argparse.ArgumentParser()``: allow_abbrev on, as
  ``prepare_server_args`` builds it), so aliases (``--tensor-parallel-size``, ``--model``) and
  abbreviations (``--hos 0.0.0.0``) are caught; any destination of OWNED_DESTS, of the
  ``speculative_`` family, or of a flag the spec itself passed is refused, naming flag and dest.
  Preflight, without SGLang, refuses the exact names, known aliases and prefixes of the spec's flags;
  this check is the authoritative one;
* the lock's text is returned as is (the receipt records its sha256 and pins).

Everything runs in this one interpreter, the parser's import chain first: a fresh release has no
bytecode, so each module is compiled once (the chain through torch, transformers and SGLang is
~10 s on 2 CPUs). Running each import in its own child interpreter in parallel was measured
slower on 2 CPUs (14.4-15.9 s vs 12.0-14.1 s: every child compiles torch again). Every failing check is
reported, not just the first.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as md
import io
import json
import platform
import sys
from typing import Any

# Destinations the launch spec owns (plugins/module_utils/launch_spec.py sets them from sglang_*
# inputs): an extra flag may not reach them under any spelling. `config` merges a YAML file of flags.
OWNED_DESTS = frozenset(
    {
        "model_path",
        "tensor_parallel_size",
        "tp_size",
        "host",
        "port",
        "api_key",
        "served_model_name",
        "trust_remote_code",
        "attention_backend",
        "cuda_graph_max_bs",
        "enable_flashinfer_allreduce_fusion",
        "enable_torch_symm_mem",
        "mem_fraction_static",
        "config",
    }
)
OWNED_PREFIXES = ("speculative_",)


def public(version: str) -> str:
    return version.split("+", 1)[0]


def check_argv(argv: list[str], parser: argparse.ArgumentParser | None = None) -> str | None:
    """None when SGLang's own parser accepts argv, else why not."""
    parser = parser or server_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit as exc:
        # argparse prints the whole usage (every server flag) and then one `prog: error: ...` line:
        # that line is SGLang's own message
        lines = err.getvalue().strip().splitlines()
        message = next((ln for ln in reversed(lines) if ": error: " in ln), lines[-1] if lines else "")
        return f"SGLang's argument parser rejected {argv}: exit {exc.code}: {message}"
    return None


def server_parser() -> argparse.ArgumentParser:
    """SGLang's parser as ``prepare_server_args`` builds it (allow_abbrev on: abbreviations resolve)."""
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def option_dest(parser: argparse.ArgumentParser, word: str) -> tuple[str | None, list[str]]:
    """The destination argparse stores ``word`` (an option, maybe ``--flag=value``) in.

    Exact option strings first, then, as argparse does with allow_abbrev, the long options the word
    is a prefix of. Returns (dest, []) when it resolves to one action, (None, candidates) when the
    prefix is ambiguous (argparse rejects it) and (None, []) for an unknown option.
    """
    table = parser._option_string_actions  # argparse's own option-string table
    name = word.split("=", 1)[0] if word.startswith("--") else word
    if name in table:
        return table[name].dest, []
    if not (name.startswith("--") and parser.allow_abbrev):
        return None, []
    matches = sorted(opt for opt in table if opt.startswith("--") and opt.startswith(name))
    dests = {table[opt].dest for opt in matches}
    if len(dests) == 1:
        return dests.pop(), []
    return None, matches


def owned(dest: str, spec_dests: set[str]) -> bool:
    return dest in OWNED_DESTS or dest.startswith(OWNED_PREFIXES) or dest in spec_dests


def check_extra(parser: argparse.ArgumentParser, argv: list[str], extra: list[str]) -> list[str]:
    """Errors for extra options whose destination the launch spec owns (every spelling)."""
    extra_words = list(extra)
    own_words = list(argv)
    for word in extra_words:  # the spec's own words: argv without the extra ones (once each)
        if word in own_words:
            own_words.remove(word)
    spec_dests = {
        parser._option_string_actions[w].dest for w in own_words if w in parser._option_string_actions
    }
    errors: list[str] = []
    for word in extra_words:
        if not word.startswith("-") or word in {"-", "--"}:
            continue
        dest, ambiguous = option_dest(parser, word)
        if dest is not None and owned(dest, spec_dests):
            errors.append(
                f"sglang_extra_args: {word.split('=', 1)[0]!r} sets {dest!r}, which the launch spec owns "
                "(set its sglang_* variable instead)"
            )
        elif ambiguous and any(owned(parser._option_string_actions[o].dest, spec_dests) for o in ambiguous):
            errors.append(
                f"sglang_extra_args: {word.split('=', 1)[0]!r} is an ambiguous abbreviation of {ambiguous}, "
                "among them flags the launch spec owns"
            )
    return errors


def check_versions(expect: dict[str, str], dists: dict[str, str]) -> list[str]:
    errors: list[str] = []
    for dist, want in expect.items():
        have = dists.get(dist.lower().replace("_", "-"))
        exact = "+" in want
        if have is None:
            errors.append(f"{dist}: not installed (want {want})")
        elif (have if exact else public(have)) != want:
            errors.append(f"{dist}: installed {have}, want {want}")
    return errors


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    dists = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in md.distributions()}
    errors = check_versions(spec.get("expect", {}), dists)
    argv = spec.get("argv") or []
    argv_ok = None
    if argv:
        extra = [str(w) for w in spec.get("extra") or []]
        try:
            parser = server_parser()
            problems = check_extra(parser, argv, extra)
            problem = check_argv(argv, parser)
            if problem:
                problems.append(problem)
        except Exception as exc:
            problems = [f"SGLang's argument parser failed: {type(exc).__name__}: {exc}"]
        argv_ok = not problems
        errors.extend(problems)
    imported: dict[str, str] = {}
    for name in spec.get("modules", []):
        try:
            module = importlib.import_module(name)
            imported[name] = str(getattr(module, "__version__", "?"))
        except Exception as exc:  # report every failing import, not just the first
            errors.append(f"import {name}: {type(exc).__name__}: {exc}")
    lock_text = None
    if spec.get("lock"):
        try:
            with open(spec["lock"], encoding="utf-8") as fh:
                lock_text = fh.read()
        except OSError as exc:
            errors.append(f"lock {spec['lock']}: {exc}")
    for error in errors:  # the task's stderr: what a failed stack stage shows first (before the JSON)
        print(f"stack_check: {error}", file=sys.stderr)
    print(
        json.dumps(
            {
                "ok": not errors,
                "lock_text": lock_text,
                "errors": errors,
                "python": platform.python_version(),
                "executable": sys.executable,
                "imported": imported,
                "argv_ok": argv_ok,
                "distributions": dict(sorted(dists.items())),
            }
        )
    )
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
