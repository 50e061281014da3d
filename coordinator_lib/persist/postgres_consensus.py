"""PostgreSQL consensus: the scale-out backend, shared by processes on many
hosts.

Why it is safe: every change is one autocommit statement whose WHERE clause
carries the expected seqno (`UPDATE ... WHERE key = k AND seqno = e`, or
`INSERT ... ON CONFLICT DO NOTHING` for a new key). Under READ COMMITTED a
statement that waits on a concurrent writer of the same row re-checks its
WHERE clause against the row that writer committed, so of two racers with
the same expected seqno exactly one updates a row. A change of several keys
runs those statements in one transaction, rolled back at the first key whose
seqno is not the expected one. Durability is the
server's (`synchronous_commit` on by default).
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo
from psycopg.pq import TransactionStatus

from coordinator_lib.persist.connection_pool import ConnectionPool
from coordinator_lib.persist.consensus import (
    Consensus,
    ConsensusError,
    KeyChange,
    SeqNo,
    VersionedData,
    check_changes,
    check_key,
)
from coordinator_lib.persist.errors import DiskFull

T = TypeVar("T")

CONNECT_TIMEOUT_S = 10

# Any constant works; it only has to be the same in every process that may
# create the table at the same time.
_SCHEMA_LOCK_ID = 0x7469_6465_6D61_726B & 0x7FFF_FFFF_FFFF_FFFF  # "tidemark"

# COLLATE "C": keys sort by code point whatever the database's locale, as
# Python sorts them and as the SQLite backend does, and LIKE 'prefix%' can use
# the primary-key index.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS consensus (
    key TEXT COLLATE "C" PRIMARY KEY,
    seqno BIGINT NOT NULL,
    data BYTEA NOT NULL
)
"""


