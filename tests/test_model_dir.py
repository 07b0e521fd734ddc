"""The model and drafter directories (issue 31 item 3): the probe's read of a directory
(`inspect_dir`, on real temporary directories) and the one decider (`decide_models`, pure) of
plugins/module_utils/model_dir.py, which preflight's filter sglang.deploy.preflight_model_check calls.
The GPU figures are those of the recorded nvidia-smi samples (tests/data/nvidia-smi)."""

from __future__ import annotations

import copy
import importlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from modload import REPO  # (and the collection on sys.path)

md: Any = importlib.import_module("ansible_collections.sglang.deploy.plugins.module_utils.model_dir")
LAB_MODEL = REPO / "src" / "sglang_deploy" / "data" / "lab-model"
H200_MIB = 143771  # tests/data/nvidia-smi/h200x1.query-gpu.csv
RTX_MIB = 97887  # tests/data/nvidia-smi/rtxpro6000x8.query-gpu.csv
GIB = 1024**3
EAGLE3 = "LlamaForCausalLMEagle3"
NOBODY = {"name": "sglang", "exists": False, "uid": -1, "gids": []}


def _stat(path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> dict[str, Any]:
    return {"path": path, "mode": mode, "uid": uid, "gid": gid}


def _weights(
    files: list[str], size: int, index: str = "", missing: list[str] | None = None
) -> dict[str, Any]:
    return {"format": "safetensors", "files": files, "bytes": size, "index": index, "missing": missing or []}


def _report(
    path: str = "/opt/models/m", *, arch: str = "LlamaForCausalLM", size: int = 10 * GIB
) -> dict[str, Any]:
    """A report as inspect_dir gives it of a fit model directory (root-owned, world-readable)."""
    parts = path.strip("/").split("/")
    dirs = [_stat("/")] + [_stat("/" + "/".join(parts[: i + 1])) for i in range(len(parts))]
    files = ["config.json", "tokenizer.json", "model.safetensors"]
    return {
        "path": path, "realpath": path, "exists": True, "is_dir": True, "config_present": True,
        "config": {"architectures": [arch], "torch_dtype": "bfloat16"}, "config_error": "",
        "tokenizer": ["tokenizer.json"],
        "weights": _weights(["model.safetensors"], size),
        "dirs": dirs, "files": [_stat(f"{path}/{f}", 0o644) for f in files],
    }  # fmt: skip


def _decide(
    model: dict[str, Any] | None = None,
    draft: dict[str, Any] | None = None,
    *,
    speculative: bool = True,
    user: dict[str, Any] | None = None,
    gpus: int = 8,
    mib: int = H200_MIB,
    tp: int = 8,
    fraction: float | None = None,
) -> Any:
    return md.decide_models(
        {"model": model or _report(), "draft": draft or _report("/opt/models/d", arch=EAGLE3, size=GIB)},
        speculative=speculative, user=user or NOBODY, gpu_count=gpus, gpu_memory_mib=mib, tp_size=tp,
        mem_fraction_static=fraction,
    )  # fmt: skip


def test_a_fit_model_and_drafter_pass() -> None:
    got = _decide()
    assert got["errors"] == []
    assert got["warnings"] == []
    assert got["weights_bytes"] == 11 * GIB
    assert got["per_gpu_bytes"] == 11 * GIB // 8
    assert "LlamaForCausalLM bfloat16 11.0 GiB" in got["summary"]


def test_missing_directory() -> None:
    missing = {**_report("/data/none"), "exists": False, "is_dir": False, "dirs": [], "files": []}
    (error,) = _decide(missing)["errors"]
    assert error.startswith('sglang_model_path="/data/none" does not exist on this host')
    assert "copy the model there" in error


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"config_present": False}, "has no config.json"),
        ({"config_error": "Expecting value: line 1 column 1"}, "config.json is not valid JSON"),
        ({"tokenizer": []}, "has no tokenizer: allowed tokenizer.json, tokenizer.model"),
        ({"weights": {"format": "", "files": [], "bytes": 0, "index": "", "missing": []}}, "has no weights"),
        ({"is_dir": False}, "is not a directory"),
        (
            {"weights": _weights(["a.safetensors"], 1, "model.safetensors.index.json", ["b.safetensors"])},
            "model.safetensors.index.json names 1 file(s) that are missing (b.safetensors)",
        ),
    ],
)  # fmt: skip
def test_unfit_model_directory(change: dict[str, Any], needle: str) -> None:
    errors = _decide({**_report(), **change})["errors"]
    assert len(errors) == 1, errors
    assert needle in errors[0], errors
    assert errors[0].startswith('sglang_model_path="/opt/models/m"')


