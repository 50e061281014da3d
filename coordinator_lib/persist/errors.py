"""Typed errors of the persist layer. Every one is raised before anything is
written, or after a compare-and-set that changed nothing."""

from __future__ import annotations

import errno

from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.frontier import Frontier


class PersistError(Exception):
    """Base of every persist error."""


class UpperMismatch(PersistError):
    """compare_and_append's expected upper was not the shard's upper."""

    def __init__(self, shard_id: str, expected: Frontier, current: Frontier) -> None:
        super().__init__(
            f"shard {shard_id}: expected upper {expected!r} but the upper is {current!r}"
        )
        self.shard_id = shard_id
        self.expected = expected
        self.current = current


class InvalidUpdates(PersistError):
    """Updates or bounds that can never be appended (a time outside
    [expected_upper, new_upper), a row that does not fit the schema, ...).
    `row_error` is the bad row's InvalidRow, if a row was the problem."""

    def __init__(self, message: str, row_error: InvalidRow | None = None) -> None:
        super().__init__(message)
        self.row_error = row_error


class ReadBeforeSince(PersistError):
    def __init__(self, shard_id: str, as_of: int, since: Frontier) -> None:
        super().__init__(
            f"shard {shard_id}: cannot read at {as_of}: it is before the since {since!r}"
            " (that history has been compacted)"
        )
        self.shard_id = shard_id
        self.as_of = as_of
        self.since = since


class ReadBeyondUpper(PersistError):
    def __init__(self, shard_id: str, as_of: int, upper: Frontier) -> None:
        super().__init__(
            f"shard {shard_id}: cannot read at {as_of}: it is not before the upper {upper!r}"
            " (those times are not complete yet)"
        )
        self.shard_id = shard_id
        self.as_of = as_of
        self.upper = upper


class SchemaMismatch(PersistError):
    """A shard was opened with a RelationDesc other than the one it was created with."""


class ShardFinalized(PersistError):
    """The shard was finalized (since and upper empty, data deleted)."""


class LeaseExpired(PersistError):
    """A leased reader or writer stopped heart-beating long enough that its
    lease was revoked; its read hold no longer protects anything."""


class DiskFull(PersistError):
    """Blob or consensus storage ran out of space (ENOSPC, SQLite's
    SQLITE_FULL, PostgreSQL's 53100). Nothing was written: the batch being
    written was removed and no state names it. Writes succeed again once
    space is freed; no restart is needed."""


def is_disk_full(error: BaseException) -> bool:
    """Is `error` an out-of-space failure of the filesystem? (pyarrow's
    write errors are OSErrors carrying the errno only in their text.)"""
    if not isinstance(error, OSError):
        return False
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error).lower()
    return "no space left on device" in text or "disk quota exceeded" in text
