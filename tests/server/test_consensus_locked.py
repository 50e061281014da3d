"""A write that finds the consensus store locked by another process past the
busy timeout answers 55P03 lock_not_available, writes nothing, keeps the
session, and succeeds once the lock is released. Before, it was XX000 with a
traceback in the server log (seen when a SIGSTOPped worker held the lock)."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from coordinator_lib.persist import sqlite_consensus
from tests.fixtures.served import served


def test_a_write_against_a_locked_consensus_is_55P03_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store's 30 s busy timeout, shortened so the test does not wait on it.
    monkeypatch.setattr(
        sqlite_consensus,
        "SqliteConsensus",
        functools.partial(sqlite_consensus.SqliteConsensus, busy_timeout_s=0.5),
    )
    with served(tmp_path / "env") as env:
        dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (1)")
            (path,) = (tmp_path / "env").rglob("consensus.db")
            other_process = sqlite3.connect(path, isolation_level=None)
            try:
                other_process.execute("BEGIN IMMEDIATE")
                with pytest.raises(errors.LockNotAvailable) as refused:
                    conn.execute("INSERT INTO t VALUES (2)")
                assert "locked by another process" in str(refused.value)
                assert "nothing was written" in str(refused.value)
                other_process.execute("ROLLBACK")
            finally:
                other_process.close()
            assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,)]
            conn.execute("INSERT INTO t VALUES (3)")
            assert conn.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (3,)]
