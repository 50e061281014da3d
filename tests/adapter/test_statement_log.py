"""The statement log's bounds: records kept, and the server heap they use."""

from __future__ import annotations

import tracemalloc

from coordinator_lib.adapter.statement_log import StatementLog


def test_the_log_keeps_its_newest_records_with_every_field() -> None:
    log = StatementLog(capacity=100)
    try:
        for i in range(250):
            record = log.begin(session_id=i % 7, sql=f"SELECT {i}")
            record.execution_strategy = "constant"
            record.execution_timestamp = 1000 + i
            log.finish(record, "error" if i % 2 else "success", "boom" if i % 2 else None)
        running = log.begin(session_id=1, sql="SELECT 'still running'")
        records = log.records()
        assert [r.sql for r in records] == [f"SELECT {i}" for i in range(151, 250)] + [
            "SELECT 'still running'"
        ]
        last = records[-2]
        assert (last.session_id, last.status, last.error_message) == (249 % 7, "error", "boom")
        assert (last.execution_strategy, last.execution_timestamp) == ("constant", 1249)
        assert last.duration_ms is not None and last.duration_ms >= 0
        assert records[-1] == running and running.status == "running"
        assert records[-3].began_at <= last.began_at <= running.began_at
    finally:
        log.close()


def test_finished_statements_are_kept_off_the_heap() -> None:
    """Held in memory, 5,000 records of 300 characters took about 5 MB of the
    server's heap, and the log grew until 10,000 (issue 18's soak: the heap
    kept growing for hours). Finished records live in a SQLite file."""
    log = StatementLog()
    try:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(5_000):
            record = log.begin(session_id=1, sql=f"SELECT {i}, '{'x' * 300}'")
            log.finish(record, "success")
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert held < 500_000, f"the log holds {held} bytes of the heap"
        assert len(log.records()) == 5_000
    finally:
        log.close()


def test_statements_begin_and_finish_while_the_file_is_written() -> None:
    """A batch of finished records is written to the SQLite file outside the
    lock every statement's begin and finish take: SQLite gives up the GIL,
    and with 32 pgbench clients the session threads queued on that lock
    while the writer waited to get the GIL back. Checked from inside the
    write: the lock is free there, and a statement begins and finishes."""
    from coordinator_lib.adapter import statement_log

    log = StatementLog(capacity=1_000)
    seen: list[tuple[bool, str]] = []

    class Conn:
        def __init__(self, conn: object) -> None:
            self.conn = conn

        def executemany(self, *args: object) -> object:
            free = log._lock.acquire(blocking=False)
            if free:
                log._lock.release()
                inner = log.begin(session_id=2, sql="SELECT 'during the write'")
                log.finish(inner, "success")
                seen.append((free, inner.status))
            else:
                seen.append((free, "not begun"))
            return self.conn.executemany(*args)  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self.conn, name)

    log._conn = Conn(log._conn)  # type: ignore[assignment]
    try:
        for i in range(statement_log.WRITE_BATCH):
            log.finish(log.begin(session_id=1, sql=f"SELECT {i}"), "success")
        assert seen == [(True, "success")]
        texts = [r.sql for r in log.records()]
        assert texts == [f"SELECT {i}" for i in range(statement_log.WRITE_BATCH)] + [
            "SELECT 'during the write'"
        ]
    finally:
        log.close()
