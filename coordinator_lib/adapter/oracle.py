"""The timestamp oracle (Materialize's `TimestampOracle`), durable in consensus.

One record per timeline holds `read_ts` (the latest time every acknowledged
write is visible at) and `write_ts` (the latest time handed to a writer).
`write_ts()` returns a time after every earlier write and read time, and near
the wall clock; `apply_write(t)` makes `t` readable once its writes are
durable; `read_ts()` is the time a strict serializable read uses. Because both
are compare-and-set on one record, the oracle is monotonic across processes
(invariant 8): a second coordinator, or a restart, can never hand out an
earlier time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from coordinator_lib.adapter.durable import Record, read_record, update_record
from coordinator_lib.persist.consensus import Consensus

EPOCH_MILLISECONDS = "EpochMilliseconds"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class TimestampOracle:
    def __init__(
        self,
        consensus: Consensus,
        timeline: str = EPOCH_MILLISECONDS,
        now: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.consensus = consensus
        self.timeline = timeline
        self.key = f"oracle/{timeline}"
        self.now = now

    def write_ts(self) -> int:
        """A fresh time for a write: later than every time handed out before
        (to writers or readers) and at least the wall clock."""

        def allocate(record: Record | None) -> Record:
            record = record or {"read_ts": 0, "write_ts": 0}
            floor = max(record["write_ts"], record["read_ts"]) + 1
            return record | {"write_ts": max(self.now(), floor)}

        _, record = update_record(self.consensus, self.key, allocate)
        return int(record["write_ts"])

    def peek_write_ts(self) -> int:
        """The latest write time handed out, without allocating one."""
        _, record = read_record(self.consensus, self.key)
        return 0 if record is None else int(record["write_ts"])

    def read_ts(self) -> int:
        """The time a linearizable read uses: every write applied so far is
        visible at it."""
        _, record = read_record(self.consensus, self.key)
        return 0 if record is None else int(record["read_ts"])

    def apply_write(self, write_ts: int) -> None:
        """Writes at `write_ts` are durable: reads may now use it. Never
        moves read_ts back."""

        def apply(record: Record | None) -> Record:
            record = record or {"read_ts": 0, "write_ts": 0}
            return record | {
                "read_ts": max(record["read_ts"], write_ts),
                "write_ts": max(record["write_ts"], write_ts),
            }

        _, current = read_record(self.consensus, self.key)
        if current is not None and current["read_ts"] >= write_ts:
            return
        update_record(self.consensus, self.key, apply)
