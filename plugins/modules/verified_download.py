#!/usr/bin/python
# Copyright: sglang-deploy contributors
"""Download a file whose sha256 must be one of several accepted values, atomically.

module: sglang.deploy.verified_download
ansible.builtin.get_url takes one checksum; a release asset that its publisher re-uploaded has several
published sha256 (SGLang's cu130 sgl-kernel wheel: five, one per re-upload). This module streams the
URL into a temporary file beside the destination, hashes it on the way, and renames it into place only
when its sha256 is one of the accepted values; otherwise it removes the temporary file and fails
naming the file, the sha256 it got and the accepted list. An existing destination whose sha256 is
accepted is kept (no request); one whose sha256 is not is replaced.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: verified_download
short_description: Download a file whose sha256 must be one of several accepted values
description:
  - Streams O(url) into a temporary file in the directory of O(dest), computing its sha256 on the way.
  - Renames it to O(dest) only when the sha256 is one of O(sha256); otherwise removes it and fails
    naming the file, the sha256 it got and the accepted list.
  - An existing O(dest) whose sha256 is accepted is kept without a request (changed=false).
  - M(ansible.builtin.get_url) takes a single checksum; a re-uploaded release asset has several.
  - In check mode nothing is downloaded; the result says whether a real run would download.
options:
  url:
    description: The C(https://) (or C(http://), C(file://)) URL of the file.
    type: str
    required: true
  dest:
    description: The absolute path the verified file is stored at; its directory must exist.
    type: path
    required: true
  sha256:
    description: The accepted sha256 values (64 lowercase hex each); at least one.
    type: list
    elements: str
    required: true
  mode:
    description: The file mode of O(dest).
    type: str
    default: "0644"
  timeout:
    description: Seconds to wait for the server to answer (each read).
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: Reports whether the file would be downloaded or its mode changed; writes nothing.
author: sglang-deploy contributors (@sglang-deploy)
"""

EXAMPLES = r"""
- name: Fetch the cu130 sgl-kernel wheel, accepting every sha256 its publisher's index lists
  sglang.deploy.verified_download:
    url: https://github.com/sgl-project/whl/releases/download/v0.3.21/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl
    dest: /opt/sglang/cache/wheels/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl
    sha256:
      - c9a389f5eca00675c6e842faafb4c66f01edf49c8a4f58185978fa294f461822
      - 4be1313f82808f0fb6df8107e79f6b6cea07a4aa2b20139e0342eafe31eb28bd
"""

RETURN = r"""
sha256:
  description: The sha256 of O(dest) (empty in check mode when it would be downloaded).
  returned: always
  type: str
size:
  description: Bytes of O(dest) (0 in check mode when it would be downloaded).
  returned: always
  type: int
downloaded: {description: Whether this run fetched the URL., returned: always, type: bool}
"""


import hashlib
import os
import re
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]
from ansible.module_utils.urls import fetch_url  # type: ignore[import-untyped]

SHA256 = re.compile(r"[0-9a-f]{64}")
CHUNK = 1 << 20


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def mismatch_message(name: str, got: str, accepted: list[str]) -> str:
    return (
        f"{name}: sha256 {got} is none of the {len(accepted)} accepted value(s): {', '.join(accepted)}. "
        "The publisher may have re-uploaded the file: check the new value against the publisher's own "
        "index before adding it (sglang_stack_sgl_kernel_sha256_extra for the sgl-kernel wheel)."
    )


def download(module: AnsibleModule, url: str, directory: str, timeout: int) -> tuple[str, str, int]:
    """Stream url into a temporary file in directory: (its path, its sha256, its size)."""
    response, info = fetch_url(module, url, timeout=timeout)
    if response is None or info.get("status", 0) not in (200, -1):
        module.fail_json(msg=f"GET {url} failed: {info.get('status')} {info.get('msg', '')}".strip())
    digest = hashlib.sha256()
    size = 0
    fd, part = tempfile.mkstemp(prefix=".verified-download-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in iter(lambda: response.read(CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        os.unlink(part)
        raise
    return part, digest.hexdigest(), size


def run(module: AnsibleModule) -> dict[str, Any]:
    url: str = module.params["url"]
    dest: str = module.params["dest"]
    accepted: list[str] = module.params["sha256"]
    bad = [h for h in accepted if not SHA256.fullmatch(h)]
    if not accepted or bad:
        module.fail_json(msg=f"sha256={accepted!r}: allowed a non-empty list of 64 lowercase hex")
    if not os.path.isabs(dest):
        module.fail_json(msg=f"dest={dest!r}: allowed an absolute path")
    name = os.path.basename(dest)
    mode = int(module.params["mode"], 8)
    if os.path.isfile(dest) and not os.path.islink(dest):
        have = file_sha256(dest)
        if have in accepted:
            changed = (os.stat(dest).st_mode & 0o7777) != mode
            if changed and not module.check_mode:
                os.chmod(dest, mode)
            return {"changed": changed, "sha256": have, "size": os.path.getsize(dest), "downloaded": False}
    if module.check_mode:
        return {"changed": True, "sha256": "", "size": 0, "downloaded": False}
    part, got, size = download(module, url, os.path.dirname(dest), module.params["timeout"])
    if got not in accepted:
        os.unlink(part)
        module.fail_json(msg=mismatch_message(name, got, accepted), sha256=got, size=size, url=url)
    os.chmod(part, mode)
    os.rename(part, dest)
    return {"changed": True, "sha256": got, "size": size, "downloaded": True}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "dest": {"type": "path", "required": True},
            "sha256": {"type": "list", "elements": "str", "required": True},
            "mode": {"type": "str", "default": "0644"},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
