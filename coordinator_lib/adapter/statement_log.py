"""The statement log: every statement a session ran, with its outcome.

Exposed as the system relation `mz_internal.mz_statement_log`, so it is
queryable by SQL like Materialize's `mz_statement_execution_history`.

Finished statements are kept off the heap, in a SQLite file of this process
(Materialize keeps its statement log in a durable collection, not in memory).
Held in memory, a record took about 650 bytes of Python objects, so the
server's heap grew by 6-10 MB until the newest 10,000 were kept, which under
issue 18's soak (a scripted user: 3,000-20,000 statements an hour) took
from half an hour to three hours.
Now only statements still running, and up to `WRITE_BATCH` finished ones not
yet written, are Python objects; the file keeps the newest `capacity` records
(about 20 us a statement instead of 12).

Each record keeps the first `MAX_SQL_CHARS` of its statement's text, as
PostgreSQL's `track_activity_query_size` does for pg_stat_activity.
"""

from __future__ import annotations

import datetime as dt
import itertools
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_SQL_CHARS = 1024
# Finished records written to the file in one transaction.
WRITE_BATCH = 64
# SQLite's page cache for the file: the log is appended and read whole, so
# a cache saves little; SQLite's default is 2 MiB.
CACHE_KIB = 256

_COLUMNS = (
    "id, session_id, sql, began_at_us, duration_ms, status, error_message, "
    "execution_timestamp, execution_strategy"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS statements (id INTEGER PRIMARY KEY, session_id INTEGER, "
    "sql TEXT, began_at_us INTEGER, duration_ms REAL, status TEXT, error_message TEXT, "
    "execution_timestamp INTEGER, execution_strategy TEXT)"
)


@dataclass(slots=True)
class StatementRecord:
    id: int
    session_id: int
    sql: str
    began_at: dt.datetime
    started: float
    duration_ms: float | None = None
    status: str = "running"  # running | success | error | canceled
    error_message: str | None = None
    execution_timestamp: int | None = None
    # How a read was answered (Materialize's names): "fast-path" (an index),
    # "persist-fast-path" (a collection's snapshot), "standard" (a one-shot
    # dataflow), "constant" (no inputs).
    execution_strategy: str | None = None

    def row(self) -> tuple[object, ...]:
        began_at_us = (self.began_at - _EPOCH) // dt.timedelta(microseconds=1)
        return (
            self.id,
            self.session_id,
            self.sql,
            began_at_us,
            self.duration_ms,
            self.status,
            self.error_message,
            self.execution_timestamp,
            self.execution_strategy,
        )


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _record(row: Any) -> StatementRecord:
    id_, session_id, sql, began_at_us, duration_ms, status, error, timestamp, strategy = row
    began_at = _EPOCH + dt.timedelta(microseconds=began_at_us)
    return StatementRecord(
        id_, session_id, sql, began_at, 0.0, duration_ms, status, error, timestamp, strategy
    )


class StatementLog:
    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # Held while a batch taken from `_finished` is written to the file
        # (outside `_lock`, so statements begin and finish meanwhile), and
        # by `records` and `close`, which so never miss a batch in flight.
        # Taken before `_lock`, never inside it.
        self._write_lock = threading.Lock()
        self._running: dict[int, StatementRecord] = {}
        self._finished: list[StatementRecord] = []  # not yet written
        self._closed = False
        self._directory = tempfile.TemporaryDirectory(prefix="tidemark-statement-log-")
        self._conn = sqlite3.connect(
            Path(self._directory.name) / "statements.db",
            isolation_level=None,
            check_same_thread=False,  # used under self._lock only
        )
        # A log of this process only, rebuilt empty at start: no durability.
        self._conn.execute("PRAGMA journal_mode=OFF")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self._conn.execute(_SCHEMA)

    def begin(self, session_id: int, sql: str) -> StatementRecord:
        record = StatementRecord(
            next(self._ids),
            session_id,
            sql[:MAX_SQL_CHARS],
            dt.datetime.now(dt.UTC),
            time.perf_counter(),
        )
        with self._lock:
            self._running[record.id] = record
        return record

    def finish(
        self,
        record: StatementRecord,
        status: str,
        error: str | None = None,
    ) -> None:
        with self._lock:
            record.duration_ms = (time.perf_counter() - record.started) * 1000
            record.status = status
            record.error_message = error
            if self._running.pop(record.id, None) is None:
                return  # finished twice, or the log is closed
            self._finished.append(record)
            if len(self._finished) < WRITE_BATCH:
                return
        # The file is written outside `_lock`: SQLite releases the GIL, and
        # getting it back takes a while when many threads want it, which
        # every session thread's begin and finish spent waiting on `_lock`
        # (32 pgbench clients). A finisher finding a write under way leaves
        # its batch to the next.
        if self._write_lock.acquire(blocking=False):
            try:
                with self._lock:
                    batch, self._finished = self._finished, []
                self._write(batch)
            finally:
                self._write_lock.release()

    def records(self) -> list[StatementRecord]:
        """The newest `capacity` records, oldest first."""
        with self._write_lock:
            with self._lock:
                batch, self._finished = self._finished, []
                running = list(self._running.values())
            self._write(batch)
            rows = (
                []
                if self._closed
                else self._conn.execute(
                    f"SELECT {_COLUMNS} FROM statements ORDER BY id DESC LIMIT ?", (self.capacity,)
                ).fetchall()
            )
        merged = [_record(row) for row in reversed(rows)] + running
        merged.sort(key=lambda r: r.id)
        return merged[-self.capacity :]

    def close(self) -> None:
        with self._write_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._running.clear()
            self._finished.clear()
            self._conn.close()
        self._directory.cleanup()

    def _write(self, batch: list[StatementRecord]) -> None:
        """Write `batch` (finished records) and drop records past the newest
        `capacity`; the caller holds `_write_lock`."""
        if not batch or self._closed:
            return
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.executemany(
                f"INSERT INTO statements ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [r.row() for r in batch],
            )
            newest = max(r.id for r in batch)
            conn.execute("DELETE FROM statements WHERE id <= ?", (newest - self.capacity,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
