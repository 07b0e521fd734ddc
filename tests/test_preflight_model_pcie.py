"""Preflight's model/drafter and PCIe checks end to end (issue 31 items 3 and 4): the real stage
playbook (playbooks/preflight.yml) on the controller (`connection: local`) with TEST DOUBLES of
nvidia-smi (recorded samples of tests/data/nvidia-smi, with a GPU memory of our choosing for the size
rule) and of lspci (the samples of tests/data/lspci), since no GPU or PCIe switch exists here. Every
bad input is refused before any change (changed=0), in check mode too; the model directories are
real ones (the repository's shipped lab model, copies of it)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_validation_preflight import LAB_MODEL, REPO, SAMPLES, _recap, make_runner

DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_runner(tmp_path_factory.mktemp("preflight-model"))


def _smi(tmp: Path, query: str, topo: str = "") -> Path:
    """TEST DOUBLE of nvidia-smi printing the given --query-gpu CSV and topo -m matrix."""
    path = tmp / "nvidia-smi"
    path.write_text(
        "#!/bin/sh\n# TEST DOUBLE of nvidia-smi (tests/test_preflight_model_pcie.py)\n"
        f"case \"$*\" in\n  --query-gpu=*) printf '%s' {shlex.quote(query)} ;;\n"
        f"  'topo -m') printf '%s' {shlex.quote(topo)} ;;\n  *) exit 2 ;;\nesac\n"
    )
    path.chmod(0o755)
    return path


def _lspci(tmp: Path, sample: str) -> Path:
    """TEST DOUBLE of lspci printing a sample of tests/data/lspci for `lspci -vvv`."""
    path = tmp / "lspci"
    path.write_text(
        "#!/bin/sh\n# TEST DOUBLE of lspci\n"
        f'[ "$*" = -vvv ] || exit 2\nexec cat {shlex.quote(str(DATA / "lspci" / sample))}\n'
    )
    path.chmod(0o755)
    return path


def _out(proc: Any) -> str:
    return str(proc.stdout + proc.stderr)


def test_the_shipped_lab_model_passes_on_a_gpu_host(run: Any) -> None:
    proc = run({}, gpu=True)
    out = _out(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "model LlamaForCausalLM bfloat16 0.57 MiB of weights" in out
    assert "WARNING" not in out


@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize(
    ("over", "needles"),
    [
        (
            {"sglang_model_path": "/opt/models/none-such"},
            ['sglang_model_path="/opt/models/none-such" does not exist on this host', "copy the model there"],
        ),
        (
            {"sglang_model_path": "/home/sglang-none-such/kimi"},
            ["is under /home, which sglang-kimi.service cannot see (ProtectHome=yes", "/opt/models"],
        ),
        (
            {"sglang_draft_model_path": str(LAB_MODEL / "target")},
            [
                'architectures=["LlamaForCausalLM"] names no EAGLE-3 draft model',
                "allowed LlamaForCausalLMEagle3",
            ],
        ),
    ],
    ids=["missing", "home", "non_eagle3_drafter"],
)
def test_bad_model_directories_are_refused(
    run: Any, over: dict[str, str], needles: list[str], check: bool
) -> None:
    proc = run(over, *(["--check"] if check else []), gpu=True)
    out = _out(proc)
    assert proc.returncode == 2, out[-3000:]
    for needle in needles:
        assert needle in out, out[-3000:]
    recap = _recap(out)
    assert recap["changed"] == 0
    assert recap["failed"] == 1


def test_a_model_under_tmp_is_refused(run: Any, tmp_path: Path) -> None:
    model = tmp_path / "kimi"
    shutil.copytree(LAB_MODEL / "target", model)
    proc = run({"sglang_model_path": str(model)}, gpu=True)
    out = _out(proc)
    assert proc.returncode == 2, out[-3000:]
    assert f'{model}" is under /tmp, which sglang-kimi.service cannot see (PrivateTmp=yes' in out, out[-3000:]
    assert _recap(out)["changed"] == 0


def test_a_model_too_large_for_the_gpus_is_refused(run: Any, tmp_path: Path) -> None:
    # one "GPU" of 1 MiB (the double's memory.total): the lab model's 0.57 MiB of weights exceed 1 MiB x 0.5
    query = (
        "index, name, compute_cap, driver_version, memory.total [MiB]\n0, NVIDIA H200, 9.0, 580.159.04, 1\n"
    )
    proc = run({"sglang_mem_fraction_static": 0.5}, gpu=True, smi=_smi(tmp_path, query))
    out = _out(proc)
    assert proc.returncode == 2, out[-3000:]
    assert (
        "weights take 0.57 MiB per GPU (0.57 MiB / sglang_tp_size=1); the static budget is 0.50 MiB per GPU"
        in out
    ), out[-3000:]
    assert "(1 MiB x sglang_mem_fraction_static=0.5): they do not fit" in out
    assert _recap(out)["changed"] == 0


def test_a_model_naming_code_is_refused_while_remote_code_is_off(run: Any) -> None:
    """auto_map in tokenizer_config.json (code bench_serving and the server would run on load): refused
    with sglang_trust_remote_code=false, before any change; allowed with it true."""
    model = LAB_MODEL / "auto-map"
    shutil.rmtree(model, ignore_errors=True)
    shutil.copytree(LAB_MODEL / "target", model)
    try:
        cfg = json.loads((model / "tokenizer_config.json").read_text())
        cfg["auto_map"] = {"AutoTokenizer": ["tokenization_marker.MarkerTokenizer", None]}
        (model / "tokenizer_config.json").write_text(json.dumps(cfg))
        model.chmod(0o755)
        for path in model.iterdir():
            path.chmod(0o644)
        refused = run({"sglang_model_path": str(model), "sglang_trust_remote_code": False}, gpu=True)
        out = _out(refused)
        assert refused.returncode == 2, out[-3000:]
        assert (
            f'sglang_model_path="{model}" names Python code to run when it is loaded (tokenizer_config.json: '
            "AutoTokenizer=tokenization_marker.MarkerTokenizer) and sglang_trust_remote_code=false"
        ) in out, out[-3000:]
        assert _recap(out)["changed"] == 0
        allowed = run({"sglang_model_path": str(model), "sglang_trust_remote_code": True}, gpu=True)
        assert allowed.returncode == 0, _out(allowed)[-3000:]
    finally:
        shutil.rmtree(model, ignore_errors=True)


def test_baseline_ignores_the_drafter(run: Any) -> None:
    proc = run({"sglang_preset": "baseline", "sglang_draft_model_path": ""}, gpu=True)
    assert proc.returncode == 0, _out(proc)[-3000:]


def test_lab_host_warns_instead(run: Any) -> None:
    proc = run({"sglang_model_path": "/opt/models/none-such"})
    out = _out(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "WARNING (lab host): sglang_model_path=" in out


def _rtx8(tmp_path: Path) -> Path:
    query = (SAMPLES / "rtxpro6000x8.query-gpu.csv").read_text()
    topo = (SAMPLES / "rtxpro6000x8-pcie.topo-m.txt").read_text()
    return _smi(tmp_path, query, topo)


@pytest.mark.parametrize("check", [False, True])
def test_acs_on_the_gpu_bridges_warns_and_refuses_when_asked(run: Any, tmp_path: Path, check: bool) -> None:
    smi, lspci = _rtx8(tmp_path), _lspci(tmp_path, "acs-enabled-pex-switch.txt")
    over = {"sglang_tp_size": 8, "preflight_lspci_candidates": [str(lspci)]}
    extra = ["--check"] if check else []
    proc = run(over, *extra, gpu=True, smi=smi)
    out = _out(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "WARNING: ACS redirects P2P to the root complex on 3 bridge(s) above the GPUs: 00:01.0" in out, (
        out[-3000:]
    )
    assert "16:00.0 (Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)): ACSCtl ReqRedir+ CmpltRedir+" in out
    assert "setpci -s <bdf> ECAP_ACS+6.w=0000" in out
    assert "PCIe P2P:" in out
    proc = run({**over, "preflight_pcie_acs_refuse": True}, *extra, gpu=True, smi=smi)
    out = _out(proc)
    assert proc.returncode == 2, out[-3000:]
    assert "GPU peer-to-peer over PCIe is redirected on this host: ACS redirects P2P" in out
    assert _recap(out)["changed"] == 0


def test_acs_disabled_and_lspci_missing(run: Any, tmp_path: Path) -> None:
    smi = _rtx8(tmp_path)
    lspci = _lspci(tmp_path, "acs-disabled-pex-switch.txt")
    proc = run(
        {"sglang_tp_size": 8, "preflight_lspci_candidates": [str(lspci)], "preflight_pcie_acs_refuse": True},
        gpu=True,
        smi=smi,
    )
    out = _out(proc)
    # this controller's own IOMMU state is read for real: refused only if it translates DMA
    iommu = Path("/sys/class/iommu")
    translating = (
        iommu.is_dir() and any(iommu.iterdir()) and "iommu=pt" not in Path("/proc/cmdline").read_text()
    )
    assert proc.returncode == (2 if translating else 0), out[-3000:]
    assert "ACS redirects" not in out
    no_lspci = {"preflight_lspci_candidates": ["/nonexistent/lspci"]}
    proc = run({"sglang_tp_size": 8, "preflight_pcie_acs_refuse": True, **no_lspci},
               gpu=True, smi=smi)  # fmt: skip
    out = _out(proc)
    assert "lspci is missing (install pciutils)" in out
    assert proc.returncode == (2 if translating else 0), out[-3000:]


def test_the_pcie_fact_is_exported(run: Any, tmp_path: Path) -> None:
    smi, lspci = _rtx8(tmp_path), _lspci(tmp_path, "acs-enabled-pex-switch.txt")
    proc = run({"sglang_tp_size": 8, "preflight_lspci_candidates": [str(lspci)]}, "-v", gpu=True, smi=smi)
    out = _out(proc)
    assert proc.returncode == 0, out[-3000:]
    start = out.index('"preflight_pcie_p2p": {')
    fact = json.JSONDecoder().raw_decode(out[start + len('"preflight_pcie_p2p": ') :])[0]
    assert fact["checked"] is True
    assert fact["lspci"] is True
    assert fact["gpus"] == ["17:00.0", "18:00.0"]
    assert [entry.split(" ")[0] for entry in fact["acs_redirect"]] == ["00:01.0", "16:00.0", "16:01.0"]
