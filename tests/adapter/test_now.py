"""now() / current_timestamp: the system clock when the transaction began
(PostgreSQL's and Materialize's), in queries and DML; refused in views,
where it would be frozen at creation (adapter/session_functions.py)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.adapter.client import Handle, serve
from coordinator_lib.adapter.errors import AdapterError
from tests.adapter.conftest import fast_config, run_on


@pytest.fixture
def local_handle(tmp_path: Path) -> Iterator[Handle]:
    handle = serve(fast_config(tmp_path / "env"), None)  # small work: Spark never starts
    try:
        yield handle
    finally:
        handle.shutdown()


def test_now_is_the_statement_or_transaction_start(local_handle: Handle) -> None:
    run = run_on(local_handle.client.startup("materialize", "materialize"))
    before = dt.datetime.now(dt.UTC)
    ((now, current),) = run("SELECT now(), current_timestamp")
    after = dt.datetime.now(dt.UTC)
    assert now == current and before - dt.timedelta(milliseconds=1) <= now <= after
    run("CREATE TABLE t (at timestamptz NOT NULL, n int)")
    run("INSERT INTO t VALUES (now(), 1)")
    ((stored,),) = run("SELECT at FROM t")
    assert after <= stored <= dt.datetime.now(dt.UTC)
    run("BEGIN")
    ((first,),) = run("SELECT now()")
    time.sleep(0.01)
    ((second,),) = run("SELECT now() + interval '0 seconds'")
    run("COMMIT")
    assert first == second  # one transaction, one now()
    ((today, at),) = run("SELECT current_date, now()")
    assert isinstance(today, dt.date) and today == at.astimezone(dt.UTC).date()
    ((days,),) = run("SELECT current_date - date '2000-01-01'")
    assert days == (today - dt.date(2000, 1, 1)).days


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW v AS SELECT now() AS at",
        "CREATE MATERIALIZED VIEW mv AS SELECT n FROM t WHERE at > now()",
        "CREATE VIEW v AS SELECT current_date + n AS d FROM t",
    ],
)
def test_views_refuse_now(local_handle: Handle, sql: str) -> None:
    run = run_on(local_handle.client.startup("materialize", "materialize"))
    run("CREATE TABLE t (at timestamptz, n int)")
    with pytest.raises(AdapterError) as info:
        run(sql)
    assert info.value.code == "0A000" and "not materializable" in info.value.message
