"""Consensus: a map from keys to versioned values, changed only by
compare-and-set on a sequence number (Materialize persist's `Consensus`).

Everything durable that is not blob data lives here: shard states, the
catalog, the timestamp oracle, leases. Backends: SQLite (embedded default)
and PostgreSQL (scale-out); `open_consensus(url)` picks one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

SeqNo = int


@dataclass(frozen=True)
class VersionedData:
    seqno: SeqNo
    data: bytes


@dataclass(frozen=True)
class KeyChange:
    """One key's part of `compare_and_set_all`: set `key` to `new` iff its
    seqno is `expected` (None: the key does not exist)."""

    key: str
    expected: SeqNo | None
    new: VersionedData


class ConsensusError(RuntimeError):
    """The backend failed (I/O, connection). The outcome of a compare_and_set
    that raised this is unknown: callers must re-read `head` to learn it."""


class ConsensusBusy(ConsensusError):
    """Another process held the store's write lock past the busy timeout;
    the refused change wrote nothing."""


def check_key(key: str) -> None:
    """Refuse keys (and prefixes) every backend cannot store: PostgreSQL text
    cannot hold NUL, so no backend accepts it and all of them agree."""
    if "\x00" in key:
        raise ValueError("consensus keys must not contain NUL characters")


def check_changes(changes: Sequence[KeyChange]) -> None:
    """Refuse what no backend may do: a repeated key (one change would see
    the other's write), a bad key or a seqno that does not increase."""
    keys = [change.key for change in changes]
    if len(set(keys)) != len(keys):
        raise ValueError("compare_and_set_all names a key more than once")
    for change in changes:
        check_key(change.key)
        if change.expected is not None and change.new.seqno <= change.expected:
            raise ValueError(
                f"new seqno {change.new.seqno} of {change.key!r} must be greater than"
                f" expected {change.expected}"
            )


class Consensus(ABC):
    """A key-value store where each key holds one current value and its seqno."""

    @abstractmethod
    def head(self, key: str) -> VersionedData | None:
        """The current value of `key`, or None if it was never set (or deleted)."""

    def seqno(self, key: str) -> SeqNo | None:
        """The current seqno of `key` without its value (None: absent): a
        check that a record moved costs one small read, not the record."""
        head = self.head(key)
        return None if head is None else head.seqno

    @abstractmethod
    def compare_and_set(self, key: str, expected: SeqNo | None, new: VersionedData) -> bool:
        """Set `key` to `new` iff its current seqno is `expected` (None: the key
        does not exist). `new.seqno` must be greater than `expected`. Returns
        True on success, False (changing nothing) on a seqno mismatch."""

    @abstractmethod
    def compare_and_set_all(self, changes: Sequence[KeyChange]) -> bool:
        """Every change's compare_and_set in one atomic step (one database
        transaction): all land, or none does (False) if any key's seqno is
        not its expected one. Keys must be distinct. This is what makes a
        commit to several shards all or nothing."""

    @abstractmethod
    def list_keys(self, prefix: str = "") -> list[str]:
        """Every existing key that starts with `prefix`, sorted."""

    @abstractmethod
    def delete(self, key: str, expected: SeqNo) -> bool:
        """Remove `key` iff its seqno is `expected`. True on success."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. The object is unusable afterwards."""


def open_consensus(url: str) -> Consensus:
    """`sqlite:///abs/path.db`, `sqlite:relative.db`, a bare path (SQLite), or
    `postgresql://...` / `postgres://...`."""
    if url.startswith(("postgresql://", "postgres://")):
        from coordinator_lib.persist.postgres_consensus import PostgresConsensus

        return PostgresConsensus(url)
    path = url
    if url.startswith("sqlite:///"):
        path = url[len("sqlite://") :]
    elif url.startswith("sqlite:"):
        path = url[len("sqlite:") :]
    from coordinator_lib.persist.sqlite_consensus import SqliteConsensus

    return SqliteConsensus(path)
