"""Layer 9 helper: what the release venv really loads (run with the release venv's python).

Prints one JSON document: torch version, torch.version.cuda, and the NCCL version torch really loads
(torch.cuda.nccl.version(); "unknown (<why>)" when it cannot tell, e.g. a host without a GPU/driver).
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    out: dict[str, object] = {"python": sys.version.split()[0]}
    try:
        import torch  # noqa: PLC0415

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
        try:
            version = torch.cuda.nccl.version()
            out["nccl"] = (
                ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)
            )
        except Exception as exc:  # no driver / no NCCL in this build
            out["nccl"] = f"unknown ({type(exc).__name__}: {str(exc)[:120]})"
    except Exception as exc:
        out["torch"] = f"unknown ({type(exc).__name__}: {str(exc)[:120]})"
        out["nccl"] = "unknown (torch does not import)"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
