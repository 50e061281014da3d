"""The HTTP API's pure helpers: splitting a request into statements (to
count and classify them before anything runs) and JSON values."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.http import json_value, split_statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("", []),
        (" ;; ", []),
        ("-- only a comment", []),
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b'; SELECT 2", ["SELECT 'a;b'", "SELECT 2"]),
        ("SELECT 'it''s;'", ["SELECT 'it''s;'"]),
        ("SELECT E'\\';'", ["SELECT E'\\';'"]),
        ('SELECT 1 AS "x;y"', ['SELECT 1 AS "x;y"']),
        ("SELECT 1 -- ; no\n; SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("/* a /* nested ; */ ; */ SELECT 1", ["SELECT 1"]),
        ("SELECT $$a;b$$; SELECT $t$;$$;$t$", ["SELECT $$a;b$$", "SELECT $t$;$$;$t$"]),
        ("SELECT $1; SELECT $2", ["SELECT $1", "SELECT $2"]),
        ("SELECT 'unterminated; x", ["SELECT 'unterminated; x"]),
    ],
)
def test_split_statements(sql: str, expected: list[str]) -> None:
    assert split_statements(sql) == expected


@pytest.mark.parametrize(
    ("value", "scalar_type", "expected"),
    [
        (None, ScalarType.TEXT, None),
        (1, ScalarType.BOOLEAN, True),
        (2**63 - 1, ScalarType.BIGINT, 2**63 - 1),
        (0.1, ScalarType.REAL, 0.1),
        (16777217.0, ScalarType.REAL, 16777216.0),
        (3.4e38, ScalarType.REAL, 3.4e38),
        (float("-inf"), ScalarType.REAL, None),
        (0.1, ScalarType.DOUBLE, 0.1),
        (float("nan"), ScalarType.DOUBLE, None),
        (Decimal("1.50"), ScalarType.NUMERIC, "1.5"),  # as pgwire: no trailing zeros
        (Decimal("1.7500000000"), ScalarType.NUMERIC, "1.75"),
        (Decimal("1E-7"), ScalarType.NUMERIC, "0.0000001"),
        (Decimal("NaN"), ScalarType.NUMERIC, "NaN"),
        (7, ScalarType.NUMERIC, "7"),
        (1e20, ScalarType.NUMERIC, "100000000000000000000"),
        (bytearray(b"\x01\x02"), ScalarType.BYTEA, "\\x0102"),
        (memoryview(b"\xab"), ScalarType.BYTEA, "\\xab"),
        (date(1, 1, 1), ScalarType.DATE, "0001-01-01"),
        (datetime(2024, 5, 6, 7, 8, 9), ScalarType.DATE, "2024-05-06"),
        (datetime(2024, 5, 6, 7, 8, 9), ScalarType.TIMESTAMP, "2024-05-06 07:08:09"),
        (datetime(2024, 5, 6, 7, 8, 9, 120), ScalarType.TIMESTAMP, "2024-05-06 07:08:09.00012"),
        (
            datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=2))),
            ScalarType.TIMESTAMPTZ,
            "2024-05-06 05:08:09+00",
        ),
        (
            datetime(2024, 5, 6, 7, 8, 9, 5, tzinfo=UTC),
            ScalarType.TIMESTAMPTZ,
            "2024-05-06 07:08:09.000005+00",
        ),
        ('[1, {"a": null}]', ScalarType.JSONB, [1, {"a": None}]),
        ({"already": "parsed"}, ScalarType.JSONB, {"already": "parsed"}),
        ("null", ScalarType.JSONB, None),
    ],
)
def test_json_value(value: object, scalar_type: ScalarType, expected: object) -> None:
    assert json_value(value, scalar_type) == expected
