"""Typed errors of the storage controller; each message names the collection."""

from __future__ import annotations

from collections.abc import Sequence

from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId


class StorageError(Exception):
    """Base of every storage controller error."""


class IdentifierMissing(StorageError):
    def __init__(self, id: GlobalId) -> None:
        super().__init__(f"collection identifier is not present: {id}")
        self.id = id


class IdentifierExists(StorageError):
    def __init__(self, id: GlobalId) -> None:
        super().__init__(f"collection identifier already exists: {id}")
        self.id = id


class InvalidUppers(StorageError):
    """An append's expected upper was not the collection's upper. Carries the
    current upper of every collection that mismatched."""

    def __init__(self, mismatches: Sequence[tuple[GlobalId, Frontier, Frontier]]) -> None:
        parts = [
            f"{id}: expected upper {expected!r}, current upper {current!r}"
            for id, expected, current in mismatches
        ]
        super().__init__("invalid uppers: " + "; ".join(parts))
        self.mismatches = list(mismatches)

    @property
    def current_uppers(self) -> dict[GlobalId, Frontier]:
        return {id: current for id, _, current in self.mismatches}


class UpdateBeyondUpper(StorageError):
    """An appended update's time is at or beyond the batch's new upper."""

    def __init__(self, id: GlobalId, detail: str) -> None:
        super().__init__(f"update beyond upper in {id}: {detail}")
        self.id = id


class InvalidUpdate(StorageError):
    """An appended update can never land: its row does not fit the collection's
    RelationDesc (`row_error` says how), or its time is before the expected
    upper."""

    def __init__(self, id: GlobalId, detail: str, row_error: InvalidRow | None = None) -> None:
        super().__init__(f"invalid update to {id}: {detail}")
        self.id = id
        self.row_error = row_error


class ReadBeforeSince(StorageError):
    def __init__(self, id: GlobalId, as_of: int, since: Frontier) -> None:
        super().__init__(
            f"read of {id} at {as_of} is before its since {since!r}: that history was compacted"
        )
        self.id = id
        self.as_of = as_of
        self.since = since


class ReadBeyondUpper(StorageError):
    def __init__(self, id: GlobalId, as_of: int, upper: Frontier) -> None:
        super().__init__(
            f"read of {id} at {as_of} is not before its upper {upper!r}: not yet complete"
        )
        self.id = id
        self.as_of = as_of
        self.upper = upper


class NotWritable(StorageError):
    """append() was asked to write a collection whose writer is not the
    storage controller (an ingestion or a materialized view's output)."""

    def __init__(self, id: GlobalId, kind: str) -> None:
        super().__init__(f"collection {id} is a {kind} collection; append only writes tables")
        self.id = id
