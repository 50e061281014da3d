"""A timestamptz keeps its instant whatever offset it arrives with.

Importing pandera sets PYARROW_IGNORE_TIMEZONE=1 for the whole process, which
makes pyarrow store a datetime's wall clock and drop its offset. The webhook
and INSERT paths import pandera, so a row sent as 05:30+05:30 must still be
stored as 00:00 UTC.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandera.pandas  # noqa: F401  (the import is the point: it sets the switch)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_lib.persist import batch
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update

DESC = RelationDesc.of(("tz", "timestamp with time zone"))


@pytest.fixture(autouse=True)
def _ignore_timezone_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYARROW_IGNORE_TIMEZONE", "1")


@settings(max_examples=50, deadline=None)
@given(
    instant=st.datetimes(
        min_value=dt.datetime(1900, 1, 2),
        max_value=dt.datetime(9999, 12, 30),
        timezones=st.just(dt.UTC),
    ),
    offset_minutes=st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_offset_is_converted_not_dropped(instant: dt.datetime, offset_minutes: int) -> None:
    sent = instant.astimezone(dt.timezone(dt.timedelta(minutes=offset_minutes)))
    table = batch.updates_to_table([Update((sent,), 1, 1)], DESC)
    assert batch.table_to_updates(table, DESC) == [Update((instant,), 1, 1)]


def test_round_trip_through_parquet(tmp_path: Path) -> None:
    sent = dt.datetime(2000, 1, 1, 5, 30, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    batch.write_batch_table(batch.updates_to_table([Update((sent,), 1, 1)], DESC), tmp_path / "b")
    table = batch.read_batch_table(sorted((tmp_path / "b").glob("*.parquet")), DESC)
    [update] = batch.table_to_updates(table, DESC)
    assert update.row[0] == dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
