"""The statement log: every statement a session ran, with its outcome.

Kept in memory (the newest `capacity` records) and exposed as the system
relation `mz_internal.mz_statement_log`, so it is queryable by SQL like
Materialize's `mz_statement_execution_history`. Each record keeps the first
`MAX_SQL_CHARS` of its statement's text, as PostgreSQL's
`track_activity_query_size` does for pg_stat_activity: a bound on records
alone is no bound on memory when statements carry megabytes of literals
(10,000 bulk INSERTs of 1 MB each would keep 10 GB).
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass

MAX_SQL_CHARS = 1024


@dataclass
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


class StatementLog:
    def __init__(self, capacity: int = 10_000) -> None:
        self._records: deque[StatementRecord] = deque(maxlen=capacity)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def begin(self, session_id: int, sql: str) -> StatementRecord:
        record = StatementRecord(
            next(self._ids),
            session_id,
            sql[:MAX_SQL_CHARS],
            dt.datetime.now(dt.UTC),
            time.perf_counter(),
        )
        with self._lock:
            self._records.append(record)
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

    def records(self) -> list[StatementRecord]:
        with self._lock:
            return list(self._records)
