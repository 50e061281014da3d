"""Machine: the one place a shard's state changes.

`apply(transition)` reads the state, runs a pure transition on a copy and
writes it back with compare-and-set on the seqno, retrying on a lost race.
A transition either returns a result with no change, changes the state, or
raises (and then nothing is written). `apply_all` does the same for several
shards at once: one compare-and-set of all their states, so a commit to many
shards lands everywhere or nowhere; other records of the same consensus (the
timestamp oracle's) can join that compare-and-set as `RecordChange`s.
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from coordinator_lib.persist.consensus import (
    Consensus,
    ConsensusError,
    KeyChange,
    VersionedData,
)
from coordinator_lib.persist.errors import ShardFinalized
from coordinator_lib.persist.state import ShardState
from coordinator_lib.repr.timestamp import now_ms

T = TypeVar("T")

# A transition returns (changed, result); `changed` False means "write nothing".
Transition = Callable[[ShardState, int], tuple[bool, T]]
# A record outside the shards changed in the same compare-and-set: its key and
# a pure function from its current bytes (None: absent) to its new bytes; it
# may raise to write nothing anywhere.
RecordChange = tuple[str, Callable[[bytes | None], bytes]]

SHARD_KEY_PREFIX = "shard/"


def shard_key(shard_id: str) -> str:
    return f"{SHARD_KEY_PREFIX}{shard_id}"


class Machine:
    """Reads and changes one shard's state in consensus."""

    def __init__(self, consensus: Consensus, shard_id: str) -> None:
        self.consensus = consensus
        self.shard_id = shard_id
        self.key = shard_key(shard_id)

    def fetch(self) -> ShardState | None:
        head = self.consensus.head(self.key)
        return None if head is None else decode(self.consensus, self.key, head)

    def recent_state(self) -> ShardState:
        """The state this process last read or wrote, without a consensus
        read (the current one if it has none): for checks that only fail
        fast, which the compare-and-set makes again. Not to be changed."""
        head = _KNOWN.get(self.consensus, {}).get(self.key)
        if head is None:
            return self.current_state()
        return _decoded(self.consensus, self.key, head)  # read only: no copy

    def state(self) -> ShardState:
        """The current state, a copy of its own to change; the shard must exist."""
        return self.current_state().copy()

    def current_state(self) -> ShardState:
        """The current state (a consensus read) shared as decoded, for
        reading one of its fields: frontiers are read on every step of every
        dataflow, and copying the state for them cost a quarter of an
        in-process step round. Not to be changed; the shard must exist."""
        head = self.consensus.head(self.key)
        if head is None:
            raise KeyError(f"shard {self.shard_id} does not exist")
        return _decoded(self.consensus, self.key, head)

    def create_if_missing(self, initial: ShardState) -> ShardState:
        """Create the shard with `initial` unless it exists; return the state."""
        while True:
            current = self.fetch()
            if current is not None:
                return current
            initial.seqno = 1
            if self.consensus.compare_and_set(self.key, None, VersionedData(1, initial.to_bytes())):
                return initial

    def apply(self, transition: Transition[T], *, allow_finalized: bool = False) -> T:
        result: T = apply_all([(self, transition)], allow_finalized=allow_finalized)[0]
        return result

    def forget(self) -> None:
        """Drop this process's cached value and decoded state of the shard
        (`_KNOWN`, `_DECODED`): once it is finalized nothing writes it again,
        and they would otherwise stay for the process's life, one per shard
        ever dropped."""
        for cache in (_KNOWN, _DECODED):
            cached = cache.get(self.consensus)
            if cached is not None:
                cached.pop(self.key, None)

    def _landed(self, op_id: str) -> bool:
        for _ in range(10):
            try:
                current = self.fetch()
            except ConsensusError:
                time.sleep(0.1)
                continue
            return current is not None and current.op_id == op_id
        return False