def test_drafter_needs_no_tokenizer() -> None:
    draft = {**_report("/opt/models/d", arch="LlamaForCausalLMEagle3"), "tokenizer": []}
    assert _decide(draft=draft)["errors"] == []


@pytest.mark.parametrize(
    ("path", "tree", "setting"),
    [
        ("/home/ubuntu/models/kimi", "/home", "ProtectHome=yes"),
        ("/root/kimi", "/root", "ProtectHome=yes"),
        ("/run/user/1000/m", "/run/user", "ProtectHome=yes"),
        ("/tmp/kimi", "/tmp", "PrivateTmp=yes"),
        ("/var/tmp/kimi", "/var/tmp", "PrivateTmp=yes"),
    ],
)
def test_paths_the_unit_sandbox_hides(path: str, tree: str, setting: str) -> None:
    (error,) = _decide(_report(path))["errors"]
    assert error.startswith(
        f'sglang_model_path="{path}" is under {tree}, which sglang-kimi.service cannot see ({setting}'
    )
    assert "move the model (or bind-mount it) to e.g. /opt/models" in error


def test_not_hidden_lookalikes() -> None:
    assert _decide(_report("/home2/models/m"))["errors"] == []
    assert _decide(_report("/opt/tmp/m"))["errors"] == []


def test_symlink_into_tmp_is_hidden() -> None:
    linked = {**_report("/opt/models/m"), "realpath": "/tmp/dl/m"}
    (error,) = _decide(linked)["errors"]
    assert '"/opt/models/m" (real path /tmp/dl/m) is under /tmp' in error
    filelinked = _report("/opt/models/m")
    filelinked["files"][2] = _stat("/tmp/cache/blobs/0f3a", 0o644)
    (error,) = _decide(filelinked)["errors"]
    assert "holds /tmp/cache/blobs/0f3a (through a symlink) under /tmp" in error


def test_unreadable_by_other_when_the_user_does_not_exist() -> None:
    closed = _report()
    closed["dirs"][2] = _stat("/opt/models", 0o750)
    (error,) = _decide(closed)["errors"]
    assert (
        "the service user sglang (not created yet: judged as 'other') cannot traverse /opt/models (mode 0750)"
        in error
    )
    assert "chmod o+x /opt/models" in error
    assert "sglang_service_user" in error
    private = _report()
    private["files"][2] = _stat("/opt/models/m/model.safetensors", 0o600)
    (error,) = _decide(private)["errors"]
    assert "cannot read /opt/models/m/model.safetensors (mode 0600): chmod -R o+r /opt/models/m" in error
    unlistable = _report()
    unlistable["dirs"][-1] = _stat("/opt/models/m", 0o711)
    (error,) = _decide(unlistable)["errors"]
    assert "cannot list /opt/models/m (mode 0711)" in error


