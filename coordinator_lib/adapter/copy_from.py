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

Outside a transaction, into a table without unique constraints, the COPY
is columnar: the server's fast path (`server/copy_arrow.py`) hands whole
Arrow columns to `add_columns`, and records the Python decoder read are
converted and encoded as Arrow every `_ENCODE_ROWS` rows, so the COPY is
held as Arrow tables (tens of bytes a row) and committed as one table
write of them. Otherwise rows are kept as tuples until the commit (about
100-200 bytes a row of four columns).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.verify import verify_datum_desc
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.coercion import INT_RANGES, is_integer, parse_text_as
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.plans import CopyFromPlan
from coordinator_lib.sql.typmod import has_modifier, read_text

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session

Record = tuple[int, Sequence[str | None]]  # (line number, fields)
_VERIFY_CHUNK = 50_000
_ENCODE_ROWS = 50_000
S = ScalarType


def _converter(column: ColumnType) -> Callable[[str], Any] | None:
    """PostgreSQL's input function for the column's type, with fast paths
    for the common types that fall back to `parse_text_as` (and its errors)
    on anything odd; a value for a column with a type modifier (varchar(n),
    char(n), `interval hour`) is read and fitted to it (sql/typmod.py)."""
    if has_modifier(column):
        return lambda text: read_text(text, column)
    st = column.scalar_type
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
                value = float(text)
            except ValueError:
                return parse_text_as(text, st)
            if value == 0.0 or math.isinf(value):  # 1e-400 and 1e400 are 22003
                return parse_text_as(text, st)
            return value

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
        self._converters = [_converter(desc.types[c]) for c in plan.columns]
        self._fitted = any(has_modifier(desc.types[c]) for c in plan.columns)
        self._not_null = [not desc.types[c].nullable for c in plan.columns]
        # table position of each data column; the table's other columns are NULL
        self._slots = list(plan.columns)
        self._arity = desc.arity
        self.rows: list[tuple[Any, ...]] = []
        self.tables: list[pa.Table] = []  # encoded batch tables (columnar)
        constraints = coord.group_commit.constraints(plan.id)
        self.columnar = session.transaction is None and not (constraints and constraints[0])

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
        if self.columnar and len(self.rows) >= _ENCODE_ROWS:
            self._encode_rows()

    def add_columns(self, columns: pa.Table, redo: Callable[[], Iterable[Record]]) -> None:
        """Keep records decoded by the server's fast path: one Arrow column
        per data column (COPY order) of its column's type. `redo`: the same
        records from the Python decoder, read when a value breaks a rule of
        the table (a NULL in a NOT NULL column) to fail naming its line."""
        if not self.columnar or self.rows or self._fitted:
            self.add(redo())  # values to fit to a length go through the converters
            return
        schema = self.plan.desc.arrow_schema(with_time_diff=True)
        count = columns.num_rows
        given = dict(zip(self._slots, columns.columns, strict=True))
        arrays = []
        for i in range(self._arity):
            field = schema.field(i)
            column = given.get(i)
            if column is None:
                column = pa.chunked_array([pa.nulls(count, field.type)])
            if not field.nullable and column.null_count:
                self.add(redo())  # raises 23502 naming the line
                return
            arrays.append(column)
        arrays.append(pa.chunked_array([pa.repeat(pa.scalar(0, pa.int64()), count)]))
        arrays.append(pa.chunked_array([pa.repeat(pa.scalar(1, pa.int64()), count)]))
        self.tables.append(pa.Table.from_arrays(arrays, schema=schema))

    def _encode_rows(self) -> None:
        """Kept rows checked and encoded as a batch table (columnar COPY)."""
        rows, self.rows = self.rows, []
        if not rows:
            return
        verify_datum_desc(self.plan.desc, rows)
        encoded = self.coord.group_commit.encode({self.plan.id: [(row, 1) for row in rows]})
        self.tables.extend(encoded.values())

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
        if self.columnar:
            return self._finish_columnar()
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

    def _finish_columnar(self) -> int:
        self._encode_rows()
        tables, self.tables = self.tables, []
        count = sum(table.num_rows for table in tables)
        if count:
            encoded = {self.plan.id: pa.concat_tables(tables)}  # no copy: chunks stay
            with self.coord.write_lock.shared():
                self.coord.commit_writes({self.plan.id: []}, encoded)
        return count


__all__ = ["CopyIn", "Record"]
