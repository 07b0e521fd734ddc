"""OpenPGP key fingerprints, to pin an apt repository key (cuda_toolkit role, issue 21).

:func:`fingerprints` reads an ASCII-armored or binary OpenPGP key (a ``.pub``/``.asc``/``.gpg`` file's
bytes) and returns the fingerprint of every primary public key in it (packet tag 6): for a version 4
key the SHA-1 over ``0x99``, the two-byte body length and the packet body (RFC 4880 12.2), 40 upper
hex; for a version 6 key (RFC 9580) the SHA-256 over ``0x9b``, the four-byte length and the body, 64
upper hex. Subkeys are not listed (apt's Signed-By names the primary key). Anything that is not an
OpenPGP key raises ValueError.

Pure Python: the filter ``sglang.deploy.openpgp_fingerprints`` (plugins/filter/openpgp.py) calls it on
the controller; tests/test_cuda_toolkit_supply.py tests it with keys made by gpg.
"""

from __future__ import annotations

import base64
import binascii
import hashlib


def _dearmor(text: str) -> bytes:
    lines = text.strip().splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----"))
    except StopIteration:
        raise ValueError("no '-----BEGIN PGP PUBLIC KEY BLOCK-----' line") from None
    body: list[str] = []
    in_headers = True
    for line in lines[start + 1 :]:
        if line.startswith("-----END PGP PUBLIC KEY BLOCK-----"):
            break
        if in_headers:
            if not line.strip():
                in_headers = False
            elif ":" not in line:
                in_headers = False
                body.append(line.strip())
            continue
        if line.startswith("="):  # CRC-24 checksum line
            break
        body.append(line.strip())
    try:
        return base64.b64decode("".join(body), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 in the armored key: {exc}") from None


def _packets(data: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    i = 0
    while i < len(data):
        head = data[i]
        if not head & 0x80:
            raise ValueError(f"byte {i}: not an OpenPGP packet header")
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = data[i + 1]
            if first < 192:
                length, i = first, i + 2
            elif first < 224:
                length, i = ((first - 192) << 8) + data[i + 2] + 192, i + 3
            elif first == 255:
                length, i = int.from_bytes(data[i + 2 : i + 6], "big"), i + 6
            else:
                raise ValueError("partial body lengths are not allowed in a key")
        else:  # old format
            tag = (head >> 2) & 0x0F
            kind = head & 0x03
            if kind == 3:
                raise ValueError("indeterminate packet length")
            size = (1, 2, 4)[kind]
            length, i = int.from_bytes(data[i + 1 : i + 1 + size], "big"), i + 1 + size
        if i + length > len(data):
            raise ValueError("truncated packet")
        out.append((tag, data[i : i + length]))
        i += length
    return out


def fingerprints(key: bytes | str) -> list[str]:
    """Fingerprints (upper hex) of the primary public keys of an armored or binary OpenPGP key."""
    if isinstance(key, str):
        data = _dearmor(key) if "-----BEGIN PGP" in key else key.encode("latin-1")
    elif b"-----BEGIN PGP" in key:
        data = _dearmor(key.decode("ascii", "replace"))
    else:
        data = key
    if not data:
        raise ValueError("empty key")
    found: list[str] = []
    for tag, body in _packets(data):
        if tag != 6 or not body:
            continue
        version = body[0]
        if version == 4:
            found.append(hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper())
        elif version == 6:
            found.append(hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper())
        else:
            raise ValueError(f"OpenPGP key version {version} is not supported (4 or 6)")
    if not found:
        raise ValueError("no public key packet in the key")
    return found
