"""Idempotency keys of webhook requests: a retried request (same source,
same `Idempotency-Key` header) is appended once within a window.

The first request with a key claims it; a concurrent one with the same key
waits for that outcome: if the first was appended, the second is answered
as a duplicate (200, nothing written); if it failed, the second claims the
key itself. Appended keys are remembered for `window_ms` (at most
`max_keys`, oldest forgotten first).

The memory is this process's. `seed` fills it from a source's stored rows
when the source keeps the key as a column, which makes deduplication
survive a restart (see docs/webhooks.md).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from coordinator_lib.repr.global_id import GlobalId

Key = tuple[GlobalId, str]


class IdempotencyKeys:
    def __init__(
        self,
        window_ms: int,
        max_keys: int = 1_000_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window_ms / 1000
        self.max_keys = max_keys
        self.clock = clock
        self._lock = threading.Lock()
        self._appended: OrderedDict[Key, float] = OrderedDict()  # key -> forget after
        self._in_flight: dict[Key, threading.Event] = {}

    def claim(self, source: GlobalId, key: str) -> bool:
        """True: the caller appends, then calls `release`. False: a request
        with this key was appended within the window."""
        entry = (source, key)
        while True:
            with self._lock:
                self._expire()
                if entry in self._appended:
                    return False
                pending = self._in_flight.get(entry)
                if pending is None:
                    self._in_flight[entry] = threading.Event()
                    return True
            pending.wait()

    def release(self, source: GlobalId, key: str, appended: bool) -> None:
        """End a claim: remember the key if its rows were appended."""
        entry = (source, key)
        with self._lock:
            pending = self._in_flight.pop(entry, None)
            if appended:
                self._remember(entry)
        if pending is not None:
            pending.set()

    def seed(self, source: GlobalId, keys: Iterable[str]) -> None:
        """Mark keys already appended (read back from stored rows)."""
        with self._lock:
            for key in keys:
                self._remember((source, key))

    def __len__(self) -> int:
        with self._lock:
            return len(self._appended)

    def _remember(self, entry: Key) -> None:
        self._appended.pop(entry, None)
        self._appended[entry] = self.clock() + self.window
        while len(self._appended) > self.max_keys:
            self._appended.popitem(last=False)

    def _expire(self) -> None:
        now = self.clock()
        while self._appended:
            entry, forget_after = next(iter(self._appended.items()))
            if forget_after > now:
                return
            del self._appended[entry]


__all__ = ["IdempotencyKeys"]
