"""COPY <table> FROM STDIN: the adapter's half.

The server decodes the client's bytes (text, CSV or binary; `server/copy_in.py`)
into records of text fields (None: NULL), each with its line number. A
`CopyIn` turns them into rows of the table's types with PostgreSQL's input
functions (`sql/coercion.parse_text_as`) and writes them all at `finish` as
one table write: one group commit, one timestamp, so a COPY lands whole or
not at all. A bad value fails the COPY with PostgreSQL's SQLSTATE (22P02,
22003, 22007, 23502; 22P04 for a wrong number of fields) and its context,
`COPY t, line 3, column b: "x"`. Inside BEGIN the rows join the
transaction's writes, as an INSERT's do.

Rows are kept as tuples until the commit, so memory grows with the COPY
(about 100-200 bytes a row of four columns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.verify import verify_datum_desc
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.coercion import INT_RANGES, is_integer, parse_text_as
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.plans import CopyFromPlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session

Record = tuple[int, Sequence[str | None]]  # (line number, fields)
_VERIFY_CHUNK = 50_000
S = ScalarType


def _converter(st: ScalarType) -> Callable[[str], Any] | None:
    """PostgreSQL's input function for `st`, with fast paths for the common
    types that fall back to `parse_text_as` (and its errors) on anything odd."""
    if st is S.TEXT:
        return None
    if is_integer(st):
        low, high = INT_RANGES[st]

        def integer(text: str) -> Any:
            try:
                value = int(text)
            except ValueError:
                return parse_text_as(text, st)
            if "_" in text or not text.isascii() or not low <= value <= high:
                return parse_text_as(text, st)
            return value

        return integer
    if st is S.DOUBLE:

        def double(text: str) -> Any:
            if "_" in text:
                return parse_text_as(text, st)
            try:
                return float(text)
            except ValueError:
                return parse_text_as(text, st)

        return double
    return lambda text: parse_text_as(text, st)


class CopyIn:
    """One COPY FROM STDIN in progress (see the module docstring)."""

    def __init__(self, coord: Coordinator, session: Session, plan: CopyFromPlan) -> None:
        self.coord = coord
        self.session = session
        self.plan = plan
        desc = plan.desc
        self.types = [desc.types[c].scalar_type for c in plan.columns]
        self.names = [desc.names[c] for c in plan.columns]
        self._converters = [_converter(st) for st in self.types]
        self._not_null = [not desc.types[c].nullable for c in plan.columns]
        # table position of each data column; the table's other columns are NULL
        self._slots = list(plan.columns)
        self._arity = desc.arity
        self.rows: list[tuple[Any, ...]] = []

    def _context(self, line: int, column: int | None, value: str | None = None) -> str:
        where = f"COPY {self.plan.name.item}, line {line}"
        if column is None:
            return where
        shown = "" if value is None else f': "{value}"'
        return f"{where}, column {self.names[column]}{shown}"

    def add(self, records: Iterable[Record]) -> None:
        """Convert and keep `records`; the first bad one fails the COPY."""
        width = len(self.types)
        converters = self._converters
        slots = self._slots
        full = slots == list(range(self._arity))
        append = self.rows.append
        for line, fields in records:
            if len(fields) != width:
                self._wrong_width(line, fields)
            values: list[Any] = list(fields)
            for i, text in enumerate(fields):
                if text is None:
                    if self._not_null[i]:
                        raise AdapterError(
                            f'null value in column "{self.names[i]}" of relation '
                            f'"{self.plan.name.item}" violates not-null constraint',
                            code="23502",
                            context=self._context(line, None),
                        )
                    continue
                convert = converters[i]
                if convert is not None:
                    try:
                        values[i] = convert(text)
                    except SqlError as error:
                        raise AdapterError(
                            error.message,
                            code=error.code,
                            context=self._context(line, i, text),
                        ) from None
            if full:
                append(tuple(values))
            else:
                row: list[Any] = [None] * self._arity
                for slot, value in zip(slots, values, strict=True):
                    row[slot] = value
                append(tuple(row))

    def _wrong_width(self, line: int, fields: Sequence[str | None]) -> None:
        width = len(self.types)
        if len(fields) > width:
            raise AdapterError(
                "extra data after last expected column",
                code="22P04",
                context=self._context(line, None),
            )
        missing = self.names[len(fields)]
        raise AdapterError(
            f'missing data for column "{missing}"',
            code="22P04",
            context=self._context(line, None),
        )

    def finish(self) -> int:
        """Write every row as one table write; the number of rows."""
        plan, rows = self.plan, self.rows
        for start in range(0, len(rows), _VERIFY_CHUNK):
            verify_datum_desc(plan.desc, rows[start : start + _VERIFY_CHUNK])
        changes = {plan.id: [(row, 1) for row in rows]}
        transaction = self.session.transaction
        if transaction is not None:
            written = transaction.writes.get(plan.id, [])
            self.coord.group_commit.check({plan.id: written + changes[plan.id]})
            transaction.writes.setdefault(plan.id, []).extend(changes[plan.id])
        elif rows:
            with self.coord.write_lock.shared():
                self.coord.commit_writes(changes)
        self.rows = []
        return len(rows)


__all__ = ["CopyIn", "Record"]
