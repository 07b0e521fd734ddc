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

Each import and the parser run in their own child interpreter, concurrently (one per CPU): a
fresh release has no bytecode yet, so every import compiles its modules; the parser's import
chain alone takes ~10 s on a 2-CPU host and the imports run beside it instead of after it.
A child that fails reports its error; every failing check is reported, not just the first.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as md
import io
import json
import os
import platform
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def public(version: str) -> str:
    return version.split("+", 1)[0]


def child_import(name: str) -> dict[str, Any]:
    module = importlib.import_module(name)
    return {"version": str(getattr(module, "__version__", "?"))}


def child_argv(argv: list[str]) -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit as exc:
        reason = err.getvalue().strip()
        return {"error": f"SGLang's argument parser rejected {argv}: exit {exc.code}: {reason}"}
    return {}


def run_child(kind: str, arg: str) -> dict[str, Any]:
    """One check in a fresh interpreter (this file, --child KIND ARG); never raises."""
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", kind, arg],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        result = {"error": f"exit {proc.returncode}: {tail}"}
    return result


def child_main(kind: str, arg: str) -> int:
    try:
        result = child_import(arg) if kind == "import" else child_argv(json.loads(arg))
    except Exception as exc:  # reported by the parent, with the check it belongs to
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))
    return 0


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
    if sys.argv[1] == "--child":
        return child_main(sys.argv[2], sys.argv[3])
    spec: dict[str, Any] = json.loads(sys.argv[1])
    dists = {d.metadata["Name"].lower().replace("_", "-"): d.version for d in md.distributions()}
    errors = check_versions(spec.get("expect", {}), dists)
    argv = spec.get("argv") or []
    jobs = [("import", name) for name in spec.get("modules", [])]
    if argv:
        jobs.append(("argv", json.dumps(argv)))
    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda job: run_child(*job), jobs))
    imported: dict[str, str] = {}
    argv_ok = None
    for (kind, arg), result in zip(jobs, results, strict=True):
        if kind == "import":
            if "error" in result:
                errors.append(f"import {arg}: {result['error']}")
            else:
                imported[arg] = result["version"]
        else:
            argv_ok = "error" not in result
            if not argv_ok:
                errors.append(str(result["error"]))
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
