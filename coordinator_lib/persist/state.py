"""The durable state record of one shard, stored in consensus as JSON.

It names every live batch (blob data written durably before the state names
it, or, for a small batch, carried in the state itself: `BatchMeta.inline`), the
shard's `since` and `upper`, the leases of its readers and writers, the seqno
holds of readers that planned reads, and the batches compaction replaced
whose blobs such a reader may still read. The
state only changes through `Machine.apply` (compare-and-set on its seqno).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import RelationDesc


@dataclass(frozen=True)
class BatchMeta:
    """One immutable batch: its updates have times in [lower, upper), except
    that times before `since` may have been advanced to `since` (compaction).
    Frozen, so states share it: a copy of a state copies the list naming its
    batches, not each batch (`ShardState.copy`); a change is a new one
    (`dataclasses.replace`)."""

    key: str
    lower: int
    upper: int | None
    since: int
    rows: int
    bytes: int
    # A small batch's Parquet file, base64 (`Shard` inline batches): its
    # file was written without fsync, the state is what made it durable.
    inline: str | None = None


@dataclass
class LeasedReaderState:
    """A reader that holds `since` while it keeps heart-beating."""

    since: int | None
    heartbeat_ms: int
    lease_ms: int

    def expired(self, now_ms: int) -> bool:
        return self.heartbeat_ms + self.lease_ms < now_ms


@dataclass
class CriticalReaderState:
    """A reader whose hold never expires (the storage controller's)."""

    since: int | None


@dataclass
class WriterState:
    """A registered writer; its unreferenced blobs are safe from garbage
    collection while its lease is live (they may be about to be named)."""

    heartbeat_ms: int
    lease_ms: int

    def expired(self, now_ms: int) -> bool:
        return self.heartbeat_ms + self.lease_ms < now_ms


@dataclass
class SeqnoHold:
    """A reader that planned a read from the state at `seqno` (listed the
    blobs it names, e.g. for a lazy Spark job): no blob named by any state
    at or after `seqno` is deleted while the hold is held and its lease live.
    It lives in the state, so it binds garbage collection in every process."""

    seqno: int
    heartbeat_ms: int
    lease_ms: int

    def expired(self, now_ms: int) -> bool:
        return self.heartbeat_ms + self.lease_ms < now_ms


@dataclass(frozen=True)
class RetiredBatch:
    """A batch compaction replaced; `seqno` is the first state that no longer
    names it. Its blob is deleted only once every seqno hold is at or after
    `seqno` (no reader can still plan it)."""

    key: str
    seqno: int


@dataclass
class ShardState:
    shard_id: str
    desc: RelationDesc
    seqno: int = 0
    since: int | None = 0
    upper: int | None = 0
    batches: list[BatchMeta] = field(default_factory=list)
    leased_readers: dict[str, LeasedReaderState] = field(default_factory=dict)
    critical_readers: dict[str, CriticalReaderState] = field(default_factory=dict)
    writers: dict[str, WriterState] = field(default_factory=dict)
    seqno_holds: dict[str, SeqnoHold] = field(default_factory=dict)
    retired: list[RetiredBatch] = field(default_factory=list)
    finalized: bool = False
    # Identifies the transition that wrote this state, so a writer whose
    # compare-and-set had an unknown outcome can tell whether it landed.
    op_id: str = ""

    @property
    def since_frontier(self) -> Frontier:
        return Frontier(self.since)

    @property
    def upper_frontier(self) -> Frontier:
        return Frontier(self.upper)

    def expire_leases(self, now_ms: int) -> None:
        """Drop readers and writers whose leases ran out, then recompute since."""
        self.leased_readers = {
            rid: r for rid, r in self.leased_readers.items() if not r.expired(now_ms)
        }
        self.writers = {wid: w for wid, w in self.writers.items() if not w.expired(now_ms)}
        self.seqno_holds = {hid: h for hid, h in self.seqno_holds.items() if not h.expired(now_ms)}
        self.recompute_since()

    def deletable_retired(self, now_ms: int) -> list[str]:
        """Keys of retired batches no live seqno hold can have planned: every
        live hold read a state at or after the one that dropped them."""
        holds = [h.seqno for h in self.seqno_holds.values() if not h.expired(now_ms)]
        least = min(holds, default=None)
        return [r.key for r in self.retired if least is None or r.seqno <= least]

    def recompute_since(self) -> None:
        """since = the least hold of any reader, capped at the upper (since <=
        upper unless both are empty); it never goes backwards and stays where
        it is while nobody holds anything."""
        holds = [Frontier(r.since) for r in self.leased_readers.values()]
        holds += [Frontier(r.since) for r in self.critical_readers.values()]
        if not holds:
            return
        target = min(min(holds), self.upper_frontier)
        self.since = max(self.since_frontier, target).time

    def to_bytes(self) -> bytes:
        """Every commit writes the state, so its parts are written as their
        fields (all plain values: `vars`), not through `dataclasses.asdict`'s
        recursive deep copy, which was a fifth of a one-row INSERT's CPU; a
        batch's JSON is made once (`_batch_json`: an inline batch's base64
        would otherwise be escaped again by every commit)."""
        data: dict[str, Any] = {
            "shard_id": self.shard_id,
            "desc": self.desc.to_json(),
            "seqno": self.seqno,
            "since": self.since,
            "upper": self.upper,
            "leased_readers": {k: vars(v) for k, v in self.leased_readers.items()},
            "critical_readers": {k: vars(v) for k, v in self.critical_readers.items()},
            "writers": {k: vars(v) for k, v in self.writers.items()},
            "seqno_holds": {k: vars(v) for k, v in self.seqno_holds.items()},
            "retired": [vars(r) for r in self.retired],
            "finalized": self.finalized,
            "op_id": self.op_id,
        }
        text = json.dumps(data, separators=(",", ":"))
        batches = ",".join(_batches_json(self))
        return f'{text[:-1]},"batches":[{batches}]}}'.encode()

    def copy(self) -> ShardState:
        """A copy whose parts can be changed without touching this one (its
        batches and retired batches are frozen, so shared: cloning each
        batch of every state a commit starts from was 7% of the server's
        GIL time at 32 pgbench clients, with dozens of inline batches)."""
        return ShardState(
            shard_id=self.shard_id,
            desc=self.desc,
            seqno=self.seqno,
            since=self.since,
            upper=self.upper,
            batches=list(self.batches),
            leased_readers={k: _clone(v) for k, v in self.leased_readers.items()},
            critical_readers={k: _clone(v) for k, v in self.critical_readers.items()},
            writers={k: _clone(v) for k, v in self.writers.items()},
            seqno_holds={k: _clone(v) for k, v in self.seqno_holds.items()},
            retired=list(self.retired),
            finalized=self.finalized,
            op_id=self.op_id,
        )

    @staticmethod
    def from_bytes(raw: bytes) -> ShardState:
        data = json.loads(raw)
        return ShardState(
            shard_id=data["shard_id"],
            desc=RelationDesc.from_json(data["desc"]),
            seqno=data["seqno"],
            since=data["since"],
            upper=data["upper"],
            batches=[BatchMeta(**b) for b in data["batches"]],
            leased_readers={k: LeasedReaderState(**v) for k, v in data["leased_readers"].items()},
            critical_readers={
                k: CriticalReaderState(**v) for k, v in data["critical_readers"].items()
            },
            writers={k: WriterState(**v) for k, v in data["writers"].items()},
            seqno_holds={k: SeqnoHold(**v) for k, v in data.get("seqno_holds", {}).items()},
            retired=[RetiredBatch(**r) for r in data.get("retired", [])],
            finalized=data["finalized"],
            op_id=data.get("op_id", ""),
        )


_Part = TypeVar("_Part")

# Each shard's live batches' JSON, by batch object (a batch is frozen, and
# states share it: `ShardState.copy`), the batch itself kept beside its text
# so its id cannot be reused while the entry lives. Each commit keeps the
# entries of its own batches only: the memo holds what the shard's state
# holds, and a batch compaction replaced is forgotten at the next commit.
# (Keyed by fields across shards and cleared only at 4,096 entries, it kept
# up to 4,096 dead batches' base64 alive: the in-process soak's heap rose
# about 2.5 MB a minute until it was cleared, issue 18. Keyed by each
# batch's fields, building the keys was most of the memo's cost.)
_BATCH_JSON: dict[str, dict[int, tuple[BatchMeta, str]]] = {}


def _batches_json(state: ShardState) -> list[str]:
    """Each of `state`'s batches as JSON, made once while the batch is live."""
    known = _BATCH_JSON.get(state.shard_id, {})
    live: dict[int, tuple[BatchMeta, str]] = {}
    texts: list[str] = []
    for batch in state.batches:
        entry = known.get(id(batch))
        if entry is None or entry[0] is not batch:
            entry = (batch, _encode_batch(batch))
        live[id(batch)] = entry
        texts.append(entry[1])
    if state.finalized:
        _BATCH_JSON.pop(state.shard_id, None)
    else:
        _BATCH_JSON[state.shard_id] = live
    return texts


def _encode_batch(batch: BatchMeta) -> str:
    """`batch` as JSON; its inline base64 goes in as it is: base64 has no
    character JSON escapes, and scanning 16 KiB for them was most of a
    webhook commit's encoding."""
    fields = vars(batch)
    inline = fields["inline"]
    if inline is None:
        return json.dumps(fields, separators=(",", ":"))
    rest = json.dumps({k: v for k, v in fields.items() if k != "inline"}, separators=(",", ":"))
    return f'{rest[:-1]},"inline":"{inline}"}}'


def _clone(part: _Part) -> _Part:
    """A copy of one of the state's parts (dataclasses of plain values)."""
    new = object.__new__(type(part))
    new.__dict__.update(vars(part))
    return new
