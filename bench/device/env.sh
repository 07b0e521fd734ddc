# Sourced (never run) by every bench/device script, from the repository root: what ansible-playbook
# needs on a bare GPU host, where neither scripts/bootstrap's .collections link nor a usable
# ansible.cfg exists (the checkout's enables ansible.posix callbacks such a host does not have).
# - the collection sglang.deploy: a link to this checkout in a private collections directory, so
#   `sglang.deploy.preflight_host_probe` and the FQCN filters resolve (ANSIBLE_COLLECTIONS_PATH);
# - bench/device/ansible.cfg: no callbacks_enabled at all (ANSIBLE_CALLBACKS_ENABLED="" crashes
#   ansible-core 2.19: "A non-empty plugin name is required"), facts in memory, the inventory
#   bench/device/inventory.yml (no hosts: the playbooks run on the implicit localhost);
# - NVLink multicast off (shared GPUs; also forced by the roles);
# - the lab's small model directory copied where the unit's sandbox would see it (preflight checks the
#   model and drafter on GPU hosts: config, tokenizer, weights, size per GPU, the drafter's EAGLE-3
#   architecture), owned by root and world-readable: device_model / device_drafter.
# Defines: device_vars (extra vars every playbook run takes: preflight asks the nvidia-smi this shell
# finds), device_python (the python3 holding torch), device_gpus (nvidia-smi's GPU count),
# device_model, device_drafter, device_cleanup (run on exit).
device_work="$(mktemp -d /var/tmp/sglang-device.XXXXXX)"
mkdir -p "$device_work/collections/ansible_collections/sglang"
ln -s "$PWD" "$device_work/collections/ansible_collections/sglang/deploy"
unset ANSIBLE_CALLBACKS_ENABLED ANSIBLE_CALLBACK_WHITELIST
export LC_ALL=C.UTF-8 LANG=C.UTF-8 ANSIBLE_CONFIG="$PWD/bench/device/ansible.cfg" \
  ANSIBLE_COLLECTIONS_PATH="$device_work/collections" ANSIBLE_ROLES_PATH="$PWD/roles" \
  ANSIBLE_FORCE_COLOR=false ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=false \
  ANSIBLE_LOCAL_TEMP="$device_work/ansible-local"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
device_python="$(command -v python3)"
# and the interpreter the stack stage would build a venv with is the one holding torch here
device_vars=(-e "{\"preflight_nvidia_smi_candidates\": [\"$(command -v nvidia-smi)\"]}"
  -e "sglang_stack_python=$device_python")
# more extra vars for every run, as one JSON object (e.g. another OS: {"sglang_os_version": "22.04"})
[[ -n "${SGLANG_DEVICE_EXTRA_VARS:-}" ]] && device_vars+=(-e "$SGLANG_DEVICE_EXTRA_VARS")
device_gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
device_models="${SGLANG_DEVICE_MODELS:-/opt/sglang-device-models}"
device_model="$device_models/target"
device_drafter="$device_models/eagle3"
if [[ ! -f "$device_model/config.json" || ! -f "$device_drafter/config.json" ]]; then
  mkdir -p "$device_models"
  cp -r "$PWD/src/sglang_deploy/data/lab-model/target" "$device_model"
  cp -r "$PWD/src/sglang_deploy/data/lab-model/eagle3" "$device_drafter"
  chmod -R u=rwX,go=rX "$device_models"
fi
device_cleanup() { rm -rf "$device_work"; }
trap device_cleanup EXIT