def test_group_and_owner_of_an_existing_user() -> None:
    grouped = _report()
    grouped["dirs"][-1] = _stat("/opt/models/m", 0o750, uid=0, gid=900)
    for i in range(3):
        grouped["files"][i] = {**grouped["files"][i], "mode": 0o640, "gid": 900}
    member = {"name": "sglang", "exists": True, "uid": 998, "gids": [998, 900]}
    assert _decide(grouped, user=member)["errors"] == []
    outsider = {"name": "sglang", "exists": True, "uid": 998, "gids": [998]}
    (error,) = _decide(grouped, user=outsider)["errors"]
    assert "the service user sglang cannot list /opt/models/m (mode 0750)" in error
    owned = _report()
    owned["files"][0] = _stat("/opt/models/m/config.json", 0o600, uid=998, gid=998)
    assert _decide(owned, user=outsider)["errors"] == []


def test_too_large_for_the_gpus() -> None:
    # Kimi-K2-class: 1030 GiB of weights on 8 x RTX PRO 6000 (97887 MiB) with fraction 0.85
    (error,) = _decide(_report(size=1030 * GIB), mib=RTX_MIB, fraction=0.85)["errors"]
    assert (
        "the model's and the drafter's weights take 128.9 GiB per GPU (1031.0 GiB / sglang_tp_size=8)"
        in error
    )
    assert "static budget is 81.3 GiB per GPU (97887 MiB x sglang_mem_fraction_static=0.85)" in error
    assert "raise sglang_tp_size" in error


def test_small_kv_room_warns() -> None:
    # 8 x H200 with SGLang's own fraction (at most 0.915 with the drafter, tp 8): 128.5 GiB budget
    got = _decide(_report(size=8 * 120 * GIB))
    assert got["errors"] == []
    assert got["mem_fraction"] == md.mem_fraction_auto(H200_MIB, 8, True) == 0.915
    (warning,) = got["warnings"]
    assert warning.startswith("WARNING: the model's and the drafter's weights take 120.1 GiB per GPU")
    assert "SGLang's own fraction (at most 0.915 with sglang_mem_fraction_static=null)" in warning
    assert "is left for the KV cache" in warning


def test_no_gpu_skips_the_size_rule() -> None:
    assert _decide(_report(size=10_000 * GIB), gpus=0, mib=0)["errors"] == []


def test_drafter_with_a_non_eagle3_architecture() -> None:
    draft = _report("/opt/models/d", arch="LlamaForCausalLM")
    (error,) = _decide(draft=draft)["errors"]
    assert error.startswith(
        'sglang_draft_model_path="/opt/models/d": config.json architectures=["LlamaForCausalLM"]'
    )
    assert "allowed LlamaForCausalLMEagle3" in error
    assert "sglang_preset=baseline" in error


def test_baseline_ignores_the_drafter() -> None:
    missing = {**_report(""), "exists": False, "is_dir": False, "path": "", "realpath": ""}
    got = _decide(draft=missing, speculative=False)
    assert got["errors"] == []
    assert got["weights_bytes"] == 10 * GIB  # the drafter's bytes do not count
    assert "the model's weights" not in " ".join(got["warnings"])


# ---- inspect_dir on real directories (the probe's read on the host) ----


def _copy_lab(tmp_path: Path, name: str = "target") -> Path:
    dest = tmp_path / name
    shutil.copytree(LAB_MODEL / name, dest)
    return dest


def test_inspect_the_shipped_lab_model(tmp_path: Path) -> None:
    target = md.inspect_dir(str(_copy_lab(tmp_path)))
    assert target["exists"]
    assert target["is_dir"]
    assert target["config_present"]
    assert target["config"]["architectures"] == ["LlamaForCausalLM"]
    assert target["config"]["torch_dtype"] == "bfloat16"
    assert target["tokenizer"] == ["tokenizer.json", "tokenizer_config.json"]
    size = (LAB_MODEL / "target" / "model.safetensors").stat().st_size
    assert target["weights"] == {
        "format": "safetensors",
        "files": ["model.safetensors"],
        "bytes": size,
        "index": "",
        "missing": [],
    }
    assert target["dirs"][0]["path"] == "/"
    assert target["dirs"][-1]["path"] == str(tmp_path / "target")
    assert {Path(f["path"]).name for f in target["files"]} == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors",
    }
    draft = md.inspect_dir(str(_copy_lab(tmp_path, "eagle3")))
    assert draft["config"]["architectures"] == ["LlamaForCausalLMEagle3"]
    assert draft["tokenizer"] == []
    # on the real directories the decider passes all but the /tmp rule (pytest's tmp_path is in /tmp;
    # root as the service user: pytest's own /tmp/pytest-of-<user> is 0700)
    root = md.service_user("root")
    got = md.decide_models({"model": target, "draft": draft}, speculative=True, user=root, gpu_count=1,
                           gpu_memory_mib=H200_MIB, tp_size=1)  # fmt: skip
    assert all(
        "is under /tmp, which sglang-kimi.service cannot see (PrivateTmp=yes" in e for e in got["errors"]
    )
    assert len(got["errors"]) == 2


