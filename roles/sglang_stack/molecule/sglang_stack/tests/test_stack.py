"""The converged host has the real stack installed, patched, recorded and activated."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from helpers import CURRENT, PATCHES, PY, ROOT, added_lines, bytecode, receipt, series, site_packages

# The Ubuntu scenario runs these tests too, with its own interpreter and source (molecule.yml).
PYTHON = os.environ.get("SGLANG_STACK_EXPECT_PYTHON", "3.11")
SOURCE = os.environ.get("SGLANG_STACK_EXPECT_SOURCE", "sdist")
EXPECTED = {
    "torch": "2.9.1",
    "sgl-kernel": "0.3.21",
    "flashinfer-python": "0.6.4",
    "flashinfer-cubin": "0.6.4",
    "sglang": "0.5.9",
    "transformers": "4.57.1",
}


def test_current_is_a_relative_link_to_a_complete_release(host: Any) -> None:
    link = host.file(CURRENT)
    assert link.is_symlink
    assert link.linked_to.startswith(f"{ROOT}/releases/")
    rid = link.linked_to.rsplit("/", 1)[1]
    assert host.file(f"{ROOT}/releases/{rid}/.complete").content_string.strip() == rid
    assert not host.file(f"{ROOT}/.current.new").exists


def test_launch_check_is_the_json_record_of_the_checked_argv(host: Any) -> None:
    # launch-check.json -> the record of the argv SGLang's parser checked, one JSON document (a folded
    # Jinja '\n' once left a literal backslash-n after it, which json.loads refuses)
    link = host.file(f"{CURRENT}/launch-check.json")
    assert link.is_symlink
    assert link.linked_to.rsplit("/", 1)[1].startswith(".launch-ok-")
    text = host.file(f"{CURRENT}/launch-check.json").content_string
    assert text.endswith("}\n")
    record = json.loads(text)
    assert record["parser"] == "sglang.srt.server_args.ServerArgs.add_cli_args + parse_args"
    assert record["argv"][-len(record["server_args"]) :] == record["server_args"]


def test_installed_versions(host: Any) -> None:
    script = (
        "import importlib.metadata as m, json; "
        f"print(json.dumps({{d: m.version(d) for d in {sorted(EXPECTED)!r}}}))"
    )
    got = json.loads(host.check_output(f'{PY} -c "{script}"'))
    assert {k: v.split("+")[0] for k, v in got.items()} == EXPECTED


def test_python_is_the_requested_interpreter(host: Any) -> None:
    got = host.check_output(f"{PY} -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert got == PYTHON


@pytest.mark.parametrize("entry", series(), ids=lambda e: str(e.get("id", e.get("name"))))
def test_patch_present_in_installed_tree(host: Any, entry: dict[str, Any]) -> None:
    lines = added_lines((PATCHES / entry["file"]).read_text())
    assert lines, f"{entry['file']} adds no distinctive line"
    sp = site_packages(host)
    for rel in entry["files"]:
        content = host.file(f"{sp}/{rel}").content_string
        if lines[0] in content:
            return
    pytest.fail(f"{entry['file']}: '{lines[0]}' not found in {entry['files']}")


def test_receipt(host: Any) -> None:
    r = receipt(host)
    rid = host.file(CURRENT).linked_to.rsplit("/", 1)[1]
    assert r["release_id"] == rid
    assert r["python"]["version"].startswith(f"{PYTHON}.")
    assert r["sources"]["sglang_source"] == SOURCE
    assert r["checks"]["argv_ok"] is True
    assert "--speculative-disable-batch-threshold" in r["checks"]["argv"]
    for dist, version in EXPECTED.items():
        assert r["versions"][dist].split("+")[0] == version
    assert [p["sha256"] for p in r["patches"]] == [e["sha256"] for e in series()]
    assert r["patched_files"], "no patched file checksums recorded"
    sp = site_packages(host)
    for rel, digest in r["patched_files"].items():
        assert host.file(f"{sp}/{rel}").sha256sum == digest, rel
    lock = host.file(r["lock"]["path"]).content_string
    assert "--hash=sha256:" in lock
    assert r["lock"]["pins"]["flashinfer-python"] == "0.6.4"


def test_import_without_gpu(host: Any) -> None:
    out = host.check_output(f"{PY} -c 'import sglang, flashinfer, torch; print(sglang.__version__)'")
    assert out.strip() == "0.5.9"


def test_release_has_its_bytecode_root_owned_and_current_for_the_patched_files(host: Any) -> None:
    """The release is compiled once, after the patches: every patched module's pyc matches the patched
    source (the header's mtime and size, or hash), and the pristine tree has its pyc too; all of it
    root's and not writable by others (the service user could not write a __pycache__ there)."""
    sp = site_packages(host)
    patched = [f"{sp}/{rel}" for rel in receipt(host)["patched_files"] if rel.endswith(".py")]
    assert patched
    pristine = [f"{sp}/torch/__init__.py", f"{sp}/transformers/__init__.py", f"{sp}/sglang/__init__.py"]
    for src, got in bytecode(host, *patched, *pristine).items():
        assert got["exists"], f"no bytecode for {src}: {got['pyc']}"
        assert got["valid"], f"{got['pyc']} does not match {src}"
        assert got["uid"] == 0, got
        assert got["dir_uid"] == 0, got
        assert got["mode"] & 0o022 == 0, got
        assert got["dir_mode"] & 0o022 == 0, got
        assert host.run(f"runuser -u nobody -- test -w {got['pyc']}").rc != 0, got
        assert host.run(f"runuser -u nobody -- test -w {os.path.dirname(got['pyc'])}").rc != 0, got


def test_the_service_user_imports_the_parser_from_bytecode(host: Any) -> None:
    """An unprivileged user imports SGLang's server_args chain (the start-up's first import, patched
    module included) from the release's bytecode: nothing compiled in memory for a lack of a pyc it
    could not write ('could not create' in python -v's trace)."""
    trace = f"cd / && runuser -u nobody -- {PY} -v -c 'import sglang.srt.server_args' 2>&1"
    # a module compiled from its source, or a pyc that could not be written, under the stack's root
    pattern = f"^# could not create '{ROOT}/|^# code object from '{ROOT}/[^']*[.]py'$"
    run = host.run(f'out=$({trace}); rc=$?; echo "$out" | grep -E "{pattern}" | head -20; echo rc=$rc')
    # imported; nothing compiled in memory, no pyc that failed to be written
    assert run.stdout.strip() == "rc=0", run.stdout
