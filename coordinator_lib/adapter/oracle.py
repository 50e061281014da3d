"""The timestamp oracle (Materialize's `TimestampOracle`), durable in consensus.

One record per timeline holds `read_ts` (the latest time every acknowledged
write is visible at) and `write_ts` (the latest time handed to a writer).
`write_ts()` returns a time after every earlier write and read time, and near
the wall clock; `apply_write(t)` makes `t` readable once its writes are
durable; `read_ts()` is the time a strict serializable read uses. Because both
are compare-and-set on one record, the oracle is monotonic across processes
(invariant 8): a second coordinator, or a restart, can never hand out an
earlier time.

Group commit folds both into its append: `propose_write_ts()` reads a time
without writing, and `claim(t)` is the record change (write_ts and read_ts
to t) that lands in the same compare-and-set as the shards' states, or is
refused with TimestampTaken if a time >= t was handed out meanwhile. One
durable step instead of three, and still monotonic: the claim is a
compare-and-set on the same record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from coordinator_lib.adapter.durable import Record, read_record, update_record
from coordinator_lib.persist.consensus import Consensus
from coordinator_lib.persist.machine import RecordChange

EPOCH_MILLISECONDS = "EpochMilliseconds"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class TimestampTaken(RuntimeError):
    """A claimed time is no longer after every time handed out: the writes
    at it must be made again at a fresh one."""


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

    def propose_write_ts(self) -> int:
        """The time `write_ts()` would hand out now, without handing it out:
        for writes that `claim` it in their own compare-and-set."""
        _, record = read_record(self.consensus, self.key)
        record = record or {"read_ts": 0, "write_ts": 0}
        return max(self.now(), max(record["write_ts"], record["read_ts"]) + 1)

    def claim(self, write_ts: int) -> RecordChange:
        """The oracle record's change that hands out `write_ts` and makes it
        readable at once (the writes at it land in the same compare-and-set);
        raises TimestampTaken, writing nothing, if a time >= `write_ts` was
        handed out since it was proposed."""

        def change(data: bytes | None) -> bytes:
            record = json.loads(data) if data is not None else {"read_ts": 0, "write_ts": 0}
            if max(record["write_ts"], record["read_ts"]) >= write_ts:
                raise TimestampTaken(f"time {write_ts} was handed out meanwhile")
            new = record | {"read_ts": write_ts, "write_ts": write_ts}
            return json.dumps(new, sort_keys=True).encode()

        return self.key, change

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