# Per consensus, the value this process last read or wrote of each key:
# `apply_all` runs its transitions on it first, so a commit to a shard only
# this process writes needs no consensus read before its compare-and-set; a
# lost race, a transition that raises or changes nothing on it re-reads.
_KNOWN: weakref.WeakKeyDictionary[Consensus, dict[str, VersionedData]] = weakref.WeakKeyDictionary()
# Per consensus, each shard's state as last decoded, with the bytes it was
# decoded from: a state is JSON as long as its inline batches, and every
# commit would otherwise parse it again (twice before the compare-and-set).
_DECODED: weakref.WeakKeyDictionary[Consensus, dict[str, tuple[bytes, ShardState]]] = (
    weakref.WeakKeyDictionary()
)


def decode(consensus: Consensus, key: str, head: VersionedData) -> ShardState:
    """`head`'s state, a copy of its own to change (decoded once per value)."""
    return _decoded(consensus, key, head).copy()


def _decoded(consensus: Consensus, key: str, head: VersionedData) -> ShardState:
    """`head`'s state as decoded once, shared: never to be changed."""
    decoded = _DECODED.setdefault(consensus, {})
    cached = decoded.get(key)
    if cached is None or cached[0] != head.data:
        cached = (bytes(head.data), ShardState.from_bytes(head.data))
        decoded[key] = cached
    return cached[1]


def apply_all(
    steps: Sequence[tuple[Machine, Transition[Any]]],
    *,
    allow_finalized: bool = False,
    records: Sequence[RecordChange] = (),
) -> list[Any]:
    """Run one transition per shard (all in one consensus, each shard once)
    and write every changed state, and every record of `records`, in one
    `Consensus.compare_and_set_all`: all of them land or none does. A lost
    race on any shard or record re-reads them all and runs every transition
    again; a transition or record change that raises writes nothing
    anywhere. Returns the transitions' results in order."""
    consensus = steps[0][0].consensus
    known = _KNOWN.setdefault(consensus, {})
    keys = [machine.key for machine, _ in steps] + [key for key, _ in records]
    optimistic = all(key in known for key in keys)

    def head_of(key: str) -> VersionedData | None:
        if optimistic:
            return known[key]
        head = consensus.head(key)
        if head is not None:
            known[key] = head
        return head

    while True:
        now = now_ms()
        op_id = uuid.uuid4().hex
        results: list[Any] = []
        changes: list[KeyChange] = []
        states: dict[str, ShardState] = {}  # each changed shard's new state
        landed_on: Machine | None = None
        try:
            for machine, transition in steps:
                head = head_of(machine.key)
                if head is None:
                    raise KeyError(f"shard {machine.shard_id} does not exist")
                state = decode(consensus, machine.key, head)
                if state.finalized and not allow_finalized:
                    raise ShardFinalized(f"shard {machine.shard_id} is finalized")
                changed, result = transition(state, now)
                results.append(result)
                if changed:
                    state.seqno = head.seqno + 1
                    state.op_id = op_id
                    new = VersionedData(state.seqno, state.to_bytes())
                    changes.append(KeyChange(machine.key, head.seqno, new))
                    states[machine.key] = state
                    landed_on = landed_on or machine
            if landed_on is None:
                if optimistic:  # nothing to check the answer against: read
                    optimistic = False
                    continue
                if records:
                    raise ValueError("record changes need a shard change to land with")
                return results
            for key, change in records:
                head = head_of(key)
                data = change(None if head is None else head.data)
                seqno = 1 if head is None else head.seqno + 1
                changes.append(
                    KeyChange(key, None if head is None else head.seqno, VersionedData(seqno, data))
                )
        except Exception:
            if optimistic:  # perhaps refused a stale value: decide on the current one
                optimistic = False
                continue
            raise
        try:
            if consensus.compare_and_set_all(changes):
                decoded = _DECODED.setdefault(consensus, {})
                for written in changes:
                    known[written.key] = written.new
                    if written.key in states:  # the next commit starts from it, not a parse
                        decoded[written.key] = (written.new.data, states[written.key])
                return results
        except ConsensusError:
            for key in keys:
                known.pop(key, None)
            # Unknown outcome: it landed iff a changed shard's head now
            # carries our op_id (one is enough: all landed or none did).
            if landed_on._landed(op_id):
                return results
            raise
        optimistic = False
        time.sleep(0)  # lost a race: re-read and retry
