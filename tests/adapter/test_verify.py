"""verify_datum_desc: the pandera schema derived from a RelationDesc."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.verify import pandera_schema, verify_datum_desc
from coordinator_lib.repr.relation import RelationDesc

DESC = RelationDesc.of(
    ("id", "bigint", False),
    ("name", "text"),
    ("amount", "numeric"),
    ("at", "timestamp with time zone"),
    ("day", "date"),
    ("small", "smallint"),
)


def test_good_rows_pass() -> None:
    verify_datum_desc(
        DESC,
        [
            (
                1,
                "a",
                decimal.Decimal("1.5"),
                dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
                dt.date(2024, 1, 1),
                7,
            ),
            (2, None, None, None, None, None),
        ],
    )


@pytest.mark.parametrize(
    ("row", "code", "column"),
    [
        ((None, "a", None, None, None, None), "23502", "id"),
        ((1, 5, None, None, None, None), "XX000", "name"),
        ((1, "a", 1.5, None, None, None), "XX000", "amount"),
        ((1, "a", None, dt.datetime(2024, 1, 1), None, None), "XX000", "at"),
        ((1, "a", None, None, dt.datetime(2024, 1, 1), None), "XX000", "day"),
        ((1, "a", None, None, None, 40_000), "XX000", "small"),
        ((True, "a", None, None, None, None), "XX000", "id"),
    ],
)
def test_bad_rows_name_the_column(row: tuple, code: str, column: str) -> None:
    with pytest.raises(AdapterError) as error:
        verify_datum_desc(DESC, [(1, "ok", None, None, None, None), row])
    assert error.value.code == code
    assert f'"{column}"' in error.value.message


def test_wrong_arity_is_refused() -> None:
    with pytest.raises(AdapterError, match="has 2 columns, expected 6"):
        verify_datum_desc(DESC, [(1, "a")])


def test_schema_has_one_column_per_desc_column() -> None:
    schema = pandera_schema(DESC)
    assert list(schema.columns) == list(DESC.names)
    assert schema.columns["id"].nullable is False
    assert schema.columns["name"].nullable is True
