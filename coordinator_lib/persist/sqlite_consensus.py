"""SQLite consensus: the embedded default, one file shared by every process of
an environment on one host.

Why it is safe across processes: every change runs in a `BEGIN IMMEDIATE`
transaction, which takes SQLite's single write lock before reading the
current seqno, so two racing compare_and_sets are serialized and exactly one
sees the expected seqno. Why it is durable: WAL journal with
`synchronous=FULL` fsyncs the log before a commit returns, so an acknowledged
change survives SIGKILL and power loss (as far as the disk honours fsync).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from coordinator_lib.persist.consensus import Consensus, ConsensusError, SeqNo, VersionedData

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


class _Connection(sqlite3.Connection):
    """sqlite3.Connection cannot be weakly referenced; a subclass can, which
    lets connections of finished threads be freed with their thread."""


def _check_key(key: str) -> None:
    # PostgreSQL text cannot hold NUL; refuse it here too so both backends agree.
    if "\x00" in key:
        raise ValueError("consensus keys must not contain NUL characters")


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


class SqliteConsensus(Consensus):
    """Consensus in one SQLite file, one connection per thread (sqlite3
    connections must not be used by two threads at once)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S):
        if str(path) in ("", ":memory:") or str(path).startswith("file::memory:"):
            # Per-thread connections would each see a different empty database.
            raise ValueError("SqliteConsensus needs a file path, not an in-memory database")
        self.path = Path(path).resolve()
        self.busy_timeout_s = busy_timeout_s
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._local = threading.local()
        self._conns: weakref.WeakSet[_Connection] = weakref.WeakSet()
        # Connections inherited over fork(): SQLite forbids using or closing
        # them in the child, so they are kept alive and never touched.
        self._inherited: list[object] = []
        # Create the table (and switch the file to WAL) eagerly, so a bad path
        # fails at open rather than at the first write.
        self._run(lambda conn: None)

    # -- connections ---------------------------------------------------------

    def _connect(self) -> _Connection:
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            conn: _Connection | None = None
            try:
                conn = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout_s,
                    isolation_level=None,  # autocommit; transactions are explicit
                    check_same_thread=False,  # close() may run on another thread
                    factory=_Connection,
                )
                # journal_mode=WAL is persistent in the file; the others are
                # per connection.
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
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

    def _conn(self) -> _Connection:
        if self._closed:
            raise RuntimeError("consensus is closed")
        if os.getpid() != self._pid:
            with self._lock:
                if os.getpid() != self._pid:
                    self._inherited.append(self._local)
                    self._inherited.extend(self._conns)
                    self._local = threading.local()
                    self._conns = weakref.WeakSet()
                    self._pid = os.getpid()
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            with self._lock:
                if self._closed:
                    conn.close()
                    raise RuntimeError("consensus is closed")
                self._conns.add(conn)
            self._local.conn = conn
        return conn

    def _run(self, fn: Callable[[_Connection], T]) -> T:
        """Run `fn` on this thread's connection, mapping SQLite failures to
        ConsensusError (the operation's outcome is then unknown)."""
        conn = self._conn()
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.ProgrammingError) and self._closed:
                raise RuntimeError("consensus is closed") from exc
            raise ConsensusError(f"SQLite consensus {self.path}: {exc}") from exc

    # -- Consensus -----------------------------------------------------------

    def head(self, key: str) -> VersionedData | None:
        _check_key(key)

        def read(conn: _Connection) -> VersionedData | None:
            row = conn.execute("SELECT seqno, data FROM consensus WHERE key = ?", (key,)).fetchone()
            return None if row is None else VersionedData(int(row[0]), bytes(row[1]))

        return self._run(read)

    def compare_and_set(self, key: str, expected: SeqNo | None, new: VersionedData) -> bool:
        _check_key(key)
        if expected is not None and new.seqno <= expected:
            raise ValueError(f"new seqno {new.seqno} must be greater than expected {expected}")
        data = bytes(new.data)

        def cas(conn: _Connection) -> bool:
            # IMMEDIATE takes the write lock before the read, so no other
            # process can change the row between our check and our write.
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT seqno FROM consensus WHERE key = ?", (key,)).fetchone()
            current = None if row is None else int(row[0])
            if current != expected:
                conn.execute("ROLLBACK")
                return False
            if expected is None:
                conn.execute(
                    "INSERT INTO consensus (key, seqno, data) VALUES (?, ?, ?)",
                    (key, new.seqno, data),
                )
            else:
                conn.execute(
                    "UPDATE consensus SET seqno = ?, data = ? WHERE key = ?",
                    (new.seqno, data, key),
                )
            conn.execute("COMMIT")
            return True

        return self._run(cas)

    def list_keys(self, prefix: str = "") -> list[str]:
        _check_key(prefix)

        def scan(conn: _Connection) -> list[str]:
            # BINARY collation orders by UTF-8 bytes (= code points, as Python
            # sorts), so the keys with `prefix` are one contiguous run from
            # `prefix` on; LIKE would be case-insensitive and treat % and _.
            keys: list[str] = []
            for (k,) in conn.execute(
                "SELECT key FROM consensus WHERE key >= ? ORDER BY key", (prefix,)
            ):
                if not k.startswith(prefix):
                    break
                keys.append(k)
            return keys

        return self._run(scan)

    def delete(self, key: str, expected: SeqNo) -> bool:
        _check_key(key)

        def remove(conn: _Connection) -> bool:
            # One statement is one atomic write transaction.
            cur = conn.execute("DELETE FROM consensus WHERE key = ? AND seqno = ?", (key, expected))
            return cur.rowcount == 1

        return self._run(remove)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns) if os.getpid() == self._pid else []
            self._conns = weakref.WeakSet()
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def __repr__(self) -> str:
        return f"SqliteConsensus({str(self.path)!r})"
