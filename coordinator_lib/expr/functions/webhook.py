"""The functions of webhook validation (Materialize's): hmac, decode,
encode, constant_time_eq, with PostgreSQL's (pgcrypto's) semantics. They
run in-process only: only the binder of webhook CHECK expressions offers
them (`sql/function_binder.py`), and those never reach Spark.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

from coordinator_lib.expr.functions.registry import scalar_function, sig
from coordinator_lib.repr.bytea import parse_bytea_escape
from coordinator_lib.repr.relation import ScalarType

S = ScalarType

# pgcrypto's hmac() types.
_DIGESTS = {
    "md5": hashlib.md5,
    "sha1": hashlib.sha1,
    "sha224": hashlib.sha224,
    "sha256": hashlib.sha256,
    "sha384": hashlib.sha384,
    "sha512": hashlib.sha512,
}
_BASE64_LINE = 76  # PostgreSQL's encode(..., 'base64') wraps lines at 76 characters
_WHITESPACE = re.compile(r"[ \t\r\n]")


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


@scalar_function(
    "hmac",
    sig(S.TEXT, S.TEXT, S.TEXT, result=S.BYTEA),
    sig(S.BYTEA, S.BYTEA, S.TEXT, result=S.BYTEA),
    local_only=True,
)
def hmac_digest(data: str | bytes, key: str | bytes, kind: str) -> bytes:
    digest = _DIGESTS.get(kind.lower())
    if digest is None:
        raise ValueError(f"Cannot use {kind!r}: No such hash algorithm")
    return hmac.new(_bytes(key), _bytes(data), digest).digest()


@scalar_function("decode", sig(S.TEXT, S.TEXT, result=S.BYTEA), local_only=True)
def decode(text: str, format: str) -> bytes:
    fmt = format.lower()
    if fmt == "base64":
        try:
            return base64.b64decode(_WHITESPACE.sub("", text), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("invalid base64 data") from None
    if fmt == "hex":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise ValueError("invalid hexadecimal data") from None
    if fmt == "escape":
        return parse_bytea_escape(text)
    raise ValueError(f"unrecognized encoding: {format!r}")


@scalar_function("encode", sig(S.BYTEA, S.TEXT, result=S.TEXT), local_only=True)
def encode(data: bytes, format: str) -> str:
    fmt = format.lower()
    if fmt == "base64":
        text = base64.b64encode(data).decode("ascii")
        return "\n".join(text[i : i + _BASE64_LINE] for i in range(0, len(text), _BASE64_LINE))
    if fmt == "hex":
        return data.hex()
    if fmt == "escape":
        out = []
        for byte in data:
            if byte == 0x5C:
                out.append("\\\\")
            elif byte == 0 or byte >= 0x80:
                out.append(f"\\{byte:03o}")
            else:
                out.append(chr(byte))
        return "".join(out)
    raise ValueError(f"unrecognized encoding: {format!r}")


@scalar_function(
    "constant_time_eq",
    sig(S.TEXT, S.TEXT, result=S.BOOLEAN),
    sig(S.BYTEA, S.BYTEA, result=S.BOOLEAN),
    local_only=True,
)
def constant_time_eq(a: str | bytes, b: str | bytes) -> bool:
    """Equality whose time does not depend on where the inputs differ."""
    return hmac.compare_digest(_bytes(a), _bytes(b))
