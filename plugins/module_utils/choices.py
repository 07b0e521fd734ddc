"""The lists of allowed names, defined once.

Pure Python (no Ansible import). Python reads them from here (the launch spec, the nccl_env filters);
the ``choices:`` of the roles' ``meta/argument_specs.yml`` are generated from :data:`ARGSPEC_CHOICES`
by ``scripts/gen-docs`` (``scripts/gen-docs --check`` and tests/test_docs.py fail when they differ).
"""

from __future__ import annotations

# SGLang 0.5.9 server_args.py --attention-backend choices.
ATTENTION_BACKENDS: tuple[str, ...] = (
    "flashinfer",
    "triton",
    "torch_native",
    "fa3",
    "fa4",
    "flashmla",
    "cutlass_mla",
    "trtllm_mla",
    "trtllm_mha",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
)
# The speculative presets the launch spec knows (group_vars/all/sglang.yml sglang_presets).
PRESETS: tuple[str, ...] = ("production", "baseline", "tree")
# The NCCL profiles (roles/nccl_env): auto picks pcie/nvlink/none by the interconnect class; tuned is
# this host's autotune record.
NCCL_PROFILES: tuple[str, ...] = ("auto", "pcie", "nvlink", "none", "tuned")
# GPU interconnect classes (preflight's nvidia-smi topology, nccl_env_interconnect).
INTERCONNECTS: tuple[str, ...] = ("nvlink", "pcie", "none")

# The argument-spec options whose choices are these lists: (role, option) -> names. For a list option the
# choices apply to each element. "" = not set (the role then detects the class).
ARGSPEC_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("preflight", "sglang_preset"): PRESETS,
    ("preflight", "sglang_presets_allowed"): PRESETS,
    ("preflight", "sglang_attention_backend"): ATTENTION_BACKENDS,
    ("preflight", "sglang_nccl_profile"): NCCL_PROFILES,
    ("preflight", "sglang_nccl_profiles_allowed"): NCCL_PROFILES,
    ("nccl_env", "nccl_env_interconnect"): ("", *INTERCONNECTS),
    ("autotune", "autotune_preset_presets"): PRESETS,
}
