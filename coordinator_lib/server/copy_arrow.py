"""COPY FROM STDIN's columnar fast path: text and CSV data read by
pyarrow.csv straight into Arrow columns of the table's types, a piece of
whole lines at a time, wherever pyarrow reads exactly what PostgreSQL reads.

The Python decoder (`server/copy_in.py`) stays the reference: it reads
every piece the fast path cannot vouch for, and any piece pyarrow rejects,
so a bad value fails with PostgreSQL's SQLSTATE and its line and column.
Both share one line count, and the Python decoder is fed every byte the
fast path does not take, in order, so its state (a header to skip, a quoted
field continued on the next line, the `\\.` end marker) stays exact.

A piece takes the fast path only if every data column is smallint,
integer, bigint, double precision, text or date, and the piece has none
of: the quote character (CSV; PostgreSQL opens quotes anywhere in a field,
pyarrow only at its start), a carriage return, a NUL byte, `\\.`, and (text
format) a backslash other than the NULL marker's own. Values pyarrow
parses differently from PostgreSQL are checked after the parse: a double
that came out infinite, NaN, or zero from a text with an exponent (1e400,
1e-400: 22003 in PostgreSQL) and a date before year 1 send the piece to
the Python decoder. Integers out of range, malformed numbers or dates,
invalid UTF-8 and a wrong number of fields make pyarrow fail; the Python
decoder then reads the piece and raises PostgreSQL's error.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.server.copy_in import CsvDecoder, Record, TextDecoder
from coordinator_lib.sql.plans import CopyFromPlan

S = ScalarType
FAST_TYPES = frozenset({S.SMALLINT, S.INTEGER, S.BIGINT, S.DOUBLE, S.TEXT, S.DATE})
PIECE_BYTES = 8 << 20
_YEAR_ONE = dt.date(1, 1, 1)


@dataclass
class ArrowPiece:
    """Decoded records: one Arrow column per data column (COPY order), of
    the column's type, read from `raw`, whose first line is `first_line`."""

    table: pa.Table
    raw: bytes
    first_line: int


Piece = ArrowPiece | list[Record]


def fast_path_applies(plan: CopyFromPlan, types: list[ScalarType]) -> bool:
    """Whether a COPY's format, options and column types allow the fast path."""
    if plan.format not in ("text", "csv") or not types:
        return False
    if not all(st in FAST_TYPES for st in types):
        return False
    single = (plan.delimiter, plan.quote) if plan.format == "csv" else (plan.delimiter,)
    if any(len(c) != 1 or not c.isascii() or c in "\r\n\\" for c in single):
        return False
    return plan.format == "text" or plan.escape == plan.quote


class ArrowCopyReader:
    """Feeds a COPY's bytes to pyarrow piece by piece, falling back to the
    Python decoder `decoder` (see the module docstring)."""

    def __init__(
        self, plan: CopyFromPlan, types: list[ScalarType], decoder: TextDecoder | CsvDecoder
    ) -> None:
        self.plan = plan
        self.types = types
        self.decoder = decoder
        self.buffer = bytearray()
        self.csv = plan.format == "csv"
        self.null = plan.null.encode()
        names = [f"c{i}" for i in range(len(types))]
        self._names = names
        self._read = pacsv.ReadOptions(column_names=names, block_size=PIECE_BYTES + (1 << 20))
        self._parse = pacsv.ParseOptions(
            delimiter=plan.delimiter,
            quote_char=plan.quote if self.csv else False,
            double_quote=self.csv,
            escape_char=False,
            newlines_in_values=False,
            ignore_empty_lines=False,
        )
        self._convert = pacsv.ConvertOptions(
            column_types={
                name: pa.string() if st is S.DOUBLE else st.to_arrow()
                for name, st in zip(names, types, strict=True)
            },
            null_values=[plan.null],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            check_utf8=True,
        )

    def feed(self, chunk: bytes) -> list[Piece]:
        self.buffer += chunk
        if len(self.buffer) < PIECE_BYTES:
            return []
        cut = self.buffer.rfind(b"\n") + 1
        if cut == 0:
            return []
        piece = bytes(self.buffer[:cut])
        del self.buffer[:cut]
        return self._piece(piece)

    def finish(self) -> list[Piece]:
        piece, self.buffer = bytes(self.buffer), bytearray()
        pieces = self._piece(piece) if piece else []
        rest = self.decoder.finish()
        return [*pieces, rest] if rest else pieces

    def redo(self, piece: bytes, first_line: int) -> list[Record]:
        """A piece's records by the Python decoder (its line count rewound):
        for locating a value the table refuses (e.g. a NULL in NOT NULL)."""
        decoder = self.decoder
        decoder.lines.line = first_line - 1
        records = decoder.feed(piece)
        return [*records, *decoder.finish()]

    def _piece(self, piece: bytes) -> list[Piece]:
        decoder = self.decoder
        if decoder.skip and not decoder.ended:  # HEADER: its line goes to the decoder
            end = piece.find(b"\n") + 1 or len(piece)
            head = decoder.feed(piece[:end])
            piece = piece[end:]
            if not piece:
                return [head] if head else []
        if decoder.ended:
            return []
        table = self._fast(piece)
        if table is None:
            return [decoder.feed(piece)]
        first = decoder.lines.line + 1
        decoder.lines.line += piece.count(b"\n") + (0 if piece.endswith(b"\n") else 1)
        return [ArrowPiece(table, piece, first)]

    def _fast(self, piece: bytes) -> pa.Table | None:
        """The piece as Arrow columns, or None where only the Python decoder
        reads it as PostgreSQL does."""
        decoder = self.decoder
        if decoder.skip or (isinstance(decoder, CsvDecoder) and decoder.partial is not None):
            return None
        if b"\r" in piece or b"\x00" in piece or b"\\." in piece:
            return None
        if self.csv and self.plan.quote.encode() in piece:
            return None
        backslashes = 0 if self.csv else piece.count(b"\\")
        per_null = self.null.count(b"\\")
        if backslashes and not per_null:
            return None
        try:
            table = pacsv.read_csv(
                pa.py_buffer(piece),
                read_options=self._read,
                parse_options=self._parse,
                convert_options=self._convert,
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
            return None
        if backslashes and backslashes != per_null * sum(c.null_count for c in table.columns):
            return None  # a backslash escape somewhere: PostgreSQL would de-escape it
        columns = []
        for column, st in zip(table.columns, self.types, strict=True):
            if st is S.DOUBLE:
                column = _double(column)
                if column is None:
                    return None
            elif st is S.DATE and column.null_count < len(column):
                low = pc.min(column).as_py()
                if low is not None and low < _YEAR_ONE:
                    return None
            columns.append(column)
        return pa.table(columns, names=self._names)


def _double(text: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """Text parsed as float8 where the parse agrees with PostgreSQL's."""
    try:
        values = pc.cast(text, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if pc.any(pc.or_(pc.is_inf(values), pc.is_nan(values))).as_py():
        return None
    zeros = pc.equal(values, 0.0)
    if pc.any(zeros).as_py():
        texts = pc.filter(text, zeros)
        if pc.any(pc.match_substring_regex(texts, "[eE]")).as_py():
            return None  # maybe an underflow, 22003 in PostgreSQL
    return values


__all__ = ["ArrowCopyReader", "ArrowPiece", "Piece", "fast_path_applies"]
