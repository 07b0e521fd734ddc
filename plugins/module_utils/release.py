"""The release lifecycle's prune rule, one for the stack and the router (the release directories
``<root>/releases/<id>`` with a ``.complete`` marker, ``<root>/current`` pointing at one of them).

Kept: the newest ``keep`` complete releases (by the marker's mtime, the release this run built counted
as the newest), and always every protected release, whatever its age - the release ``current`` points
at, the one it pointed at before this run (a failed start goes back to it), the last good state's
release (deploy_state's snapshot: the rollback target) and the release the running process uses. The
stack and the router had one rule each and they differed (the router spared only the previous one).

The release id is one rule too (:func:`release_id`, the filter sglang.deploy.release_id): the stack's
inputs and lock digest, the router's lock digest.

The rest of the lifecycle is here too, for the module sglang.deploy.release (tool install, build into
a new directory, receipt and ``.complete`` written last, prune, the listing ``sglang-deploy releases``
prints): the scan of the releases, where ``current`` points, the atomic writes, the parsers of dpkg's
and uv's answers, uv's sync command line.

Pure Python (no Ansible import); tests/test_release_prune.py and tests/test_release_lifecycle.py test it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any


def release_id(inputs: Mapping[str, Any], length: int = 12) -> str:
    """The release id, one rule for the stack and the router: the first ``length`` hex digits of the
    sha256 of the canonical JSON (sorted keys, no spaces) of everything that defines the release. Equal
    inputs give the same ``releases/<id>`` on every host."""
    if length < 8 or length > 64:
        raise ValueError(f"length={length}: allowed an integer from 8 to 64")
    blob = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def prune(
    markers: Iterable[Mapping[str, Any]], new_release: str, keep: int, protected: Iterable[str] = ()
) -> list[str]:
    """The release directories to remove: ``markers`` are the ``.complete`` files ({path, mtime}) of
    the complete releases, ``new_release`` the directory of the release this run built or chose (the
    newest), ``keep`` how many to keep, ``protected`` release ids or directories never removed (empty
    strings ignored)."""
    if keep < 1:
        raise ValueError(f"keep={keep}: allowed an integer >= 1")
    newest_first = sorted(markers, key=lambda m: float(m.get("mtime", 0)), reverse=True)
    dirs = [new_release] + [os.path.dirname(str(m["path"])) for m in newest_first]
    ordered = list(dict.fromkeys(d.rstrip("/") for d in dirs if d))
    releases_dir = os.path.dirname(new_release.rstrip("/"))
    spared = {new_release.rstrip("/")}
    for item in protected:
        name = str(item or "").strip().rstrip("/")
        if name:
            spared.add(name if "/" in name else f"{releases_dir}/{name}")
    return [d for d in ordered[keep:] if d not in spared]


# --- the rest of the lifecycle (module sglang.deploy.release) -----------------------------------------

MARKER = ".complete"
RECEIPT = "receipt.json"
LOCK = "requirements.lock"


class ReleaseError(Exception):
    """A release directory or link the lifecycle refuses to touch (the message says which and why)."""


def scan(releases_dir: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The releases under ``releases_dir``: the ``.complete`` markers of the complete ones ({path, mtime})
    and the directories without one (an interrupted or failed build). A missing directory has none."""
    complete: list[dict[str, Any]] = []
    partial: list[str] = []
    if not os.path.isdir(releases_dir):
        return complete, partial
    with os.scandir(releases_dir) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            marker = os.path.join(entry.path, MARKER)
            try:
                complete.append({"path": marker, "mtime": os.lstat(marker).st_mtime})
            except FileNotFoundError:
                partial.append(entry.path)
    return complete, partial


