"""Python implementations of the named functions in `expr/functions.py`,
with PostgreSQL's (pgcrypto's) semantics.

They raise ValueError for bad input; `local_scalar.eval_scalar` turns that
into EvalError. Arguments are never NULL here (the caller returns NULL
first). jsonb values are their canonical text (`sql.coercion.canonical_jsonb`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from typing import Any

from coordinator_lib.compute.local_builtins import BUILTINS
from coordinator_lib.compute.local_builtins_extra import EXTRA_BUILTINS
from coordinator_lib.expr.functions import NULL_TOLERANT
from coordinator_lib.sql.coercion import canonical_jsonb, parse_bytea_escape

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


def hmac_digest(data: str | bytes, key: str | bytes, kind: str) -> bytes:
    digest = _DIGESTS.get(kind.lower())
    if digest is None:
        raise ValueError(f"Cannot use {kind!r}: No such hash algorithm")
    return hmac.new(_bytes(key), _bytes(data), digest).digest()


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


def constant_time_eq(a: str | bytes, b: str | bytes) -> bool:
    """Equality whose time does not depend on where the inputs differ."""
    return hmac.compare_digest(_bytes(a), _bytes(b))


@functools.lru_cache(maxsize=1024)
def _parsed(jsonb: str) -> Any:
    return json.loads(jsonb)


def _element(jsonb: str, key: str | int) -> tuple[bool, Any]:
    value = _parsed(jsonb)
    if isinstance(key, str):
        if isinstance(value, dict) and key in value:
            return True, value[key]
        return False, None
    if isinstance(value, list) and -len(value) <= key < len(value):
        return True, value[key]
    return False, None


def jsonb_get(jsonb: str, key: str | int) -> str | None:
    """`jsonb -> key`: the field or element as jsonb, NULL if absent."""
    found, value = _element(jsonb, key)
    return canonical_jsonb(value) if found else None


def jsonb_get_text(jsonb: str, key: str | int) -> str | None:
    """`jsonb ->> key`: the field or element as text (a JSON null is NULL)."""
    found, value = _element(jsonb, key)
    if not found or value is None:
        return None
    if isinstance(value, str):
        return value
    return canonical_jsonb(value)


def _text_array(text: str) -> list[str]:
    """A text[] constant as PostgreSQL writes one: `{a,0,"b c"}`."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(f'malformed array literal: "{text}"')
    inner = inner[1:-1].strip()
    if not inner:
        return []
    out: list[str] = []
    for match in re.finditer(r'\s*("((?:[^"\\]|\\.)*)"|[^,]*?)\s*(,|$)', inner):
        if match.group(0) == "":
            break
        quoted = match.group(2)
        out.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group(1))
    return out


def _path(jsonb: str, path: str) -> tuple[bool, Any]:
    value = _parsed(jsonb)
    for key in _text_array(path):
        if isinstance(value, dict):
            if key not in value:
                return False, None
            value = value[key]
        elif isinstance(value, list):
            try:
                index = int(key)
            except ValueError:
                return False, None
            if not -len(value) <= index < len(value):
                return False, None
            value = value[index]
        else:
            return False, None
    return True, value


def jsonb_get_path(jsonb: str, path: str) -> str | None:
    """`jsonb #> path`: the value at the path as jsonb, NULL if absent."""
    found, value = _path(jsonb, path)
    return canonical_jsonb(value) if found else None


def jsonb_get_path_text(jsonb: str, path: str) -> str | None:
    """`jsonb #>> path`: the value at the path as text (a JSON null is NULL)."""
    found, value = _path(jsonb, path)
    if not found or value is None:
        return None
    return value if isinstance(value, str) else canonical_jsonb(value)


def _contains(a: Any, b: Any, top: bool = False) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and all(k in a and _contains(a[k], v) for k, v in b.items())
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(_contains(x, y) for x in a) for y in b)
        # only at the top level does an array contain a bare scalar
        return top and not isinstance(b, dict) and any(_contains(x, b) for x in a)
    if isinstance(b, dict | list):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def jsonb_contains(a: str, b: str) -> bool:
    """`a @> b`: PostgreSQL's jsonb containment."""
    return _contains(_parsed(a), _parsed(b), top=True)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    **BUILTINS,
    **EXTRA_BUILTINS,
    "hmac": hmac_digest,
    "decode": decode,
    "encode": encode,
    "constant_time_eq": constant_time_eq,
    "jsonb_get": jsonb_get,
    "jsonb_get_text": jsonb_get_text,
    "jsonb_get_path": jsonb_get_path,
    "jsonb_get_path_text": jsonb_get_path_text,
    "jsonb_contains": jsonb_contains,
}


def call_function(name: str, args: list[Any]) -> Any:
    """`name(*args)`, NULL when any argument is NULL (but see NULL_TOLERANT)."""
    if name not in NULL_TOLERANT and any(arg is None for arg in args):
        return None
    return FUNCTIONS[name](*args)


__all__ = ["FUNCTIONS", "call_function"]
