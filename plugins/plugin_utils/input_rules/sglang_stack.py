"""The input rules of the role sglang_stack (run by sglang.deploy.validate_inputs; see __init__.py).

The source, paths and lists of the stack, the patch series (a file on the controller), and the supply
chain (issue 21): every artefact checked against a sha256, SGLang's commit the full 40-hex id, a lock
file on the controller with ``--hash=sha256:`` lines.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.convert import as_bool
from ansible_collections.sglang.deploy.plugins.plugin_utils.input_rules import as_json, full

FACTS: tuple[str, ...] = ()
PATH = r"/[A-Za-z0-9_@+=:,./-]*"
SHA256 = r"[0-9a-f]{64}"
URL_REQ = re.compile(r"@\s*[a-z+]+://")
KERNEL_URL = r"\s*sgl[-_]kernel\s*@\s*https?://\S+/[^/\s#]+\.whl\s*"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _sums_ok(value: Any) -> bool:
    return _is_list(value) and all(re.fullmatch(SHA256, str(s)) for s in value)


def _controller_file(path: str) -> str | None:
    """The text of a file on the controller, None when it cannot be read."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _stack(v: Any, errs: list[str]) -> None:
    """The stack's source, paths and lists: one message naming each input and what it allows."""
    source, sources = v.get("sglang_stack_source"), v.get("sglang_stack_sources_allowed")
    wheelhouse, lock = v.get("sglang_stack_wheelhouse"), v.get("sglang_stack_lock")
    ok = (
        _is_list(sources)
        and source in sources
        and full("[1-9][0-9]*", str(v.get("sglang_stack_keep_releases")))
        and full("[A-Za-z0-9_@+=:,./-]+", v.get("sglang_stack_python"))
        and full(PATH, v.get("sglang_stack_root"))
        and all(
            _is_list(v.get(name))
            for name in ("sglang_stack_extra_index_urls", "sglang_stack_overrides", "sglang_stack_check_argv")
        )
        and (wheelhouse == "" or full(PATH, wheelhouse))
        and (lock == "" or full(PATH, lock))
    )
    if not ok:
        errs.append(
            f"Invalid sglang_stack input: sglang_stack_source={source} (allowed {sources}), "
            f"sglang_stack_keep_releases={v.get('sglang_stack_keep_releases')} (integer >= 1), "
            f"sglang_stack_python={as_json(v.get('sglang_stack_python'))} (an interpreter name or path of "
            "letters, digits and _ @ + = : , . / -), "
            f"sglang_stack_root={as_json(v.get('sglang_stack_root'))} (absolute, letters, digits and "
            "_ @ + = : , . / -), sglang_stack_extra_index_urls / sglang_stack_overrides / "
            f"sglang_stack_check_argv (lists), sglang_stack_wheelhouse={as_json(wheelhouse)} and "
            f"sglang_stack_lock={as_json(lock)} ('' or absolute)."
        )
    series = v.get("sglang_stack_patch_series")
    if as_bool(v.get("sglang_stack_apply_patches")) and not (
        isinstance(series, str) and series and os.path.exists(os.path.expanduser(series))
    ):
        errs.append(
            f"sglang_stack_patch_series={series} does not exist on the controller "
            "(set sglang_stack_patches_dir, or sglang_stack_apply_patches=false to install unpatched)."
        )


def _kernel(v: Any, bad: Any) -> None:
    """The sgl-kernel wheel: its accepted sha256 lists and the requirement line."""
    sums, extra = v.get("sglang_stack_sgl_kernel_sha256"), v.get("sglang_stack_sgl_kernel_sha256_extra")
    if not _sums_ok(sums):
        bad(
            "sglang_stack_sgl_kernel_sha256",
            sums,
            "a list of sha256 (64 lowercase hex), default every value SGLang's index lists for the wheel "
            "(versions.yml)",
        )
    if not _sums_ok(extra):
        bad(
            "sglang_stack_sgl_kernel_sha256_extra",
            extra,
            "a list of sha256 (64 lowercase hex) of a re-uploaded sgl-kernel wheel, each checked against "
            "SGLang's own wheel index (repository sgl-project/whl, cu130/sgl-kernel/index.html) before it "
            "is added",
        )
    req = v.get("sglang_stack_sgl_kernel_requirement")
    accepted = [s for value in (sums, extra) if _is_list(value) for s in value]
    ok = (
        isinstance(req, str)
        and not CONTROL.search(req)
        and (not URL_REQ.search(req) or (re.fullmatch(KERNEL_URL, req) is not None and len(accepted) > 0))
    )
    if not ok:
        bad(
            "sglang_stack_sgl_kernel_requirement",
            req,
            "an index requirement line (e.g. sgl-kernel==0.3.21), or `sgl-kernel @ https://.../<file>.whl` "
            "without a #sha256= fragment, whose accepted sha256 list (sglang_stack_sgl_kernel_sha256 + "
            "sglang_stack_sgl_kernel_sha256_extra, default every value SGLang's index lists for this "
            "architecture, versions.yml) is not empty: the wheel is downloaded once and kept only when its "
            "sha256 is one of them",
        )


def _supply(v: Any, bad: Any) -> None:
    """Supply chain (issue 21): every artefact against a sha256, the full commit id, a hashed lock."""
    commit = v.get("sglang_stack_git_version")
    if v.get("sglang_stack_source") == "git" and not (
        isinstance(commit, str) and re.fullmatch("[0-9a-f]{40}", commit)
    ):
        bad(
            "sglang_stack_git_version",
            commit,
            "the full 40-hex commit id (a tag, branch or short id can move or collide)",
        )
    _kernel(v, bad)
    uv_sums = v.get("sglang_stack_uv_sha256")
    if not (_sums_ok(uv_sums) and len(uv_sums) > 0):
        bad(
            "sglang_stack_uv_sha256",
            uv_sums,
            "a non-empty list of sha256 (64 lowercase hex) of the uv wheels",
        )
    extra_reqs = v.get("sglang_stack_extra_requirements")
    lines = [str(x) for x in extra_reqs] if _is_list(extra_reqs) else [str(extra_reqs)]
    if any(URL_REQ.search(x) and not re.fullmatch(r".*#sha256=[0-9a-f]{64}\s*", x) for x in lines):
        bad(
            "sglang_stack_extra_requirements",
            extra_reqs,
            "requirement lines; a URL requirement must end in #sha256=<64 hex>",
        )
    locks_dir = v.get("sglang_stack_locks_dir")
    if not (isinstance(locks_dir, str) and re.fullmatch(r"/[A-Za-z0-9_./-]+", locks_dir)):
        bad("sglang_stack_locks_dir", locks_dir, "an absolute path of [A-Za-z0-9_./-]")
    lock = v.get("sglang_stack_lock")
    if lock not in ("", None):
        text = _controller_file(str(lock))
        if text is None or "--hash=sha256:" not in text:
            bad(
                "sglang_stack_lock",
                lock,
                "'' or a lock file on the controller with --hash=sha256: lines "
                "(uv pip compile --generate-hashes)",
            )


def errors(v: Any) -> list[str]:
    """Every error of the sglang_stack inputs."""
    errs: list[str] = []

    def bad(var: str, value: Any, allowed: str) -> None:
        errs.append(f"bad sglang_stack input: {var}={as_json(value)}: allowed {allowed}")

    _stack(v, errs)
    _supply(v, bad)
    return errs
