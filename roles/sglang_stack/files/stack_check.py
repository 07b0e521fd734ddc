#!/usr/bin/env python3
"""Acceptance checks of a freshly built SGLang release, run with the release's own interpreter.

usage: stack_check.py SPEC_JSON        (prints one JSON document on stdout; exit 1 on failure)
SPEC: {"expect": {dist: version}, "modules": [...], "argv": [...], "lock": "path"}

* dist versions come from importlib.metadata (works for sgl-kernel, which cannot be IMPORTED
  without a GPU: its common_ops library needs the CUDA driver);
* modules are imported (torch, flashinfer, sglang, transformers work on a CPU-only host);
* argv is parsed by SGLang's own argument parser (ServerArgs.add_cli_args + parse_args): flag
  names, types and choices are validated without a GPU (prepare_server_args would then demand an
  accelerator, so it is not called);
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


def public(version: str) -> str:
    return version.split("+", 1)[0]


def check_argv(argv: list[str]) -> str | None:
    """None when SGLang's own parser accepts argv, else why not."""
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit as exc:
        return f"SGLang's argument parser rejected {argv}: exit {exc.code}: {err.getvalue().strip()}"
    return None


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
        try:
            problem = check_argv(argv)
        except Exception as exc:
            problem = f"SGLang's argument parser failed: {type(exc).__name__}: {exc}"
        argv_ok = problem is None
        if problem:
            errors.append(problem)
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
