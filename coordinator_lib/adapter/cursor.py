"""Cursors (DECLARE ... CURSOR FOR, FETCH, CLOSE): a result a client reads
in pieces. A SELECT's cursor holds its finished rows; a SUBSCRIBE's holds the
subscription's RowStream, so FETCH waits (up to its timeout) for new rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from coordinator_lib.adapter.responses import ResultColumn
from coordinator_lib.adapter.stream import Row, RowStream


@dataclass
class Cursor:
    name: str
    columns: tuple[ResultColumn, ...]
    rows: Iterator[Row] | None = None  # a SELECT's rows
    stream: RowStream | None = None  # a SUBSCRIBE's rows

    def fetch(self, count: int | None, timeout_ms: int | None) -> list[Row]:
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
