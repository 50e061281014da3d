"""Cursors (DECLARE ... CURSOR FOR, FETCH, CLOSE): a result a client reads
in pieces. A SELECT's cursor holds its finished rows; a SUBSCRIBE's holds the
subscription's RowStream, so FETCH waits (up to its timeout) for new rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from coordinator_lib.adapter.responses import ResultColumn
from coordinator_lib.adapter.stream import Row, RowStream


@dataclass
class Cursor:
    name: str
    columns: tuple[ResultColumn, ...]
    rows: Iterator[Row] | None = None  # a SELECT's rows
    stream: RowStream | None = None  # a SUBSCRIBE's rows
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def fetch(self, count: int | None, timeout_ms: int | None) -> list[Row]:
        """Up to `count` rows (all with None). FETCH 0 answers no rows at
        once: the cursors go forward only, so there is no current row to
        fetch again, and a subscription must not wait for a row it won't return."""
        if count == 0:
            return []
        if self.stream is not None:
            timeout_s = None if timeout_ms is None else timeout_ms / 1000
            return self.stream.take(count, timeout_s)
        assert self.rows is not None
        out: list[Row] = []
        for row in self.rows:
            out.append(row)
            if count is not None and len(out) >= count:
                break
        return out

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


# The cursors of the session whose statement is running: pg_catalog.pg_cursors
# lists them (psycopg's named cursor asks it before CLOSE).
session_cursors: ContextVar[dict[str, Cursor] | None] = ContextVar("session_cursors", default=None)

PG_CURSORS_COLUMNS = (
    ("name", "text", False),
    ("statement", "text", False),
    ("is_holdable", "boolean", False),
    ("is_binary", "boolean", False),
    ("is_scrollable", "boolean", False),
    ("creation_time", "timestamp with time zone", False),
)


def pg_cursors_rows(_: Any) -> list[tuple[Any, ...]]:
    """The running session's open cursors (not scrollable, not held past
    the transaction; the statement text is not kept)."""
    cursors = session_cursors.get() or {}
    return [(c.name, "", False, False, False, c.created_at) for c in cursors.values()]
