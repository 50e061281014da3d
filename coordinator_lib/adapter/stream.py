"""RowStream: rows a background producer (a SUBSCRIBE) hands to a consumer
(FETCH, COPY TO STDOUT, a pgwire row loop), with cancellation.

The producer `put`s rows and `finish`es (with an error or not); the consumer
iterates (blocking) or `take`s up to n rows with a timeout. `close()` tells
the producer to stop at its next chance.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

Row = tuple[Any, ...]
_DONE = object()


class RowStream:
    def __init__(self, check_cancel: Callable[[], None] = lambda: None) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self.finished = False  # the consumer saw the end
        self.closed = threading.Event()  # the consumer is gone
        self.check_cancel = check_cancel

    # ------------------------------------------------------------ producer
    def put(self, row: Row) -> None:
        self._queue.put(row)

    def finish(self, error: BaseException | None = None) -> None:
        self._error = error
        self._queue.put(_DONE)

    # ------------------------------------------------------------ consumer
    def _next(self, timeout_s: float | None) -> Any:
        """The next row, _DONE, or None on timeout (checking cancellation)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self.check_cancel()
            wait = 0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic()))
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            if item is _DONE:
                self.finished = True
                if self._error is not None:
                    raise self._error
            return item

    def __iter__(self) -> Iterator[Row]:
        try:
            while not self.finished:
                item = self._next(None)
                if item is _DONE:
                    return
                yield item
        finally:
            self.close()

    def take(self, count: int | None, timeout_s: float | None) -> list[Row]:
        """Up to `count` rows (None: all available): waits up to `timeout_s`
        (None: forever) for the first, then takes what is ready."""
        rows: list[Row] = []
        if self.finished:
            return rows
        first = self._next(timeout_s)
        if first is None or first is _DONE:
            return rows
        rows.append(first)
        while count is None or len(rows) < count:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _DONE:
                self.finished = True
                if self._error is not None:
                    raise self._error
                break
            rows.append(item)
        return rows

    def close(self) -> None:
        self.closed.set()
