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

BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
END = "-----END PGP PUBLIC KEY BLOCK-----"


def _dearmor_block(lines: list[str]) -> bytes:
    body: list[str] = []
    in_headers = True
    for line in lines:
        if line.startswith(END):
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


def _dearmor(text: str) -> bytes:
    """The packets of every public key block of ``text``, concatenated."""
    lines = text.strip().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith(BEGIN)]
    if not starts:
        raise ValueError(f"no '{BEGIN}' line")
    return b"".join(_dearmor_block(lines[i + 1 :]) for i in starts)


def _packets(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """(tag, body, the packet's bytes as written: header and body) of every packet."""
    out: list[tuple[int, bytes, bytes]] = []
    i = 0
    while i < len(data):
        start = i
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
        out.append((tag, data[i : i + length], data[start : i + length]))
        i += length
    return out


def _binary(key: bytes | str) -> bytes:
    if isinstance(key, str):
        data = _dearmor(key) if "-----BEGIN PGP" in key else key.encode("latin-1")
    elif b"-----BEGIN PGP" in key:
        data = _dearmor(key.decode("ascii", "replace"))
    else:
        data = key
    if not data:
        raise ValueError("empty key")
    return data


def _fingerprint(body: bytes) -> str:
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise ValueError(f"OpenPGP key version {version} is not supported (4 or 6)")


def _keys(data: bytes) -> list[tuple[str, bytes]]:
    """(fingerprint, the transferable public key's packets) of each primary key, in file order."""
    keys: list[tuple[str, bytearray]] = []
    try:
        packets = _packets(data)
    except IndexError:
        raise ValueError("truncated packet header") from None
    for tag, body, raw in packets:
        if tag == 6:
            keys.append((_fingerprint(body), bytearray(raw)))
        elif not keys:
            raise ValueError(f"packet tag {tag} before the first public key packet")
        else:
            keys[-1][1].extend(raw)
    if not keys:
        raise ValueError("no public key packet in the key")
    return [(fpr, bytes(packets)) for fpr, packets in keys]


def fingerprints(key: bytes | str) -> list[str]:
    """Fingerprints (upper hex) of the primary public keys of an armored or binary OpenPGP key."""
    return [fpr for fpr, _packets in _keys(_binary(key))]


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def armor(data: bytes) -> str:
    """``data`` as an ASCII-armored public key block (RFC 4880 6.2: 64-column base64, CRC-24)."""
    text = base64.b64encode(data).decode("ascii")
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    crc = base64.b64encode(_crc24(data).to_bytes(3, "big")).decode("ascii")
    return "\n".join([BEGIN, "", *lines, "=" + crc, END]) + "\n"


def export_key(key: bytes | str, fingerprint: str) -> str:
    """The transferable public key with primary fingerprint ``fingerprint`` alone, ASCII-armored.

    Every other primary key of ``key`` (and its user IDs, signatures and subkeys) is left out. Raises
    ValueError naming the fingerprints found when none is ``fingerprint`` (compared upper-case,
    spaces ignored).
    """
    want = fingerprint.replace(" ", "").upper()
    keys = _keys(_binary(key))
    chosen = [packets for fpr, packets in keys if fpr == want]
    if not chosen:
        raise ValueError(
            f"no key {want} in the key file (fingerprints {', '.join(f for f, _packets in keys)})"
        )
    return armor(b"".join(chosen))
