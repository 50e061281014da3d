"""Value formats on the wire: the expected strings were printed by a real
PostgreSQL 15 (`SELECT 1e15::float8, ...` and `numeric_send(...)`)."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.pg_types import (
    PG_TYPES,
    UnsupportedFormat,
    decode_param,
    encode_binary,
    encode_text,
    format_float,
)
from coordinator_lib.server.pgwire import ProtocolViolation, copy_csv_line, copy_text_line
from coordinator_lib.server.pgwire import parse_options as parse_startup_options
from tests.server.fake_client import TYPED_COLUMNS, TYPED_ROW

T = ScalarType


@pytest.mark.parametrize(
    ("value", "single", "text"),
    [
        (1e15, False, "1e+15"),
        (1e14, False, "100000000000000"),
        (123456789012345678.0, False, "1.2345678901234568e+17"),
        (0.0001, False, "0.0001"),
        (0.00001, False, "1e-05"),
        (-0.0, False, "-0"),
        (0.0, False, "0"),
        (float("inf"), False, "Infinity"),
        (float("-inf"), False, "-Infinity"),
        (float("nan"), False, "NaN"),
        (1.5e300, False, "1.5e+300"),
        (0.1 + 0.2, False, "0.30000000000000004"),
        (-2.5, False, "-2.5"),
        (1e6, True, "1e+06"),
        (100000.0, True, "100000"),
        (1.1, True, "1.1"),
        (3.4e38, True, "3.4e+38"),
        (1e-45, True, "1e-45"),
        (float("nan"), True, "NaN"),
        # ties (a shorter decimal exactly between two floats) and powers of two
        (50816768.0, True, "5.0816768e+07"),
        (3.092535278770144e18, False, "3.0925352787701443e+18"),
        (2.0**-96, True, "1.2621775e-29"),
        (7.120236347223045e-307, False, "7.120236347223045e-307"),
    ],
)
def test_float_text_matches_postgres(value: float, single: bool, text: str) -> None:
    assert format_float(value, single) == text


@given(st.floats(allow_nan=False))
def test_float8_text_round_trips(value: float) -> None:
    assert float(format_float(value)) == value


@given(st.floats(width=32, allow_nan=False))
def test_float4_text_round_trips(value: float) -> None:
    parsed = float(format_float(value, single=True))
    assert struct.unpack(">f", struct.pack(">f", parsed))[0] == value


@pytest.mark.parametrize(
    ("value", "scalar_type", "text"),
    [
        (True, T.BOOLEAN, "t"),
        (False, T.BOOLEAN, "f"),
        (-7, T.SMALLINT, "-7"),
        (2**40, T.BIGINT, "1099511627776"),
        (decimal.Decimal("-0.00"), T.NUMERIC, "0"),
        (decimal.Decimal("1E+20"), T.NUMERIC, "100000000000000000000"),
        # numeric prints as Materialize does: no trailing zeros (stored values
        # have scale 10, so avg(1, 2, 2, 2) is 1.75, not 1.7500000000)
        (decimal.Decimal("1.50"), T.NUMERIC, "1.5"),
        (decimal.Decimal("1.7500000000"), T.NUMERIC, "1.75"),
        (decimal.Decimal("300.0000000000"), T.NUMERIC, "300"),
        (decimal.Decimal("NaN"), T.NUMERIC, "NaN"),
        (b"\x00\xff", T.BYTEA, "\\x00ff"),
        (dt.date(99, 1, 1), T.DATE, "0099-01-01"),
        (dt.datetime(2020, 1, 1, 0, 0, 0, 500000), T.TIMESTAMP, "2020-01-01 00:00:00.5"),
        (dt.datetime(2020, 1, 1, 1, 2, 3), T.TIMESTAMP, "2020-01-01 01:02:03"),
        (
            dt.datetime(2020, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC),
            T.TIMESTAMPTZ,
            "2020-01-01 00:00:00.5+00",
        ),
        (
            dt.datetime(2020, 1, 1, 2, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            T.TIMESTAMPTZ,
            "2020-01-01 00:00:00+00",
        ),
        ('{"a": null, "b": [1, 2]}', T.JSONB, '{"a": null, "b": [1, 2]}'),
        ({"a": [1, 2]}, T.JSONB, '{"a": [1, 2]}'),
        (None, T.TEXT, None),
    ],
)
def test_text_encoding(value: object, scalar_type: ScalarType, text: str | None) -> None:
    assert encode_text(value, scalar_type) == text


@pytest.mark.parametrize(
    ("value", "hex_"),
    [
        ("0", "0000000000000000"),
        ("1.50", "000200000000000100011388"),  # dscale 1: printed 1.5
        ("-12345.6789", "0003000140000004000109291a85"),
        ("0.0001", "0001ffff000000040001"),
        ("1E+20", "00010005000000000001"),
        ("123456789.000001", "0005000200000006000109291a8500000064"),
        ("NaN", "00000000c0000000"),
        ("0.00", "0000000000000000"),  # no trailing zeros: dscale 0
        ("-0.000000001", "0001fffd4000000903e8"),
    ],
)
def test_numeric_binary_matches_postgres(value: str, hex_: str) -> None:
    data = encode_binary(decimal.Decimal(value), T.NUMERIC)
    assert data is not None and data.hex() == hex_
    assert decode_param(data, 1, 1700) == encode_text(decimal.Decimal(value), T.NUMERIC)


@given(st.integers(-(10**40), 10**40), st.integers(-30, 10))
def test_numeric_binary_round_trips(coefficient: int, exponent: int) -> None:
    value = decimal.Decimal(coefficient).scaleb(exponent)
    data = encode_binary(value, T.NUMERIC)
    assert data is not None
    assert decode_param(data, 1, 1700) == encode_text(value, T.NUMERIC)


def test_binary_params_decode_to_the_text_form() -> None:
    """Every type's binary value reads back as its text value."""
    for column, value in zip(TYPED_COLUMNS, TYPED_ROW, strict=True):
        oid = PG_TYPES[column.scalar_type].oid
        data = encode_binary(value, column.scalar_type)
        assert decode_param(data, 1, oid) == encode_text(value, column.scalar_type), column


