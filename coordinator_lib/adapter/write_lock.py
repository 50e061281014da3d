"""The coordinator's write lock: read-then-write statements against blind
writes (Materialize defers table writes while a read-then-write holds the
table's write lock).

A read-then-write statement (UPDATE, DELETE, INSERT ... SELECT) reads at one
time and writes at a later one: it holds the lock *exclusively* from its
read to its commit, so no other write of this process lands in between. A
blind write (INSERT ... VALUES, COMMIT of a write transaction) holds it
*shared*: blind writes run together, so they share group commits, and wait
only while a read-then-write runs. Waiting read-then-writes go first (new
blind writes queue behind them), so a stream of INSERTs cannot starve an
UPDATE. UNIQUE constraints need no lock: the group-commit leader checks
them against the table at the upper it appends at.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteLock:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0  # blind writes holding the lock
        self._exclusive = False  # a read-then-write holds it
        self._waiting_exclusive = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting_exclusive:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if self._shared == 0:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_exclusive += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
