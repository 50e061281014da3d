"""SQLite consensus: the embedded default, one file shared by every process of
an environment on one host.

Why it is safe across processes: a compare-and-set is one SQL statement,
which checks the expected seqnos and writes under SQLite's single write lock,
so two racing compare_and_sets are serialized and exactly one sees the
expected seqno; a change of several keys is that one statement too. Why it is
durable: WAL journal with `synchronous=FULL` fsyncs the log before a commit
returns, so an acknowledged change survives SIGKILL and power loss (as far as
the disk honours fsync).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from coordinator_lib.persist.connection_pool import ConnectionPool
from coordinator_lib.persist.consensus import (
    Consensus,
    ConsensusBusy,
    ConsensusError,
    KeyChange,
    SeqNo,
    VersionedData,
    check_changes,
    check_key,
)
from coordinator_lib.persist.errors import DiskFull
from coordinator_lib.persist.sqlite_temp import keep_temp_in_memory

T = TypeVar("T")

# Several OS processes share the file; a writer holds the lock only for one
# short transaction, so waiting long is better than failing spuriously.
BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS consensus (
    key TEXT PRIMARY KEY,
    seqno INTEGER NOT NULL,
    data BLOB NOT NULL
)
"""


# Inserts or updates every row of `changes` iff each key's current seqno is
# the expected one (NULL: the key is absent); otherwise writes nothing.
_CAS_SQL = """
WITH change(key, expected, seqno, data) AS (VALUES {rows})
INSERT INTO consensus (key, seqno, data)
SELECT key, seqno, data FROM change
WHERE NOT EXISTS (
    SELECT 1 FROM change LEFT JOIN consensus ON consensus.key = change.key
    WHERE consensus.seqno IS NOT change.expected
)
ON CONFLICT (key) DO UPDATE SET seqno = excluded.seqno, data = excluded.data
"""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


def _close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.close()


