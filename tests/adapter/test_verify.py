"""verify_datum_desc: the pandera schema derived from a RelationDesc."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.verify import _all_fit, _fits, pandera_schema, verify_datum_desc
from coordinator_lib.repr.relation import RelationDesc

DESC = RelationDesc.of(
    ("id", "bigint", False),
    ("name", "text"),
    ("amount", "numeric"),
    ("at", "timestamp with time zone"),
    ("day", "date"),
    ("small", "smallint"),
)


_TYPES = [
    "boolean",
    "smallint",
    "integer",
    "bigint",
    "real",
    "double precision",
    "numeric",
    "text",
    "bytea",
    "date",
    "timestamp",
    "timestamp with time zone",
    "jsonb",
]


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


# Values of every kind a column may be handed, right or wrong for it; a
# batch mostly of one kind (with NULLs), as columns are, or mixed.
_KINDS = [
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([None, dt.UTC])),
    st.tuples(st.integers(-3, 3), st.none()),
]
_BATCHES = st.one_of(
    *(st.lists(st.one_of(st.none(), kind), min_size=1, max_size=6) for kind in _KINDS),
    st.lists(st.one_of(st.none(), *_KINDS), min_size=1, max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    column=st.sampled_from(
        [(name, type_) for name in ("c",) for type_ in _TYPES] + [("c", "int[]")]
    ),
    nullable=st.booleans(),
    values=_BATCHES,
)
@example(column=("c", "smallint"), nullable=True, values=[None, 1, 32768])
@example(column=("c", "timestamp"), nullable=False, values=[dt.datetime(2024, 1, 1, tzinfo=dt.UTC)])
@example(column=("c", "timestamp with time zone"), nullable=True, values=[dt.datetime(2024, 1, 1)])
def test_a_column_fits_as_each_of_its_values_does(
    column: tuple[str, str], nullable: bool, values: list
) -> None:
    """The column-at-a-time check (types and integer ranges in C) accepts a
    batch exactly when every value passes the per-value rule."""
    desc = RelationDesc.of((*column, nullable))
    scalar_type = desc.types[0].scalar_type
    each = all(
        (v is None and nullable) or (v is not None and _fits(scalar_type, v)) for v in values
    )
    assert _all_fit(desc, [(v,) for v in values]) == each
