"""verify_datum_desc is on every path rows take out of the coordinator or
into a table: a badly typed row injected below it (a storage snapshot, a
one-shot dataflow, a SUBSCRIBE's batches) is refused with a clear error
naming the column, and nothing of the statement is written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordinator_lib.adapter.client import Handle, SessionClient
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.compute.controller import SubscribeBatch
from coordinator_lib.repr.update import Update
from tests.adapter.conftest import Run


def error_of(session: SessionClient, sql: str) -> AdapterError:
    with pytest.raises(AdapterError) as caught:
        for response in session.execute(sql):
            if response.rows is not None:
                list(response.rows)
    return caught.value


def _bad_rows(*_: Any, **__: Any) -> list[tuple[tuple[Any, ...], int]]:
    return [(("not a number", "x"), 1)]


def test_badly_typed_peek_rows_are_refused(
    local_handle: Handle, local_session: SessionClient, local_sql: Run, monkeypatch: Any
) -> None:
    local_sql("CREATE TABLE t (a int, b text)")
    local_sql("INSERT INTO t VALUES (1, 'x')")
    coordinator = local_handle.coordinator
    with monkeypatch.context() as patch:
        patch.setattr(coordinator.storage, "snapshot_rows", _bad_rows)  # persist fast path
        error = error_of(local_session, "SELECT a, b FROM t")
    assert error.code == "XX000"
    assert error.message == "column \"a\" row 0: 'not a number' is not a integer"
    with monkeypatch.context() as patch:
        patch.setattr(coordinator.compute, "stream_expr", _bad_rows)  # one-shot dataflow
        error = error_of(local_session, "SELECT a, b FROM t WHERE a > 0")
    assert (error.code, error.message) == (
        "XX000",
        "column \"a\" row 0: 'not a number' is not a integer",
    )
    assert local_sql("SELECT a, b FROM t") == [(1, "x")]  # unpatched, all is well


def test_badly_typed_rows_are_never_written(
    local_handle: Handle, local_session: SessionClient, local_sql: Run, monkeypatch: Any
) -> None:
    local_sql("CREATE TABLE t (a int, b text)")
    local_sql("INSERT INTO t VALUES (1, 'x')")
    coordinator = local_handle.coordinator
    appended: list[Any] = []
    real_append = coordinator.storage.append

    def append(commands: Any) -> None:
        appended.extend(c for c in commands if c.updates)
        real_append(commands)

    monkeypatch.setattr(coordinator.storage, "append", append)
    for statement in (
        # VALUES with an expression are evaluated by a one-shot peek (constants
        # only become rows without one).
        "INSERT INTO t VALUES (2, upper('y'))",
        "UPDATE t SET b = 'z' WHERE a = 1",
        "DELETE FROM t WHERE a = 1",
    ):
        with monkeypatch.context() as patch:
            patch.setattr(coordinator.compute, "stream_expr", _bad_rows)
            error = error_of(local_session, statement)
        assert error.code == "XX000", statement
        assert "'not a number' is not a integer" in error.message, statement
    # Inside a transaction the INSERT fails at once and COMMIT writes nothing.
    local_sql("BEGIN")
    with monkeypatch.context() as patch:
        patch.setattr(coordinator.compute, "stream_expr", _bad_rows)
        assert error_of(local_session, "INSERT INTO t VALUES (3, upper('w'))").code == "XX000"
    local_sql("COMMIT")
    assert appended == []
    assert local_sql("SELECT a, b FROM t") == [(1, "x")]


def test_badly_typed_subscribe_rows_end_the_subscribe(
    local_handle: Handle, local_sql: Run, monkeypatch: Any
) -> None:
    local_sql("CREATE TABLE t (a int, b text)")
    local_sql("INSERT INTO t VALUES (1, 'x')")
    compute = local_handle.coordinator.compute
    real_subscribe = compute.subscribe

    def subscribe(*args: Any, **kwargs: Any) -> Iterator[SubscribeBatch]:
        for batch in real_subscribe(*args, **kwargs):
            bad = tuple(Update((u.row[0], 42), u.time, u.diff) for u in batch.updates)
            yield SubscribeBatch(bad, batch.upper)

    monkeypatch.setattr(compute, "subscribe", subscribe)
    local_sql("BEGIN")
    local_sql("DECLARE c CURSOR FOR SUBSCRIBE t")
    with pytest.raises(AdapterError) as caught:
        local_sql("FETCH ALL c WITH (TIMEOUT = '10s')")
    assert caught.value.code == "XX000"
    assert caught.value.message == 'column "b" row 0: 42 is not a text'
    local_sql("ROLLBACK")