class SqliteConsensus(Consensus):
    """Consensus in one SQLite file.

    A sqlite3 connection must not be used by two threads at once, and server
    threads may be short-lived (one per request), so connections are lent
    out from a small pool of idle ones rather than tied to threads."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = BUSY_TIMEOUT_S,
        max_idle: int = 8,
    ) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file::memory:"):
            # Each pooled connection would see its own empty database.
            raise ValueError("SqliteConsensus needs a file path, not an in-memory database")
        self.path = Path(path).resolve()
        self.busy_timeout_s = busy_timeout_s
        self.max_idle = max_idle
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Lent out, not tied to threads; SQLite forbids a forked child to use
        # or close the parent's connections, which the pool guarantees.
        self._pool: ConnectionPool[sqlite3.Connection] = ConnectionPool(
            self._connect, _close_quietly, max_idle=max_idle
        )
        # Create the table (and switch the file to WAL) now, so a bad path
        # fails at open rather than at the first write.
        self._run(lambda conn: None)

    # -- connections ---------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout_s,
                    isolation_level=None,  # autocommit; transactions are explicit
                    check_same_thread=False,  # pooled: used by one thread at a time
                )
                # journal_mode=WAL is persistent in the file; the others are
                # per connection.
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
                conn.execute("PRAGMA synchronous=FULL")
                # Deleted record versions are overwritten, not left in free pages.
                conn.execute("PRAGMA secure_delete=ON")
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
                keep_temp_in_memory(conn)
                conn.execute(_SCHEMA)
                return conn
            except sqlite3.OperationalError as exc:
                if conn is not None:
                    conn.close()
                # Switching to WAL or creating the table can hit a lock held by
                # another process's set-up without the busy handler helping.
                if _is_busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise ConsensusError(f"cannot open SQLite consensus {self.path}: {exc}") from exc

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` on a pooled connection, mapping SQLite failures to
        ConsensusError (the operation's outcome is then unknown)."""
        conn = self._pool.acquire()
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                # Rolled back: the outcome is known (nothing written).
                raise DiskFull(f"SQLite consensus {self.path}: {exc}") from exc
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise ConsensusBusy(
                    f"SQLite consensus {self.path} stayed locked by another process"
                    f" for {self.busy_timeout_s:g} s"
                ) from exc
            raise ConsensusError(f"SQLite consensus {self.path}: {exc}") from exc
        finally:
            self._pool.release(conn, healthy=not conn.in_transaction)

    # -- Consensus -----------------------------------------------------------

    def head(self, key: str) -> VersionedData | None:
        check_key(key)

        def read(conn: sqlite3.Connection) -> VersionedData | None:
            row = conn.execute("SELECT seqno, data FROM consensus WHERE key = ?", (key,)).fetchone()
            return None if row is None else VersionedData(int(row[0]), bytes(row[1]))

        return self._run(read)

    def seqno(self, key: str) -> SeqNo | None:
        check_key(key)

        def read(conn: sqlite3.Connection) -> SeqNo | None:
            row = conn.execute("SELECT seqno FROM consensus WHERE key = ?", (key,)).fetchone()
            return None if row is None else int(row[0])

        return self._run(read)

    def compare_and_set(self, key: str, expected: SeqNo | None, new: VersionedData) -> bool:
        return self.compare_and_set_all([KeyChange(key, expected, new)])

    def compare_and_set_all(self, changes: Sequence[KeyChange]) -> bool:
        check_changes(changes)
        # One statement checks every expected seqno and writes every row, so
        # SQLite's write lock is held only inside that statement's C code,
        # never across Python: a worker frozen (SIGSTOP) or starved of the GIL
        # between two calls of a multi-statement transaction would otherwise
        # hold every process of the environment off consensus.
        sql = _CAS_SQL.format(rows=", ".join(["(?, ?, ?, ?)"] * len(changes)))
        params: list[object] = []
        for change in changes:
            params += [change.key, change.expected, change.new.seqno, bytes(change.new.data)]

        def cas(conn: sqlite3.Connection) -> bool:
            deadline = time.monotonic() + self.busy_timeout_s
            while True:
                before = conn.total_changes  # rowcount is -1 for a WITH statement
                try:
                    conn.execute(sql, params)
                except sqlite3.OperationalError as exc:
                    # A statement that reads and then writes in WAL mode fails
                    # at once (SQLITE_BUSY_SNAPSHOT, no busy handler) when
                    # another process committed after its read began; it wrote
                    # nothing, so running it again is safe.
                    if _is_busy(exc) and time.monotonic() < deadline:
                        time.sleep(0.001)
                        continue
                    raise
                written = conn.total_changes - before
                if written not in (0, len(changes)):
                    raise ConsensusError(
                        f"compare_and_set_all wrote {written} of {len(changes)} rows"
                    )
                return written == len(changes)

        return self._run(cas)

    def list_keys(self, prefix: str = "") -> list[str]:
        check_key(prefix)

        def scan(conn: sqlite3.Connection) -> list[str]:
            # BINARY collation orders by UTF-8 bytes (= code points, as Python
            # sorts), so the keys with `prefix` are one contiguous run from
            # `prefix` on; LIKE would be case-insensitive and treat % and _.
            keys: list[str] = []
            cur = conn.execute("SELECT key FROM consensus WHERE key >= ? ORDER BY key", (prefix,))
            try:
                for (k,) in cur:
                    if not k.startswith(prefix):
                        break
                    keys.append(k)
            finally:
                # A half-read statement would pin an old WAL snapshot on
                # this pooled connection.
                cur.close()
            return keys

        return self._run(scan)

    def delete(self, key: str, expected: SeqNo) -> bool:
        check_key(key)

        def remove(conn: sqlite3.Connection) -> bool:
            # One statement is one atomic write transaction.
            cur = conn.execute("DELETE FROM consensus WHERE key = ? AND seqno = ?", (key, expected))
            return cur.rowcount == 1

        return self._run(remove)

    def close(self) -> None:
        """Close idle connections now; ones lent out close when returned."""
        self._pool.close()

    def __repr__(self) -> str:
        return f"SqliteConsensus({str(self.path)!r})"
