#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Read-only probe of what preflight needs from the host, in one round trip.

module: sglang.deploy.preflight_host_probe (returns `probe`, and `ansible_facts` when asked; changes
nothing)
SPEC: {"smi_candidates": [paths], "root": absolute path, "python": interpreter name or path (optional),
       "smi_query": {"fields": --query-gpu fields, "ok_rcs": [exit codes meaning no usable GPU]} (optional)}
gather_subset: the host facts to return as well, collected by Ansible's own fact collectors exactly as
ansible.builtin.setup does (e.g. [min]): the facts come in the same round trip instead of a second one.
Answers: "nvidia_smi": the first candidate that is an executable file ("" when none);
"smi_query" (when the spec asks and nvidia-smi exists): {"rc", "stdout", "stderr"} of
`nvidia-smi --query-gpu=<fields> --format=csv,nounits`, an exit code outside 0 and ok_rcs failing the
probe; "smi_topo": the `nvidia-smi topo -m` matrix when the query listed two GPUs or more ("" else; a
failing topo fails the probe);
"root": {"path": the nearest existing ancestor of root (root itself when it exists), "realpath": it
with symlinks resolved, "mount": the mount point holding it, "size_available": bytes free there for
an unprivileged user (statvfs f_bavail * f_frsize, what df shows as Avail)};
"python" (when the spec names one: sglang_stack_python, the interpreter uv builds the release venv
with; interpreters are never downloaded): {"requested": the name, "path": the executable it resolves
to, a path as given or a name looked up on PATH as uv does ("" when none)};
"models" (when the spec names them: {"model": sglang_model_path, "draft": sglang_draft_model_path}): per
name the directory report of module_utils/model_dir.py inspect_dir (exists, real path, config.json's
architectures/torch_dtype/sizes, tokenizer files, weight files and bytes, index shards missing, mode
and owner of every directory on the way and of every file the server reads);
"service_user" (when the spec names it): {"name", "exists", "uid", "gids"};
"pcie" (when spec.pcie is true): {"lspci": the first executable of spec.lspci_candidates ("" when
none: pciutils missing), "devices":
the NVIDIA GPUs and PCI bridges of `lspci -vvv` (module_utils/pcie_acs.py parse_lspci), "cmdline":
/proc/cmdline, "iommu": the entries of /sys/class/iommu};
"net" (when the spec names it: a node of a multi-node replica, {"port": the dist-init port on rank 0,
else 0, "unit": the service unit}): {"ifaces": the entries of /sys/class/net, "port_listening": whether
a TCP socket listens on the port (/proc/net/tcp, tcp6), "unit_active": the unit's ActiveState when one
does}.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight_host_probe
short_description: Read-only probe of what preflight needs (nvidia-smi, free space, model directories, PCIe)
description:
  - Answers C(nvidia_smi) (the first candidate that is an executable file, empty when none), C(root)
    (the nearest existing ancestor of O(spec.root), its real path, mount point and bytes free for an
    unprivileged user) and, when asked, C(python) (C(requested), the C(path) it resolves to as uv
    resolves it, empty when none).
  - "When asked (O(spec.smi_query)) and nvidia-smi exists, C(smi_query) (C(rc), C(stdout), C(stderr) of
    C(nvidia-smi --query-gpu=<fields> --format=csv,nounits); an exit code other than 0 and
    O(spec.smi_query.ok_rcs) fails the probe) and C(smi_topo) (C(nvidia-smi topo -m) when two GPUs or
    more are listed, else empty)."
  - When asked, C(models) (per name, the report of a model directory), C(service_user), C(pcie)
    (the GPUs and bridges of C(lspci -vvv), the kernel command line, the IOMMU entries) and C(net) (a
    multi-node replica's node - its network interfaces and, on rank 0, whether a socket listens on the
    dist-init port and the unit's C(ActiveState) when one does).
options:
  spec:
    suboptions:
      smi_candidates:
        description: Where nvidia-smi is looked for (first executable wins).
        type: list
        elements: path
        required: true
      smi_query:
        description: Query the GPUs with the nvidia-smi found (and read the topology of two or more).
        type: dict
        suboptions:
          fields: {description: "The C(--query-gpu) fields, e.g. C(index,name,compute_cap).", type: str}
          ok_rcs:
            description: Exit codes that mean no usable GPU (answered, not a failure), e.g. 6, 9, 12.
            type: list
            elements: int
            default: []
      root:
        description: The absolute path whose free space is reported (sglang_root).
        type: path
        required: true
      python:
        description: An interpreter name or path to resolve (the release venv's interpreter).
        type: str
      models:
        description: The model directories to inspect; an empty path is reported as missing.
        type: dict
        suboptions:
          model: {description: The target model directory (sglang_model_path)., type: str}
          draft: {description: The drafter's directory (sglang_draft_model_path)., type: str}
      service_user:
        description: The user the server runs as (whether it exists, its uid and groups).
        type: str
      pcie:
        description: Read C(lspci -vvv), /proc/cmdline and /sys/class/iommu.
        type: bool
        default: false
      lspci_candidates:
        description: Where lspci is looked for (first executable wins; none found is reported, not a failure).
        type: list
        elements: path
      net:
        description: A multi-node replica's node (its interfaces; rank 0 - is the dist-init port taken).
        type: dict
        suboptions:
          port: {description: The dist-init port (rank 0; 0 elsewhere)., type: int, default: 0}
          unit: {description: The service unit that would hold the port., type: str}
  gather_subset:
    description:
      - Host facts to return in C(ansible_facts) as well.
      - Ansible's fact collectors gather them, as M(ansible.builtin.setup) does.
      - Empty (the default) returns no facts.
    type: list
    elements: str
    default: []
extends_documentation_fragment: [sglang.deploy.probe]
"""

EXAMPLES = r"""
- name: Probe the host and gather the min facts in the same round trip
  sglang.deploy.preflight_host_probe:
    spec:
      smi_candidates: [/usr/bin/nvidia-smi, /usr/local/bin/nvidia-smi]
      smi_query: {fields: "index,name,compute_cap,driver_version,memory.total", ok_rcs: [6, 9, 12]}
      root: /opt/sglang
      python: python3.12
      models: {model: /data/models/kimi, draft: /data/eagle3}
      service_user: sglang
      pcie: true
      lspci_candidates: [/usr/bin/lspci, /usr/sbin/lspci]
    gather_subset: [min]
  register: __probe
"""

RETURN = r"""
probe: {description: The answers the docstring lists., returned: always, type: dict}
ansible_facts:
  {description: The facts of O(gather_subset)., returned: when O(gather_subset) is set, type: dict}
"""


import os
import posixpath
import shutil
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible.module_utils.facts import ansible_collector, default_collectors  # type: ignore[import-untyped]
from ansible.module_utils.facts.namespace import PrefixFactNamespace  # type: ignore[import-untyped]
from ansible_collections.sglang.deploy.plugins.module_utils.model_dir import inspect_dir, service_user
from ansible_collections.sglang.deploy.plugins.module_utils.multinode import listening
from ansible_collections.sglang.deploy.plugins.module_utils.pcie_acs import parse_lspci, relevant

# what `min` means to ansible.builtin.setup (its minimal_gather_subset)
MINIMAL_GATHER_SUBSET = frozenset(
    ["apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local",
     "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"]
)  # fmt: skip


def nearest_existing(path: str) -> str:
    current = posixpath.normpath(path)
    while not os.path.lexists(current) and current != "/":
        current = posixpath.dirname(current)
    return current


def mount_point(path: str) -> str:
    current = path
    while not os.path.ismount(current) and current != "/":
        current = posixpath.dirname(current)
    return current


def find_python(name: str) -> str:
    """The executable `name` resolves to: a path as given, a bare name on PATH (uv's lookup)."""
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else ""
    return shutil.which(name, path=os.environ.get("PATH") or os.defpath) or ""


def read_pcie(candidates: list[str]) -> dict[str, Any]:
    """lspci -vvv's GPUs and bridges (None when lspci is missing), /proc/cmdline, /sys/class/iommu."""
    lspci = next((p for p in candidates if os.path.isfile(p) and os.access(p, os.X_OK)), "")
    devices = None
    if lspci:
        done = subprocess.run([lspci, "-vvv"], capture_output=True, text=True, timeout=60, check=False)
        devices = relevant(parse_lspci(done.stdout)) if done.returncode == 0 else None
        if devices is None:
            lspci = f"{lspci} (exited {done.returncode}: {done.stderr.strip()[:200]})"
    try:
        with open("/proc/cmdline", encoding="utf-8") as fh:
            cmdline = fh.read().strip()
    except OSError:
        cmdline = ""
    try:
        iommu = sorted(os.listdir("/sys/class/iommu"))
    except OSError:
        iommu = []
    return {"lspci": lspci, "devices": devices, "cmdline": cmdline, "iommu": iommu}


def read_net(spec: dict[str, Any]) -> dict[str, Any]:
    """A node of a multi-node replica: its network interfaces (/sys/class/net) and, when a port is given
    (rank 0's dist-init port), whether a socket listens on it and the unit's ActiveState when one does."""
    try:
        ifaces = sorted(os.listdir("/sys/class/net"))
    except OSError:
        ifaces = []
    out: dict[str, Any] = {"ifaces": ifaces, "port_listening": False, "unit_active": ""}
    port = int(spec.get("port") or 0)
    if port:
        texts = []
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(name, encoding="utf-8") as fh:
                    texts.append(fh.read())
            except OSError:
                continue
        out["port_listening"] = listening(texts, port)
    systemctl = shutil.which("systemctl") or ""
    if out["port_listening"] and spec.get("unit") and systemctl:
        done = subprocess.run(
            [systemctl, "show", "-p", "ActiveState", "--value", str(spec["unit"])],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        out["unit_active"] = done.stdout.strip()
    return out


class ProbeError(Exception):
    """A probe that cannot answer (a tool that failed): the task fails with this message."""


def query_gpus(smi: str, query: dict[str, Any]) -> dict[str, Any]:
    """`nvidia-smi --query-gpu` (and `topo -m` for two GPUs or more): their output, parsed elsewhere."""
    argv = [smi, f"--query-gpu={query['fields']}", "--format=csv,nounits"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode not in [0, *[int(rc) for rc in query.get("ok_rcs") or []]]:
        raise ProbeError(
            f"`{' '.join(argv)}` exited {done.returncode}: {(done.stderr or done.stdout).strip()[-2000:]}"
        )
    answers: dict[str, Any] = {
        "smi_query": {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr},
        "smi_topo": "",
    }
    gpus = [ln for ln in done.stdout.splitlines()[1:] if ln.strip()] if done.returncode == 0 else []
    if len(gpus) > 1:
        topo = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=120, check=False)
        if topo.returncode != 0:
            raise ProbeError(
                f"`{smi} topo -m` exited {topo.returncode}: {(topo.stderr or topo.stdout).strip()[-2000:]}"
            )
        answers["smi_topo"] = topo.stdout
    return answers


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    smi = next((p for p in spec.get("smi_candidates", []) if os.path.isfile(p) and os.access(p, os.X_OK)), "")
    root = str(spec["root"])
    if not root.startswith("/"):
        raise SystemExit(f"root must be an absolute path, got {root!r}")
    nearest = nearest_existing(root)
    real = os.path.realpath(nearest)
    fs = os.statvfs(real)
    answers: dict[str, Any] = {}
    if smi and spec.get("smi_query"):
        answers.update(query_gpus(smi, dict(spec["smi_query"])))
    if spec.get("python"):
        answers["python"] = {"requested": str(spec["python"]), "path": find_python(str(spec["python"]))}
    if spec.get("models"):
        answers["models"] = {str(k): inspect_dir(str(v or "")) for k, v in dict(spec["models"]).items()}
    if spec.get("service_user"):
        answers["service_user"] = service_user(str(spec["service_user"]))
    if spec.get("pcie"):
        answers["pcie"] = read_pcie([str(p) for p in spec.get("lspci_candidates") or []])
    if spec.get("net"):
        answers["net"] = read_net(dict(spec["net"]))
    return {
        **answers,
        "nvidia_smi": smi,
        "root": {
            "path": nearest,
            "realpath": real,
            "mount": mount_point(real),
            "size_available": fs.f_bavail * fs.f_frsize,
        },
    }


def gather(module: AnsibleModule, subset: list[str]) -> dict[str, Any]:
    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=default_collectors.collectors,
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        filter_spec=[],
        gather_subset=subset,
        gather_timeout=10,
        minimal_gather_subset=MINIMAL_GATHER_SUBSET,
    )
    facts: dict[str, Any] = collector.collect(module=module)
    return facts


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "spec": {"type": "dict", "required": True},
            "gather_subset": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    subset = module.params["gather_subset"]
    facts = gather(module, subset) if subset else {}
    try:
        answers = probe(module.params["spec"])
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, probe=answers, ansible_facts=facts)


if __name__ == "__main__":
    main()
