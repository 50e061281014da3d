"""persist/batch.py's inserts_to_table: the batch table of rows inserted
once at time 0, as updates_to_table makes it from an Update per row."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from coordinator_lib.persist import batch
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update

DESC = RelationDesc.of(
    ("body", "jsonb"),
    ("n", "bigint"),
    ("amount", "numeric"),
    ("at", "timestamp with time zone"),
    ("span", "interval"),
    ("tag", "text"),
)
IST = dt.timezone(dt.timedelta(hours=5, minutes=30))
ROWS = [
    (
        '{"a": 1}',
        1,
        Decimal("9.5"),
        dt.datetime(2026, 1, 1, 5, 30, tzinfo=IST),
        Interval(1, 2, 3),
        "x",
    ),
    (None, None, None, None, None, None),
    ("[]", -7, Decimal("-1e-10"), dt.datetime(1999, 12, 31, tzinfo=dt.UTC), Interval(0, 0, 0), ""),
]


def test_the_same_table_as_updates_at_time_0() -> None:
    for rows in (ROWS, ROWS[:1], []):
        expected = batch.updates_to_table([Update(row, 0, 1) for row in rows], DESC)
        assert batch.inserts_to_table(rows, DESC).equals(expected)


def test_a_value_that_cannot_be_stored_is_refused_the_same_way() -> None:
    too_wide = (None, None, Decimal(10) ** 30, None, None, None)
    with pytest.raises(InvalidRow) as old:
        batch.updates_to_table([Update(too_wide, 0, 1)], DESC)
    with pytest.raises(InvalidRow) as new:
        batch.inserts_to_table([too_wide], DESC)
    assert (new.value.sqlstate, str(new.value)) == (old.value.sqlstate, str(old.value))