def test_binary_encodings() -> None:
    assert encode_binary(dt.date(2000, 1, 2), T.DATE) == struct.pack(">i", 1)
    assert encode_binary(dt.datetime(2000, 1, 1, 0, 0, 1), T.TIMESTAMP) == struct.pack(
        ">q", 1_000_000
    )
    aware = dt.datetime(2000, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert encode_binary(aware, T.TIMESTAMPTZ) == struct.pack(">q", 0)
    assert encode_binary('{"a": 1}', T.JSONB) == b'\x01{"a": 1}'
    assert encode_binary(None, T.INTEGER) is None


def test_decode_param_text_and_errors() -> None:
    assert decode_param(b"hello", 0, 0) == "hello"
    assert decode_param(None, 1, 23) is None
    assert decode_param(struct.pack(">q", 2**62), 1, 20) == str(2**62)
    assert decode_param(b"\x01", 1, 16) == "t"
    assert decode_param(struct.pack(">f", 1.5), 1, 700) == "1.5"
    assert decode_param(b"varchar", 1, 1043) == "varchar"
    assert decode_param(struct.pack(">q", 2**63 - 1), 1, 1114) == "infinity"
    with pytest.raises(UnsupportedFormat):
        decode_param(b"\x00" * 16, 1, 2950)  # uuid
    with pytest.raises(UnsupportedFormat):
        decode_param(b"1", 2, 23)
    with pytest.raises(ValueError, match="expected 4 bytes"):
        decode_param(b"\x00\x01", 1, 23)
    with pytest.raises(ValueError, match="UTF8"):
        decode_param(b"\xff", 0, 25)
    with pytest.raises(ValueError, match="0x00"):
        decode_param(b"a\x00b", 0, 25)


def test_copy_text_and_csv_lines() -> None:
    fields = ["a\tb", None, "back\\slash\nx", ""]
    assert copy_text_line(fields) == "a\\tb\t\\N\tback\\\\slash\\nx\t\n"
    assert copy_csv_line(["a,b", None, 'q"', "", "plain"]) == '"a,b",,"q""","",plain\n'


def test_startup_options() -> None:
    assert parse_startup_options("-c search_path=a\\ b --cluster-name=x -cfoo=1") == {
        "search_path": "a b",
        "cluster_name": "x",
        "foo": "1",
    }
    assert parse_startup_options("") == {}
    with pytest.raises(Exception, match="invalid command-line argument"):
        parse_startup_options("bogus")


def test_protocol_violation_is_fatal() -> None:
    error = ProtocolViolation("x")
    assert (error.code, error.severity) == ("08P01", "FATAL")


def test_pg_type_rows_carry_the_oids_pgwire_sends() -> None:
    """pg_catalog.pg_type (adapter/pg_catalog.py) and RowDescription agree."""
    from coordinator_lib.adapter.pg_catalog import PG_TYPE_ROWS, type_oid
    from coordinator_lib.server.pg_types import PG_TYPES, SENT_AS_TEXT

    by_scalar = {row.scalar_type: row for row in PG_TYPE_ROWS if row.scalar_type is not None}
    assert set(by_scalar) == set(PG_TYPES) - SENT_AS_TEXT
    for scalar, pg in PG_TYPES.items():
        if scalar in SENT_AS_TEXT:
            continue
        row = by_scalar[scalar]
        assert (row.oid, row.typname, row.typlen) == (pg.oid, pg.name, pg.size)
        assert type_oid(scalar.value) == pg.oid  # our SQL type names resolve


def test_array_text_and_binary() -> None:
    """array_agg's arrays: PostgreSQL's text output (elements quoted when
    empty, holding `{},"\\` or whitespace, or spelling NULL) and array_send."""
    assert encode_text((1, 2, None), T.INTEGER_ARRAY) == "{1,2,NULL}"
    assert encode_text((), T.INTEGER_ARRAY) == "{}"
    assert encode_text((True, False), T.BOOLEAN_ARRAY) == "{t,f}"
    texts = ("a", "", "b c", 'q"x', "back\\slash", "null", "NuLL", "{x}", "a,b", "tab\t", None)
    assert encode_text(texts, T.TEXT_ARRAY) == (
        '{a,"","b c","q\\"x","back\\\\slash","null","NuLL","{x}","a,b","tab\t",NULL}'
    )
    assert encode_text((dt.datetime(2000, 1, 1, 12),), T.TIMESTAMP_ARRAY) == (
        '{"2000-01-01 12:00:00"}'
    )
    assert encode_text((decimal.Decimal("1.50"),), T.NUMERIC_ARRAY) == "{1.5}"
    assert encode_binary((1, None), T.INTEGER_ARRAY) == (
        struct.pack(">iiiii", 1, 1, 23, 2, 1) + struct.pack(">ii", 4, 1) + struct.pack(">i", -1)
    )
    assert encode_binary((), T.TEXT_ARRAY) == struct.pack(">iii", 0, 0, 25)
    assert encode_binary(("ab",), T.TEXT_ARRAY) == (
        struct.pack(">iiiii", 1, 0, 25, 1, 1) + struct.pack(">i", 2) + b"ab"
    )
    assert PG_TYPES[T.INTEGER_ARRAY].oid == 1007
    assert PG_TYPES[T.JSONB_ARRAY].oid == 3807