def test_inspect_missing_and_unfit(tmp_path: Path) -> None:
    assert md.inspect_dir(str(tmp_path / "none"))["exists"] is False
    assert md.inspect_dir("")["exists"] is False
    file = tmp_path / "file"
    file.write_text("x")
    assert md.inspect_dir(str(file))["is_dir"] is False
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    (bad / "pytorch_model-00001-of-00002.bin").write_bytes(b"\0" * 10)
    (bad / "pytorch_model.bin.index.json").write_text(
        json.dumps(
            {"weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}
        )
    )
    got = md.inspect_dir(str(bad))
    assert got["config_present"]
    assert got["config_error"]
    assert got["tokenizer"] == []
    assert got["weights"] == {
        "format": "bin", "files": ["pytorch_model-00001-of-00002.bin"], "bytes": 10,
        "index": "pytorch_model.bin.index.json", "missing": ["pytorch_model-00002-of-00002.bin"],
    }  # fmt: skip


def test_inspect_follows_symlinks_and_reads_modes(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    real = _copy_lab(tmp_path)
    (real / "model.safetensors").chmod(0o600)
    blobs = tmp_path / "blobs"
    blobs.mkdir(mode=0o700)
    blobs.chmod(0o700)
    shutil.move(real / "tokenizer.json", blobs / "0f3a")
    (real / "tokenizer.json").symlink_to(blobs / "0f3a")
    link = tmp_path / "link"
    link.symlink_to(real)
    got = md.inspect_dir(str(link))
    assert got["path"] == str(link)
    assert got["realpath"] == str(real)
    modes = {f["path"]: f["mode"] for f in got["files"]}
    assert modes[str(real / "model.safetensors")] == 0o600
    assert str(blobs / "0f3a") in modes  # the symlinked file by its real path
    assert {d["path"]: d["mode"] for d in got["dirs"]}[str(blobs)] == 0o700
    # judged inside tmp_path only (pytest's own /tmp/pytest-of-<user> above it is 0700)
    got["dirs"] = [d for d in got["dirs"] if d["path"].startswith(str(tmp_path))]
    errors = md.decide_models(
        {"model": got}, speculative=False, user=NOBODY, gpu_count=0, gpu_memory_mib=0, tp_size=1
    )["errors"]
    assert errors[0].startswith(f'sglang_model_path="{link}" (real path {real}) is under /tmp')
    assert f"cannot traverse {blobs} (mode 0700)" in errors[1], errors
    got["dirs"] = [d for d in got["dirs"] if d["path"] != str(blobs)]
    errors = md.decide_models(
        {"model": got}, speculative=False, user=NOBODY, gpu_count=0, gpu_memory_mib=0, tp_size=1
    )["errors"]
    assert f"cannot read {real / 'model.safetensors'} (mode 0600)" in errors[1], errors


def test_service_user_lookup() -> None:
    root = md.service_user("root")
    assert root["exists"]
    assert root["uid"] == 0
    assert 0 in root["gids"]
    assert md.service_user("sglang-none-such") == {
        "name": "sglang-none-such",
        "exists": False,
        "uid": -1,
        "gids": [],
    }


def test_inspect_is_read_only(tmp_path: Path) -> None:
    model = _copy_lab(tmp_path)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_mode) for p in model.iterdir()}
    md.inspect_dir(str(model))
    assert {p: (p.stat().st_mtime_ns, p.stat().st_mode) for p in model.iterdir()} == before
    assert sorted(os.listdir(model)) == sorted(p.name for p in before)