def read_receipt(release_dir: str) -> dict[str, Any]:
    """A release's receipt ({} when it has none or it is not a JSON object)."""
    try:
        with open(os.path.join(release_dir, RECEIPT), encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def listing(releases_dir: str, current: str) -> dict[str, Any]:
    """Every release directory under ``releases_dir`` with a summary of its receipt, the complete ones
    newest first (by their marker's mtime, ``completed_at``), the incomplete ones after, and the release
    ``current`` points at ('' when it is missing or not a link). Read-only (``sglang-deploy releases``)."""
    markers, partial = scan(releases_dir)
    done = {os.path.dirname(str(m["path"])): float(m["mtime"]) for m in markers}
    current_id = os.path.basename(os.readlink(current).rstrip("/")) if os.path.islink(current) else ""
    releases: list[dict[str, Any]] = []
    for path in sorted([*done, *partial]):
        receipt = read_receipt(path) if path in done else {}
        versions = receipt.get("versions") or {}
        checks = receipt.get("checks") or {}
        rid = os.path.basename(path)
        releases.append(
            {
                "id": rid,
                "path": path,
                "current": rid == current_id,
                "complete": path in done,
                "completed_at": done.get(path, 0),
                "installed_at": receipt.get("installed_at", ""),
                "checks_ok": (checks.get("argv_ok", True) is not False) if receipt else None,
                "versions": {
                    name: versions.get(name, "")
                    for name in ("sglang", "torch", "sgl-kernel", "flashinfer-python", "transformers")
                },
                "source": (receipt.get("sources") or {}).get("sglang_source", ""),
                "patches": [p.get("name") for p in receipt.get("patches") or [] if isinstance(p, dict)],
                "python": (receipt.get("python") or {}).get("version", ""),
            }
        )
    releases.sort(key=lambda r: float(r["completed_at"]), reverse=True)
    return {"current": current_id, "current_exists": os.path.lexists(current), "releases": releases}


def current_release(current: str) -> str:
    """The release id ``current`` points at ('' when it does not exist); a ``current`` that exists and is
    not a symbolic link is refused (the roles manage it as a link)."""
    if not os.path.lexists(current):
        return ""
    if not os.path.islink(current):
        raise ReleaseError(
            f"{current} exists and is not a symlink: move it away, the role manages it as a link"
        )
    return os.path.basename(os.readlink(current).rstrip("/"))


def receipt_text(receipt: Mapping[str, Any]) -> str:
    """The receipt as the release keeps it: sorted JSON, two-space indent, one trailing newline."""
    return json.dumps(receipt, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` through a temporary file in its directory renamed over it (rename(2)):
    a reader sees the old file or the whole new one, never a part."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def complete(release_dir: str, release_id: str, receipt: Mapping[str, Any]) -> bool:
    """Write the receipt, then the ``.complete`` marker (holding the id) last, each atomically; a release
    that is complete already is left as it is (False: a complete release is never rewritten)."""
    marker = os.path.join(release_dir, MARKER)
    if os.path.lexists(marker):
        return False
    if not os.path.isdir(release_dir):
        raise ReleaseError(f"{release_dir} does not exist: build the release (state built) first")
    write_atomic(os.path.join(release_dir, RECEIPT), receipt_text(receipt))
    write_atomic(marker, f"{release_id}\n")
    return True


def remaining(markers: Iterable[Mapping[str, Any]], release_dir: str, removed: Iterable[str]) -> list[str]:
    """The complete release ids left after a prune, the release in force first, then newest first."""
    gone = {r.rstrip("/") for r in removed}
    newest_first = sorted(markers, key=lambda m: float(m.get("mtime", 0)), reverse=True)
    dirs = [release_dir.rstrip("/")] + [os.path.dirname(str(m["path"])) for m in newest_first]
    return [os.path.basename(d) for d in dict.fromkeys(dirs) if d not in gone]


APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}


def dpkg_installed(status: str) -> bool:
    """Whether dpkg's ``${db:Status-Abbrev}`` says installed: 'ii', or 'hi' for a held package."""
    return status[1:2] == "i"


def missing_packages(dpkg_output: str, wanted: Iterable[str]) -> list[str]:
    """The packages of ``wanted`` that ``dpkg-query -W -f '${Package} ${db:Status-Abbrev}\\n'`` does not
    report installed (:func:`dpkg_installed`), in the order wanted."""
    installed = set()
    for line in dpkg_output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and dpkg_installed(parts[1]):
            installed.add(parts[0].split(":")[0])
    return [p for p in dict.fromkeys(wanted) if p not in installed]


def dpkg_state(output: str) -> tuple[str, str]:
    """(version, selection) of ``dpkg-query -W -f '${Version} ${db:Status-Abbrev}'`` for one package: the
    version when it is installed (:func:`dpkg_installed`), else ''; the selection 'hold' for 'h', else
    'install'."""
    parts = output.split()
    if len(parts) < 2:
        return "", "install"
    version, status = parts[0], parts[1]
    return (version if dpkg_installed(status) else ""), ("hold" if status[:1] == "h" else "install")


def uv_version(output: str) -> str:
    """The version of ``uv --version`` ('uv 0.9.7 (0adb44480 2025-10-30)' -> '0.9.7'; '' when unreadable)."""
    parts = output.split()
    return parts[1] if len(parts) >= 2 and parts[0] == "uv" else ""


def sync_argv(uv: str, python: str, uv_args: Iterable[str], reinstall: Iterable[str] = ()) -> list[str]:
    """``uv pip sync`` of a release's lock into its venv: hashes required, bytecode compiled (the service
    user cannot write the release, so without it every start compiles every module again)."""
    return (
        [uv, "pip", "sync", "--python", python, "--require-hashes", "--compile-bytecode"]
        + [f"--reinstall-package={name}" for name in reinstall]
        + list(uv_args)
        + [LOCK]
    )
