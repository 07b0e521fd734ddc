"""Issue 32 item 1: sglang.bench_serving 0.5.9 loads the tokenizer with trust_remote_code=True whatever
the operator chose; the benchmark runner (roles/verify/files/verify_bench.py) pins it to
sglang_trust_remote_code. Run in the real SGLang venv (transformers; bench_serving's own call, read from
its source) with a model directory whose tokenizer code writes a marker when it is imported: with
remote code off it must not run at all; with it on it runs (the e2e verify lab shows it then runs as
the service user in the sandbox, not as root). The marker is the evidence, not a mock."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import cast

import pytest

pytest.register_assert_rewrite("patches_fixtures")
pytest_plugins = ("patches_fixtures",)

from patches_fixtures import run_probe  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "src" / "sglang_deploy" / "data" / "lab-model" / "target"
MARKER_CODE = """import os
from transformers import PreTrainedTokenizerFast
with open(os.environ["MARKER"], "w") as fh:
    fh.write(f"uid={os.getuid()}")


class MarkerTokenizer(PreTrainedTokenizerFast):
    pass
"""
PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import verify_bench
verify_bench.pin_remote_code(sys.argv[3] == "on")
import importlib.util, inspect
from transformers import AutoTokenizer
# bench_serving 0.5.9's get_tokenizer, read from the installed module (importing it pulls in datasets,
# whose pyarrow pin differs in this test venv): it loads a local path with exactly this call
source = open(importlib.util.find_spec("sglang.bench_serving").origin).read()
call = "return AutoTokenizer.from_pretrained(\n        pretrained_model_name_or_path, "
call += "trust_remote_code=True\n    )"
assert call in source
try:
    tok = AutoTokenizer.from_pretrained(sys.argv[2], trust_remote_code=True)
    print("PROBE " + json.dumps({"loaded": type(tok).__name__}))
except Exception as err:
    print("PROBE " + json.dumps({"refused": f"{type(err).__name__}: {err}"[:400]}))
"""


def _model(tmp: Path) -> Path:
    model = tmp / "model"
    shutil.copytree(SHIPPED, model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["tokenization_marker.MarkerTokenizer", None]}
    cfg["tokenizer_class"] = "MarkerTokenizer"
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    (model / "tokenization_marker.py").write_text(MARKER_CODE)
    return model


def _probe(python: Path, model: Path, mode: str, marker: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "MARKER": str(marker),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "HF_MODULES_CACHE": str(marker.parent / f"modules-{mode}"),
    }
    runner = marker.parent / f"runner-{mode}"  # as the role copies them: runner, scrubber, rule
    runner.mkdir()
    shutil.copy(REPO / "roles/verify/files/verify_bench.py", runner)
    shutil.copy(REPO / "plugins/module_utils/verify_scrub.py", runner)
    shutil.copy(REPO / "plugins/module_utils/secret_names.py", runner)
    return cast(dict[str, str], run_probe(python, ["-c", PROBE, str(runner), str(model), mode], env))


def test_remote_code_off_runs_none_of_the_models_code(sglang_venv_python: Path, tmp_path: Path) -> None:
    model = _model(tmp_path)
    marker = tmp_path / "marker-off"
    got = _probe(sglang_venv_python, model, "off", marker)
    assert "refused" in got, got
    assert "contains custom code" in got["refused"], got
    assert not marker.exists()


def test_remote_code_on_runs_it(sglang_venv_python: Path, tmp_path: Path) -> None:
    """The same probe with remote code on: the marker is written (so the off case can fail)."""
    model = _model(tmp_path)
    marker = tmp_path / "marker-on"
    got = _probe(sglang_venv_python, model, "on", marker)
    assert got == {"loaded": "MarkerTokenizer"}, got
    assert marker.read_text() == f"uid={os.getuid()}"