def test_eagle3_architectures_are_sglang_0_5_9s() -> None:
    assert copy.copy(md.EAGLE3_ARCHITECTURES) == ("LlamaForCausalLMEagle3",)


def test_preflight_judges_the_service_roles_user() -> None:
    """preflight runs before sglang_service's defaults are loaded: its fallback for
    sglang_service_user (roles/preflight/vars/main.yml) must be that role's default."""
    import yaml  # noqa: PLC0415

    default = yaml.safe_load((REPO / "roles/sglang_service/defaults/main.yml").read_text())[
        "sglang_service_user"
    ]
    fallback = yaml.safe_load((REPO / "roles/preflight/vars/main.yml").read_text())[
        "__preflight_service_user"
    ]
    assert fallback == "{{ sglang_service_user | default('" + default + "') }}"


def _with_auto_map(tmp_path: Path) -> Path:
    """The lab model with a tokenizer whose auto_map names code (as Kimi-K2's tokenization_kimi.py)."""
    model = _copy_lab(tmp_path, "target")
    cfg_path = model / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["auto_map"] = {"AutoTokenizer": ["tokenization_marker.MarkerTokenizer", None]}
    cfg_path.write_text(json.dumps(cfg))
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_marker.MarkerConfig"}
    (model / "config.json").write_text(json.dumps(config))
    return model


def test_inspect_reads_auto_map(tmp_path: Path) -> None:
    got = md.inspect_dir(str(_with_auto_map(tmp_path)))
    assert got["remote_code"] == [
        "config.json: AutoConfig=configuration_marker.MarkerConfig",
        "tokenizer_config.json: AutoTokenizer=tokenization_marker.MarkerTokenizer",
    ]
    assert md.inspect_dir(str(_copy_lab(tmp_path, "eagle3")))["remote_code"] == []


def test_auto_map_refused_while_remote_code_is_off() -> None:
    model = _report()
    model["remote_code"] = ["tokenizer_config.json: AutoTokenizer=tokenization_kimi.TikTokenTokenizer"]
    draft = _report("/opt/models/d", arch=EAGLE3, size=GIB)
    draft["remote_code"] = ["config.json: AutoConfig=configuration_x.X"]
    allowed = md.decide_models(
        {"model": model, "draft": draft}, speculative=True, user=NOBODY, gpu_count=8, gpu_memory_mib=H200_MIB,
        tp_size=8, trust_remote_code=True,
    )  # fmt: skip
    assert allowed["errors"] == []
    refused = md.decide_models(
        {"model": model, "draft": draft}, speculative=True, user=NOBODY, gpu_count=8, gpu_memory_mib=H200_MIB,
        tp_size=8, trust_remote_code=False,
    )  # fmt: skip
    assert len(refused["errors"]) == 2
    first, second = refused["errors"]
    assert first.startswith('sglang_model_path="/opt/models/m" names Python code to run')
    assert "tokenization_kimi.TikTokenTokenizer" in first
    assert "sglang_trust_remote_code=false" in first
    assert "set sglang_trust_remote_code=true" in first
    assert second.startswith('sglang_draft_model_path="/opt/models/d"')
    # baseline: the drafter is not loaded, its code not judged
    base = md.decide_models(
        {"model": _report(), "draft": draft}, speculative=False, user=NOBODY, gpu_count=8,
        gpu_memory_mib=H200_MIB, tp_size=8, trust_remote_code=False,
    )  # fmt: skip
    assert base["errors"] == []
