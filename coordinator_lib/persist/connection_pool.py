"""A small pool of idle database connections, shared by the consensus backends.

Why a pool: a DB-API connection serves one user at a time and server threads
may be short-lived (one per request), so neither one shared connection nor
one per thread fits; connections are lent out and returned instead. Why it
is bounded: at most `max_idle` connections wait idle, so bursts of threads do
not leave sessions (PostgreSQL backends, SQLite file handles) open forever.
Why it watches the pid: after fork() the child shares the parent's sessions
and SQLite forbids using or closing inherited connections, so a child never
takes, returns or closes the parent's connections; it opens its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

C = TypeVar("C")


class ConnectionPool(Generic[C]):
    """Idle connections of one kind, lent out by `acquire` and given back by
    `release`. `close_connection` must not raise (it is called to drop dead,
    surplus and returned-after-close connections); `usable`, if given, is
    checked under the pool's lock on each idle connection before it is lent
    out, and ones failing it are closed and skipped."""

    def __init__(
        self,
        connect: Callable[[], C],
        close_connection: Callable[[C], None],
        *,
        usable: Callable[[C], bool] | None = None,
        max_idle: int = 8,
    ) -> None:
        self._connect = connect
        self._close_connection = close_connection
        self._usable = usable
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._idle: list[C] = []
        # Connections inherited over fork(): kept referenced so they are never
        # used, closed, or finalized (closed) by garbage collection in the child.
        self._inherited: list[C] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def _forked(self) -> bool:
        """Whether this process is not the one that filled the pool; the
        caller holds the lock."""
        return os.getpid() != self._pid

    def _adopt_fork(self) -> None:
        """After fork() the idle connections are the parent's: set them aside
        and start an empty pool for this process. The caller holds the lock."""
        if self._forked():
            self._inherited.extend(self._idle)
            self._idle = []
            self._pid = os.getpid()

    def acquire(self) -> C:
        """An idle connection that passes `usable`, or a new one. Raises
        RuntimeError once the pool is closed."""
        dead: list[C] = []
        found: C | None = None
        with self._lock:
            if self._closed:
                raise RuntimeError("consensus is closed")
            self._adopt_fork()
            while self._idle and found is None:
                conn = self._idle.pop()
                if self._usable is None or self._usable(conn):
                    found = conn
                else:
                    dead.append(conn)
        for conn in dead:
            self._close_connection(conn)
        return found if found is not None else self._connect()

    def release(self, conn: C, healthy: bool) -> None:
        """Give back a connection from `acquire`. It is kept idle only if it is
        `healthy` (no open transaction, not broken), the pool is open, this is
        still the process it was taken in, and fewer than `max_idle` wait;
        otherwise it is closed."""
        with self._lock:
            if (
                not self._closed
                and not self._forked()
                and healthy
                and len(self._idle) < self.max_idle
            ):
                self._idle.append(conn)
                return
        self._close_connection(conn)

    def close(self) -> None:
        """Close the idle connections now; lent-out ones close when released.
        In a forked child the idle ones are the parent's and are left alone."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._adopt_fork()
            idle, self._idle = self._idle, []
        for conn in idle:
            self._close_connection(conn)
