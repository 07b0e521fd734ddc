# Managed by Ansible (role sglang_service): local edits are overwritten.
"""sglang-deploy's launcher: runs ``-m MODULE ARGS...`` or ``SCRIPT ARGS...`` exactly as ``python``
would, after hiding the API keys in the repr of SGLang's ``ServerArgs``.

usage: python sglang_launch.py -m sglang.launch_server --model-path ... --config FILE.yaml
       python sglang_launch.py /path/to/script.py ARGS...

Why: SGLang 0.5.9 logs ``logger.info(f"{server_args=}")`` at start-up (entrypoints/engine.py
``_launch_subprocesses``) and when its global server args are updated (managers/scheduler.py), i.e.
the dataclass repr with ``api_key='<key>'`` lands in the journal. The key reaches SGLang in its own
``--config`` YAML file (systemd ``LoadCredential=``), so it is on no command line; this launcher keeps
it out of the log too: ``ServerArgs.__repr__`` prints ``api_key='********'`` (and the same for
``admin_api_key``) when a key is set. Nothing else changes: the module runs through ``runpy`` with
``sys.argv`` as python's ``-m`` would set it, in this interpreter.

The mask also holds in SGLang's worker processes: they are started with multiprocessing's "spawn",
which re-runs the parent's ``__main__`` file (this one, as ``__mp_main__``) in every child before
anything else, so the repr is replaced there too. One difference from ``python -m``: the module's
own ``__main__`` namespace is not importable by the children, so a function defined there could not
be a child's target; SGLang's targets (run_scheduler_process, run_detokenizer_process, ...) live in
importable modules. Without SGLang importable (a test double with another interpreter) there is
nothing to mask and the target runs as is.
"""

from __future__ import annotations

import dataclasses
import runpy
import sys
from typing import Any

MASK = "********"
SECRET_FIELDS = ("api_key", "admin_api_key")


def _is_secret(name: str) -> bool:
    return name in SECRET_FIELDS or name.endswith(("_api_key", "_token", "_password", "_secret"))


def mask_server_args_repr() -> bool:
    """Replace ServerArgs.__repr__ by one that hides the secret fields; False without SGLang."""
    try:
        from sglang.srt import server_args as sa  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError:
        return False
    cls = sa.ServerArgs
    if getattr(cls.__repr__, "_sglang_deploy_masked", False):
        return True
    fields = [f for f in dataclasses.fields(cls) if f.repr]

    def __repr__(self: Any) -> str:
        parts = []
        for f in fields:
            value = getattr(self, f.name, None)
            shown = repr(MASK) if _is_secret(f.name) and value not in (None, "") else repr(value)
            parts.append(f"{f.name}={shown}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    __repr__._sglang_deploy_masked = True  # type: ignore[attr-defined]
    cls.__repr__ = __repr__
    return True


MASKED = mask_server_args_repr()


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        sys.argv = [module, *rest]
        # alter_sys=False: sys.modules["__main__"] stays this file, so spawned children re-run it
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    elif argv and not argv[0].startswith("-"):
        script, rest = argv[0], argv[1:]
        sys.argv = [script, *rest]
        runpy.run_path(script, run_name="__main__")
    else:
        sys.exit("usage: sglang_launch.py (-m MODULE | SCRIPT) [ARGS...]")


if __name__ == "__main__":
    main(sys.argv[1:])
