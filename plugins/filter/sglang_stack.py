"""Filters of the sglang_stack role: patch series normalisation, touched files, release id.

Pure functions (no Ansible imports at module level beyond the error type) so tests/ can unit-test
them directly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.uv_lock import pins as lock_pins

try:  # pragma: no cover - only inside Ansible
    from ansible.errors import AnsibleFilterError as _FilterError  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover
    _FilterError = ValueError

LAYOUTS = ("repo", "sdist", "site_packages")
TARGETS = ("sglang", "flashinfer")
# patches/series.yml spells the layout site-packages (as the directory is named)
_STRIP_ALIASES = {"site-packages": "site_packages"}
_PLUS_LINE = re.compile(r"^\+\+\+ (?P<path>\S+)", re.M)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _fail(msg: str) -> None:
    raise _FilterError(msg)


def _strip_levels(entry: Mapping[str, Any], name: str) -> dict[str, int]:
    raw: Any = entry.get("strip", {})
    levels: dict[str, int] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            levels[_STRIP_ALIASES.get(str(key), str(key))] = int(value)
    if "site_packages" not in levels:
        _fail(f"patch series entry {name!r}: no strip level for the site_packages layout (got {raw!r})")
    return levels


def sglang_stack_series(data: Any) -> list[dict[str, Any]]:
    """Normalise patches/series.yml into [{name, file, target, sha256, strip: {layout: n}}]."""
    entries: Any = data.get("patches") if isinstance(data, Mapping) else data
    if not isinstance(entries, list):
        _fail(f"patch series: expected a list of patches (or a 'patches:' key), got {type(entries).__name__}")
    out: list[dict[str, Any]] = []
    for index, entry in enumerate(entries, start=1):
        if not isinstance(entry, Mapping):
            _fail(f"patch series entry {index}: expected a mapping, got {entry!r}")
        file = str(entry.get("file") or "")
        name = str(entry.get("id") or file)
        target = str(entry.get("target", "")).lower()
        sha = str(entry.get("sha256", "")).lower()
        if not file:
            _fail(f"patch series entry {index}: 'file' is required")
        if target not in TARGETS:
            _fail(f"patch series entry {name!r}: target {target!r} not in {list(TARGETS)}")
        if not _SHA256.match(sha):
            _fail(f"patch series entry {name!r}: sha256 {sha!r} is not 64 hex digits")
        out.append(
            {
                "index": index,
                "name": name,
                "file": file,
                "target": target,
                "sha256": sha,
                "strip": _strip_levels(entry, name),
            }
        )
    return out


def sglang_stack_touched(patch_text: str, strip: int) -> list[str]:
    """Files a unified diff modifies, relative to the directory it is applied in at -p<strip>."""
    files: list[str] = []
    for match in _PLUS_LINE.finditer(patch_text):
        path = match["path"]
        if path == "/dev/null":
            continue
        parts = path.split("/")
        if len(parts) <= strip:
            _fail(f"patch path {path!r} has too few components for -p{strip}")
        rel = "/".join(parts[strip:])
        if rel not in files:
            files.append(rel)
    return files


def sglang_stack_targets(plan: list[Mapping[str, Any]], files: list[str]) -> list[str]:
    """Targets (sglang / flashinfer) of the patches that touch any of `files`."""
    wanted = set(files)
    return sorted({str(p["target"]) for p in plan if wanted.intersection(p.get("touched", []))})


def sglang_stack_checksums(found: list[Mapping[str, Any]], base: str, touched: list[str]) -> dict[str, str]:
    """`find` results (get_checksum) -> {path relative to base: sha256} for the touched files only.

    find matches basenames in every listed directory, so other files with the same name are
    dropped; a touched file that is missing is simply absent from the result.
    """
    prefix = base.rstrip("/") + "/"
    wanted = set(touched)
    sums: dict[str, str] = {}
    for entry in found:
        path = str(entry.get("path", ""))
        rel = path[len(prefix) :] if path.startswith(prefix) else None
        if rel in wanted and entry.get("checksum"):
            sums[rel] = str(entry["checksum"])
    return dict(sorted(sums.items()))


DIST_OF_TARGET = {"sglang": "sglang", "flashinfer": "flashinfer-python"}


def sglang_stack_target_dists(targets: list[str]) -> list[str]:
    return [DIST_OF_TARGET[t] for t in targets]


def sglang_stack_version_line(item: Mapping[str, Any]) -> str:
    """dict2items entry of the audit's other_version -> 'name installed X, the lock pins Y'."""
    value = item.get("value") or {}
    return (
        f"{item.get('key')} {value.get('installed', '?')} installed, the lock pins {value.get('locked', '?')}"
    )


_URL_WHEEL = re.compile(r"\s*sgl[-_]kernel\s*@\s*(?P<url>https?://\S+/(?P<file>[^/\s#]+\.whl))\s*")


def sglang_stack_url_wheel(requirement: str, wheels_dir: str, sha256: list[str]) -> dict[str, Any]:
    """'sgl-kernel @ https://.../<file>.whl' -> {url, dest: wheels_dir/<file>, sha256: the accepted values,
    once each, in order}; any other requirement (an index pin such as sgl-kernel==0.3.21) -> {}."""
    match = _URL_WHEEL.fullmatch(requirement)
    if match is None:
        return {}
    return {
        "url": match["url"],
        "dest": f"{wheels_dir.rstrip('/')}/{match['file']}",
        "sha256": list(dict.fromkeys(str(h) for h in sha256)),
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglang_stack_series": sglang_stack_series,
            "sglang_stack_touched": sglang_stack_touched,
            "sglang_stack_lock_summary": lock_pins,
            "sglang_stack_targets": sglang_stack_targets,
            "sglang_stack_checksums": sglang_stack_checksums,
            "sglang_stack_target_dists": sglang_stack_target_dists,
            "sglang_stack_version_line": sglang_stack_version_line,
            "sglang_stack_url_wheel": sglang_stack_url_wheel,
        }
