"""Reverting patch 4 in the installed tree is reported by check mode and repaired by a run."""

from __future__ import annotations

import json
from typing import Any

import moltest
from helpers import (
    CURRENT,
    PY,
    ROOT,
    bytecode,
    playbook,
    push_patch,
    recap,
    receipt,
    series,
    site_packages,
    strip_of,
)


def test_reverted_patch_is_reported_then_restored(host: Any) -> None:
    entry = next(e for e in series() if str(e.get("id", "")).endswith("4") or "0004" in e["file"])
    sp = site_packages(host)
    rel = entry["files"][0]
    recorded = receipt(host)["patched_files"][rel]
    assert host.file(f"{sp}/{rel}").sha256sum == recorded

    src = push_patch(host, entry["file"])
    host.check_output(f"patch -R -p{strip_of(entry)} -d {sp} -i {src} --no-backup-if-mismatch")
    reverted = host.file(f"{sp}/{rel}").sha256sum
    assert reverted != recorded

    # -v: the release module's message (what drifted, what a real run does) is in its result
    rc, out = playbook("--check", "-v")
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] > 0, out[-3000:]
    assert "drift:" in out, out[-3000:]
    assert rel in out, out[-3000:]
    assert host.file(f"{sp}/{rel}").sha256sum == reverted, "check mode changed the file"

    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] > 0
    assert host.file(f"{sp}/{rel}").sha256sum == recorded
    for path, digest in receipt(host)["patched_files"].items():
        assert host.file(f"{sp}/{path}").sha256sum == digest, path
    # the repair compiled the re-patched file again: its pyc is the restored source's
    if rel.endswith(".py"):
        got = bytecode(host, f"{sp}/{rel}")[f"{sp}/{rel}"]
        assert got["exists"], got
        assert got["valid"], got
    # (the shared test_check_mode.py then proves the repaired host is clean again)


STATE_TASK = (
    "sglang_stack : Apply the stack's host state"
    " (directories, uv's requirement, the complete release's directory)"
)
UV = "UV_CACHE_DIR=/var/cache/sglang-deploy/uv /opt/sglang/tools/uv/bin/uv"


def versions(host: Any, *names: str) -> list[str]:
    code = "import importlib.metadata as m, sys; print(*(m.version(n) for n in sys.argv[1:]))"
    return str(host.check_output(f"{PY} -c '{code}' {' '.join(names)}")).split()


def test_venv_against_lock_other_version_uninstalled_edited_and_chowned(host: Any) -> None:
    """Another transformers, flashinfer-cubin gone, a file of a hash-pinned distribution edited and
    the release chowned: --check names each (changes nothing), one run restores the lock exactly."""
    sp = site_packages(host)
    host.check_output(f"{UV} pip install -q --python {PY} transformers==4.57.0")
    host.check_output(f"{UV} pip uninstall -q --python {PY} flashinfer-cubin")
    host.check_output(f"echo '# edited' >> {sp}/idna/core.py && chown -R nobody {sp}/idna")
    release = host.file(CURRENT).linked_to
    host.check_output(f"chown nobody {release}")

    rc, out = playbook("--check", "--diff", "-v")
    assert rc == 0, out[-3000:]
    assert "transformers 4.57.0 installed, the lock pins 4.57.1" in out, out[-3000:]
    assert "flashinfer-cubin not installed" in out
    assert "idna/core.py (size differs from RECORD)" in out
    assert STATE_TASK in moltest.changed_tasks(out), out[-3000:]
    assert '"owner": "nobody"' in out, out[-3000:]  # the release directory's item, under --diff
    assert "not owned by root" in out
    assert versions(host, "transformers") == ["4.57.0"], "check mode changed the venv"

    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert versions(host, "transformers", "flashinfer-cubin") == ["4.57.1", "0.6.4"]
    assert "# edited" not in host.file(f"{sp}/idna/core.py").content_string
    assert host.file(f"{sp}/idna/core.py").user == "root"
    assert host.file(release).user == "root"
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert recap(out)["changed"] == 0, out[-3000:]


def test_failed_repair_leaves_the_venv_and_current_as_they_were(host: Any) -> None:
    """The repair cannot download (no index, no cache): it fails before the venv is touched."""
    host.check_output(f"{UV} pip install -q --python {PY} transformers==4.57.0")
    before = host.file(CURRENT).linked_to
    extra = {
        "sglang_stack_index_url": "http://127.0.0.1:9/simple",
        "sglang_stack_uv_env": {"UV_NO_CACHE": "1"},
    }
    rc, out = playbook("-e", json.dumps(extra))
    assert rc != 0, out[-3000:]
    assert "the service unit and the running server were left as they were" in out, out[-3000:]
    assert versions(host, "transformers") == ["4.57.0"]  # uv fetches before it uninstalls anything
    assert host.file(CURRENT).linked_to == before
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert versions(host, "transformers") == ["4.57.1"]


def test_tampered_directory_and_uv_requirement_reported_by_one_task_and_restored(host: Any) -> None:
    """The role's directories and uv's requirement are one description applied by one managed_state
    task: a chmodded locks directory and an edited uv requirement are reported by --check --diff in
    that one task (nothing written, nothing else changed), then restored by a run with nothing rebuilt."""
    req = f"{ROOT}/tools/uv-requirements.txt"
    wanted = host.file(req).content_string
    assert wanted.startswith("# Managed by Ansible (sglang_stack role)"), wanted
    host.check_output(f"chmod 0700 {ROOT}/locks && echo 'uv==0.0.1' >> {req}")

    rc, out = playbook("--check", "--diff")
    assert rc == 0, out[-3000:]
    assert moltest.changed_tasks(out) == [STATE_TASK], out[-3000:]
    assert '"mode": "0700"' in out, out[-3000:]
    assert "-uv==0.0.1" in out, out[-3000:]
    assert host.file(f"{ROOT}/locks").mode == 0o700, "check mode changed the directory"

    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert moltest.changed_tasks(out) == [STATE_TASK], out[-3000:]
    assert host.file(f"{ROOT}/locks").mode == 0o755
    assert host.file(req).content_string == wanted
    assert host.file(req).mode == 0o644


def test_a_startup_file_no_distribution_owns_is_reported_then_removed(host: Any) -> None:
    """A .pth with an `import` line and a sitecustomize.py dropped into site-packages (no RECORD lists
    them; Python runs them at every start): --check names both and changes nothing, a run removes them."""
    sp = site_packages(host)
    pth, custom = f"{sp}/zz-drift.pth", f"{sp}/sitecustomize.py"
    host.check_output(f"printf 'import os\\n' > {pth} && printf 'x = 1\\n' > {custom}")
    rc, out = playbook("--check", "-v")
    assert rc == 0, out[-3000:]
    assert "start-up files" in out, out[-3000:]
    assert "zz-drift.pth" in out, out[-3000:]
    assert "sitecustomize.py" in out, out[-3000:]
    assert host.file(pth).exists, "check mode removed a file"
    assert host.file(custom).exists, "check mode removed a file"
    rc, out = playbook()
    assert rc == 0, out[-3000:]
    assert not host.file(pth).exists
    assert not host.file(custom).exists