def _alive(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection is still open. An idle autocommit
    session has nothing to read, so a readable socket means the server closed
    it (restart, idle timeout, pg_terminate_backend). Checking costs one
    non-blocking poll and keeps writes off dead connections, where a failure
    would leave their outcome unknown."""
    if conn.closed or conn.broken:
        return False
    try:
        # poll, not select: select fails on descriptors >= 1024, which a
        # process with Spark and many open files easily reaches.
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError, psycopg.Error):
        return False


def _close_quietly(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.close()


def _cas(conn: psycopg.Connection[Any], change: KeyChange) -> bool:
    """One key's compare-and-set as one statement: under READ COMMITTED a
    statement that waited on a concurrent writer of the row re-checks its
    WHERE clause against what that writer committed."""
    data = bytes(change.new.data)
    if change.expected is None:
        cur = conn.execute(
            "INSERT INTO consensus (key, seqno, data) VALUES (%s, %s, %s)"
            " ON CONFLICT (key) DO NOTHING",
            (change.key, change.new.seqno, data),
        )
    else:
        cur = conn.execute(
            "UPDATE consensus SET seqno = %s, data = %s WHERE key = %s AND seqno = %s",
            (change.new.seqno, data, change.key, change.expected),
        )
    return cur.rowcount == 1


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


class PostgresConsensus(Consensus):
    """Consensus in one PostgreSQL table.

    Autocommit connections are lent out from a small pool of idle ones: one
    psycopg connection serializes its users, and server threads may be
    short-lived (one per request), so neither one shared connection nor one
    per thread fits."""

    def __init__(self, url: str, *, max_idle: int = 8) -> None:
        self.url = url
        self.max_idle = max_idle
        params: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo.conninfo_to_dict(url):
            params["connect_timeout"] = CONNECT_TIMEOUT_S
        self._params = params
        # A forked child never uses or closes the parent's sessions (the
        # pool sets them aside). `_alive` is looked up per call, not bound here.
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self._connect,
            _close_quietly,
            usable=lambda conn: _alive(conn),
            max_idle=max_idle,
        )
        self._create_table()

    # -- connections ---------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.url, **self._params)
        except psycopg.Error as exc:
            raise ConsensusError(f"cannot connect to PostgreSQL consensus: {exc}") from exc

    @staticmethod
    def _reusable(conn: psycopg.Connection[Any]) -> bool:
        return not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE

    def _run(self, fn: Callable[[psycopg.Connection[Any]], T], *, retry: bool) -> T:
        """Run `fn` on a pooled connection. A read (`retry=True`) is repeated
        once on a fresh connection after a connection failure; a write is not,
        since it may have committed: it raises ConsensusError and the caller
        re-reads."""
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            conn = self._pool.acquire()
            try:
                return fn(conn)
            except psycopg.errors.DiskFull as exc:
                # The transaction failed, so nothing was written.
                raise DiskFull(f"PostgreSQL consensus: {exc}") from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                broken = conn.closed or conn.broken or isinstance(exc, psycopg.InterfaceError)
                if broken:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()  # so release drops it
                    if attempt + 1 < attempts:
                        continue
                raise ConsensusError(f"PostgreSQL consensus: {exc}") from exc
            except psycopg.Error as exc:
                raise ConsensusError(f"PostgreSQL consensus: {exc}") from exc
            finally:
                self._pool.release(conn, healthy=self._reusable(conn))
        raise AssertionError("unreachable")

    def _create_table(self) -> None:
        def create(conn: psycopg.Connection[Any]) -> None:
            # Concurrent CREATE TABLE IF NOT EXISTS can still fail with a
            # unique violation on pg_type; a transaction-scoped advisory lock
            # makes creators take turns.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
                exists = conn.execute("SELECT to_regclass('consensus')").fetchone()
                if exists is None or exists[0] is None:
                    conn.execute(_SCHEMA)

        self._run(create, retry=True)

    # -- Consensus -----------------------------------------------------------

    def head(self, key: str) -> VersionedData | None:
        check_key(key)

        def read(conn: psycopg.Connection[Any]) -> VersionedData | None:
            row = conn.execute(
                "SELECT seqno, data FROM consensus WHERE key = %s", (key,)
            ).fetchone()
            return None if row is None else VersionedData(int(row[0]), bytes(row[1]))

        return self._run(read, retry=True)

    def seqno(self, key: str) -> SeqNo | None:
        check_key(key)

        def read(conn: psycopg.Connection[Any]) -> SeqNo | None:
            row = conn.execute("SELECT seqno FROM consensus WHERE key = %s", (key,)).fetchone()
            return None if row is None else int(row[0])

        return self._run(read, retry=True)

    def compare_and_set(self, key: str, expected: SeqNo | None, new: VersionedData) -> bool:
        return self.compare_and_set_all([KeyChange(key, expected, new)])

    def compare_and_set_all(self, changes: Sequence[KeyChange]) -> bool:
        check_changes(changes)
        # Rows are locked in key order, so two multi-key changes never wait
        # for each other in a cycle (a deadlock).
        ordered = sorted(changes, key=lambda change: change.key)

        def cas_all(conn: psycopg.Connection[Any]) -> bool:
            if len(ordered) == 1:
                return _cas(conn, ordered[0])  # one autocommit statement
            landed = True
            with conn.transaction():
                for change in ordered:
                    if not _cas(conn, change):
                        landed = False
                        raise psycopg.Rollback()  # leaves the block, rolled back
            return landed

        return self._run(cas_all, retry=False)

    def list_keys(self, prefix: str = "") -> list[str]:
        check_key(prefix)

        def scan(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute(
                'SELECT key FROM consensus WHERE key LIKE %s ORDER BY key COLLATE "C"',
                (_like_prefix(prefix),),
            ).fetchall()
            return [r[0] for r in rows]

        return self._run(scan, retry=True)

    def delete(self, key: str, expected: SeqNo) -> bool:
        check_key(key)

        def remove(conn: psycopg.Connection[Any]) -> bool:
            cur = conn.execute(
                "DELETE FROM consensus WHERE key = %s AND seqno = %s", (key, expected)
            )
            return cur.rowcount == 1

        return self._run(remove, retry=False)

    def close(self) -> None:
        """Close idle connections now; ones lent out close when returned."""
        self._pool.close()

    def __repr__(self) -> str:
        # Never show a password in logs.
        info = conninfo.conninfo_to_dict(self.url)
        where = f"{info.get('host', '')}:{info.get('port', '')}/{info.get('dbname', '')}"
        return f"PostgresConsensus({where!r})"
