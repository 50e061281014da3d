"""Temporal filters through the coordinator: a materialized view whose rows
expire changes when their time comes, with no write to its input (the
maintenance loop advances idle tables and steps the view past the pending
time); mz_now() in a one-off query is the query's timestamp."""

from __future__ import annotations

import time

import pytest

from coordinator_lib.adapter.client import Handle, SessionClient
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.oracle import wall_clock_ms
from tests.adapter.conftest import Run, run_on


def test_a_row_leaves_the_view_when_its_validity_ends(local_handle: Handle, local_sql: Run) -> None:
    sql = local_sql
    sql(
        "CREATE TABLE offers (id int, valid_from bigint, valid_until bigint)"
        " WITH (RETAIN HISTORY FOR '1h')"
    )
    sql(
        "CREATE MATERIALIZED VIEW live WITH (RETAIN HISTORY FOR '1h') AS SELECT id FROM offers"
        " WHERE mz_now() >= valid_from AND mz_now() < valid_until"
    )
    # A first write (row 2, valid for 10 minutes) warms the write path up.
    sql(f"INSERT INTO offers VALUES (2, 0, {wall_clock_ms() + 600_000})")
    until = wall_clock_ms() + 3000
    sql(f"INSERT INTO offers VALUES (1, 0, {until})")
    coordinator = local_handle.coordinator
    table = coordinator.storage.shard(coordinator.catalog.index.resolve(("offers",)).id)
    written = table.updates_between(0, table.upper())
    (inserted_at,) = {u.time for u in written if u.row[0] == 1}
    # (the read's time decides what it sees: a loaded machine may be late)
    rows = sql("SELECT id, mz_now() FROM live ORDER BY id")
    read_at = rows[0][1]
    assert [r[0] for r in rows] == ([1, 2] if read_at < until else [2])
    assert all(r[1] == read_at for r in rows)

    # Reads follow the oracle, which idle tables' advances move (every 200 ms
    # here): read until one reads at valid_until or later.
    deadline = time.monotonic() + 60
    while True:
        rows = sql("SELECT id, mz_now() FROM live ORDER BY id")
        if rows[-1][1] >= until or time.monotonic() > deadline:
            break
        assert [r[0] for r in rows] == [1, 2]
        time.sleep(0.1)
    assert [r[0] for r in rows] == [2]
    assert rows[0][1] >= until

    # Nothing was written to the table since: time alone retracted row 1,
    # exactly at valid_until (if it was written before then).
    assert table.updates_between(0, table.upper()) == written
    view = coordinator.storage.shard(coordinator.catalog.index.resolve(("live",)).id)
    changes = sorted((u.row, u.time, u.diff) for u in view.updates_between(0, view.upper()))
    row_1 = [c for c in changes if c[0] == (1,)]
    assert row_1 == ([((1,), inserted_at, 1), ((1,), until, -1)] if inserted_at < until else [])
    assert inserted_at < until, "the machine took over 3 s to write one row"


def test_mz_now_in_queries_and_misuse(local_session: SessionClient, local_sql: Run) -> None:
    sql = local_sql
    sql("CREATE TABLE ev (id int, ts timestamp)")
    sql("INSERT INTO ev VALUES (1, now()::timestamp - INTERVAL '1 hour'), (2, now()::timestamp)")
    before = wall_clock_ms()
    ((now,),) = sql("SELECT mz_now()")
    assert abs(now - before) < 60_000
    # in a query mz_now() is the read's time, compared with timestamps as such
    rows = sql("SELECT id FROM ev WHERE mz_now() <= ts + INTERVAL '5 minutes' ORDER BY id")
    assert rows == [(2,)]
    with pytest.raises(AdapterError) as refused:
        sql("CREATE MATERIALIZED VIEW v AS SELECT id, mz_now() FROM ev")
    assert refused.value.code == "0A000"
    assert "cannot materialize call to mz_now" in refused.value.message
    assert refused.value.position == len("CREATE MATERIALIZED VIEW v AS SELECT id, ") + 1
    with pytest.raises(AdapterError) as refused:
        sql("INSERT INTO ev SELECT id + 10, ts FROM ev WHERE mz_now() > 0")
    assert refused.value.code == "0A000"


def test_subscribe_to_a_temporal_query_sees_the_retraction(local_handle: Handle) -> None:
    """SUBSCRIBE (query with a temporal filter) streams the row's insertion
    and, with no write, its retraction at valid_until (rows: mz_timestamp,
    mz_diff, columns)."""
    writer = run_on(local_handle.client.startup("materialize"))
    writer("CREATE TABLE offers (id int, valid_until bigint)")
    writer(f"INSERT INTO offers VALUES (2, {wall_clock_ms() + 600_000})")
    until = wall_clock_ms() + 2000
    writer(f"INSERT INTO offers VALUES (1, {until})")
    reader = run_on(local_handle.client.startup("materialize"))
    reader("BEGIN")
    reader("DECLARE c CURSOR FOR SUBSCRIBE (SELECT id FROM offers WHERE mz_now() < valid_until)")
    seen: list[tuple] = []
    deadline = time.monotonic() + 60
    while not any(row[1] < 0 for row in seen) and time.monotonic() < deadline:
        seen += reader("FETCH ALL c WITH (TIMEOUT = '0.5s')")
    inserted = sorted(row[2] for row in seen if row[1] > 0)
    assert inserted in ([1, 2], [2])  # (a late snapshot no longer has row 1)
    retracted = [(int(row[0]), row[2]) for row in seen if row[1] < 0]
    assert retracted == ([(until, 1)] if inserted == [1, 2] else [])
    reader("COMMIT")
