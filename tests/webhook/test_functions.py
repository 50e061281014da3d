"""The functions webhook checks use, in-process: hmac, decode, encode,
constant_time_eq, jsonb -> / ->>, and how the CHECK binder types them."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_lib.compute.local_scalar import EvalError, eval_scalar
from coordinator_lib.expr.functions import evaluate, jsonb, webhook
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.dialect import parse_sql
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.function_binder import FunctionBinder
from coordinator_lib.sql.scope import Scope, ScopeItem

S = ScalarType


@given(st.binary(max_size=200), st.binary(max_size=80))
def test_hmac_matches_python(data: bytes, key: bytes) -> None:
    for kind in ("md5", "sha1", "sha224", "sha256", "sha384", "sha512"):
        assert webhook.hmac_digest(data, key, kind) == hmac.new(key, data, kind).digest()


def test_hmac_of_text_is_of_its_utf8_bytes_and_unknown_types_fail() -> None:
    assert (
        webhook.hmac_digest("é", "k", "SHA256") == hmac.new(b"k", "é".encode(), "sha256").digest()
    )
    with pytest.raises(ValueError, match="No such hash algorithm"):
        webhook.hmac_digest(b"a", b"k", "sha3")


@given(st.binary(max_size=300))
def test_encode_decode_round_trip(data: bytes) -> None:
    for fmt in ("base64", "hex", "escape"):
        assert webhook.decode(webhook.encode(data, fmt), fmt) == data


def test_encode_decode_like_postgresql() -> None:
    assert webhook.encode(b"\x00ab\\\xff", "escape") == "\\000ab\\\\\\377"
    assert webhook.encode(bytes(range(60)), "base64").count("\n") == 1  # lines of 76
    assert webhook.decode("c2Vj\ncmV0", "base64") == b"secret"  # whitespace is skipped
    assert webhook.decode("DEADbeef", "hex") == bytes.fromhex("deadbeef")
    for text, fmt in [("zz", "hex"), ("@@@", "base64"), ("a", "rot13"), ("\\9", "escape")]:
        with pytest.raises(ValueError):
            webhook.decode(text, fmt)


def test_constant_time_eq_and_null() -> None:
    assert webhook.constant_time_eq("abc", "abc") and not webhook.constant_time_eq(b"abc", b"abd")
    assert webhook.constant_time_eq("é", "é".encode())
    assert evaluate("constant_time_eq", [None, "a"]) is None


def test_jsonb_get() -> None:
    doc = json.dumps({"a": {"b": [1, "two", None]}, "s": "x", "n": 1.5})
    assert jsonb.jsonb_get(doc, "a") == '{"b": [1, "two", null]}'
    assert jsonb.jsonb_get_text(doc, "s") == "x" and jsonb.jsonb_get(doc, "s") == '"x"'
    assert jsonb.jsonb_get_text(doc, "n") == "1.5"
    assert jsonb.jsonb_get(doc, "missing") is None and jsonb.jsonb_get(doc, 0) is None
    inner = jsonb.jsonb_get(doc, "a")
    assert inner is not None
    array = jsonb.jsonb_get(inner, "b")
    assert array is not None
    assert jsonb.jsonb_get_text(array, -2) == "two" and jsonb.jsonb_get_text(array, 2) is None


def _bind(sql: str, check: bool = True) -> Any:
    scope = Scope()
    names = ("headers", "body", "key")
    types = (ColumnType(S.MAP_TEXT, False), ColumnType(S.TEXT, False), ColumnType(S.BYTEA, False))
    scope.add(ScopeItem(None, names, types))
    row_types = (*types, ColumnType(S.TIMESTAMPTZ, False))
    binder = FunctionBinder(scope, "CHECK", types=row_types, now_column=3 if check else None)
    expr = parse_sql(f"SELECT {sql}")[0].expressions[0]
    return binder.bind(expr), row_types


def _eval(sql: str, row: tuple[Any, ...]) -> Any:
    value, types = _bind(sql)
    return eval_scalar(value.expr, row, types)


def test_check_binder_types_and_evaluates() -> None:
    body = '{"id": 7}'
    sig = hmac.new(b"k", body.encode(), hashlib.sha256).digest()
    headers = json.dumps({"x-sig": base64.b64encode(sig).decode(), "x-n": "3"})
    now = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    row = (headers, body, b"k", now)
    check = "constant_time_eq(decode(headers->>'x-sig', 'base64'), hmac(body, key, 'sha256'))"
    assert _eval(check, row) is True
    assert _eval("encode(hmac(body, key, 'sha256'), 'hex')", row) == sig.hex()
    assert _eval("(headers->>'x-n')::int + 1", row) == 4
    assert _eval("headers->'x-n'", row) == "3"  # a map's value is text, as in Materialize
    assert _eval("decode(headers->'x-sig', 'base64') = hmac(body, key, 'sha256')", row) is True
    assert _eval("headers ? 'x-n' AND NOT headers ? 'x-m' AND map_length(headers) = 2", row)
    assert _eval("headers->>'nope' IS NULL", row) is True
    assert _eval("now() = '2024-05-01T00:00:00Z'", row) is True
    assert _eval("current_timestamp > '2024-01-01'", row) is True
    assert _bind("hmac(body, key, 'sha256')")[0].type == ColumnType(S.BYTEA, False)
    with pytest.raises(EvalError):
        _eval("decode(headers->>'x-n', 'base64')", row)


def test_check_binder_refuses_what_has_no_overload() -> None:
    for sql in (
        "hmac(1, key, 'sha256')",
        "decode(key, 'hex')",
        "encode(body, 'hex')",
        "constant_time_eq(headers, body)",
        "body->>'a'",
        "hmac(body, key)",
    ):
        with pytest.raises(SqlError):
            _bind(sql)
    with pytest.raises(SqlError, match="only supported in webhook CHECK"):
        _bind("now()", check=False)
