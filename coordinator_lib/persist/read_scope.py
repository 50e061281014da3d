"""Seqno holds for reads that run after they are planned (lazy Spark jobs).

A Spark read lists a shard's batch directories when it is planned and opens
the files when the job runs, maybe seconds later and while another process
compacts the shard. `Shard.plan_read` therefore registers a seqno hold in the
shard's state (state.SeqnoHold) before it returns the batches to read, and
garbage collection keeps every blob a held state names.

`held_reads()` scopes those holds: the holds a `plan_read` takes inside it are
heart-beaten while the scope is open and released when it closes (after the
job ran). A `plan_read` outside any scope takes a hold that is never released:
it simply lapses with its lease, so a stray lazy read is safe for a lease.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

log = logging.getLogger(__name__)

# How long a seqno hold outlives its holder's last heartbeat (a crashed
# process's holds lapse after this; a scope heart-beats 4 times per lease).
SEQNO_HOLD_LEASE_MS = 60_000


class SeqnoHolder(Protocol):
    """What a scope needs of a shard (persist.shard.Shard)."""

    shard_id: str

    def heartbeat_seqno_hold(self, hold_id: str) -> None: ...

    def release_seqno_hold(self, hold_id: str) -> None: ...


class ReadScope:
    """The seqno holds of one unit of work: at most one per shard (the first
    plan's seqno protects every later state too)."""

    def __init__(self, lease_ms: int) -> None:
        self.lease_ms = lease_ms
        self.holds: dict[str, tuple[SeqnoHolder, str]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # Started by the first hold: most scopes (in-process steps) take none.
        self._heartbeat: threading.Thread | None = None

    def holds_shard(self, shard_id: str) -> bool:
        with self._lock:
            return shard_id in self.holds

    def add(self, shard: SeqnoHolder, hold_id: str) -> None:
        with self._lock:
            self.holds[shard.shard_id] = (shard, hold_id)
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(
                    target=self._heartbeat_loop, name="seqno-hold-heartbeat", daemon=True
                )
                self._heartbeat.start()

    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.lease_ms / 4000):
            with self._lock:
                holds = list(self.holds.values())
            for shard, hold_id in holds:
                try:
                    shard.heartbeat_seqno_hold(hold_id)
                except Exception:  # a lapsed hold: the read may now fail, and says so
                    log.exception("seqno hold %s on shard %s lapsed", hold_id, shard.shard_id)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            heartbeat, holds, self.holds = self._heartbeat, list(self.holds.values()), {}
        if heartbeat is not None:
            heartbeat.join()
        for shard, hold_id in holds:
            try:
                shard.release_seqno_hold(hold_id)
            except Exception:  # it lapses with its lease instead
                log.warning("could not release seqno hold %s on %s", hold_id, shard.shard_id)


_current: contextvars.ContextVar[ReadScope | None] = contextvars.ContextVar(
    "persist_read_scope", default=None
)


def current_scope() -> ReadScope | None:
    return _current.get()


@contextmanager
def held_reads(lease_ms: int = SEQNO_HOLD_LEASE_MS) -> Iterator[ReadScope]:
    """Hold what reads planned inside the block (on any thread's shards) until
    it ends. Nested blocks share the outermost scope."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    scope = ReadScope(lease_ms)
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)
        scope.close()
