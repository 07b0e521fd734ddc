"""On the lent GPU machine, after the wheels of wheels.txt are installed: import every module the protocol
double (playbooks/lab/sglang_protocol_double.py, with its own sgl_kernel stub) and SGLang's bench_serving
need, and print the versions that matter. Exits 1 at the first module that does not import."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path

MODULES = (
    "uvicorn",
    "fastapi",
    "fastapi.responses",
    "sglang.srt.entrypoints.openai.protocol",
    "sglang.srt.managers.io_struct",
    "sglang.srt.server_args",
    "sglang.srt.server_args_config_parser",
    "sglang.srt.utils.auth",
    "sglang.version",
    "prometheus_client",
    "sglang.bench_serving",
)
DISTRIBUTIONS = (
    "torch", "transformers", "tokenizers", "huggingface-hub", "datasets", "pyarrow", "fsspec", "pandas",
    "fastapi", "starlette", "pydantic", "uvicorn", "aiohttp", "numpy", "anyio", "sglang",
)  # fmt: skip


def stub_sgl_kernel() -> None:
    """The double's own stub (its function, run here as it runs there), before SGLang is imported."""
    source = Path("playbooks/lab/sglang_protocol_double.py").read_text(encoding="utf-8")
    start = source.index("def _stub_sgl_kernel_without_gpu")
    end = source.index("_stub_sgl_kernel_without_gpu()\n", start + 40)
    namespace: dict[str, object] = {"__name__": "stub"}
    prelude = "from __future__ import annotations\nfrom typing import Any\nimport sys\n"
    exec(prelude + source[start:end] + "_stub_sgl_kernel_without_gpu()\n", namespace)  # pylint: disable=exec-used


def main() -> int:
    sys.argv = ["probe"]
    stub_sgl_kernel()
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception as error:  # pylint: disable=broad-exception-caught  # which module, why; then stop
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            return 1
        print(f"OK {name}")
    for dist in DISTRIBUTIONS:
        try:
            print(dist, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            print(dist, "not installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
