"""COPY FROM STDIN's three data formats, read as PostgreSQL reads them
(`COPY` in its documentation, "File Formats"): the CopyData messages'
bytes in, records of text fields out (None: NULL), each with its line
number (binary: its tuple number), for `adapter.copy_from.CopyIn`.

Decoders are incremental: `feed(chunk)` returns the records completed by
the chunk and keeps only an unfinished line (or CSV record, or binary
tuple), so memory is bounded by the longest record, not by the COPY.
`finish()` returns what the last chunk left and checks the data ended
properly.

- text: lines end in `\\n` (or `\\r\\n`), fields split on the delimiter,
  the NULL string (default `\\N`) compared before de-escaping, backslash
  escapes `\\b \\f \\n \\r \\t \\v \\\\`, octal `\\ooo`, hex `\\xhh`, any other
  `\\c` is `c`; a line `\\.` ends the data.
- CSV: fields split on the delimiter, quoted with QUOTE (a quoted field may
  hold delimiters and newlines; ESCAPE before QUOTE or ESCAPE inside quotes
  is that character); an unquoted field equal to NULL is NULL, a quoted one
  never; HEADER skips the first line.
- binary: the `PGCOPY\\n\\377\\r\\n\\0` signature, flags and header extension,
  then tuples of int16 field count and int32-length-prefixed fields (-1:
  NULL), each converted to text by the column type's binary receive
  function (`pg_types.decode_param`); a count of -1 ends the data.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.server.pg_types import UnsupportedFormat, decode_param
from coordinator_lib.sql.plans import CopyFromPlan

Record = tuple[int, list[str | None]]

_BINARY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_BACKSLASH = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)


def _bad(table: str, message: str, line: int, code: str = "22P04") -> AdapterError:
    return AdapterError(message, code=code, context=f"COPY {table}, line {line}")


class _Lines:
    """Complete lines (without their end) from a stream of chunks."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.pending = b""
        self.line = 0  # number of the last line handed out

    def feed(self, chunk: bytes) -> list[str]:
        data = self.pending + chunk if self.pending else chunk
        parts = data.split(b"\n")
        self.pending = parts.pop()
        return [self._text(part) for part in parts]

    def rest(self) -> list[str]:
        rest, self.pending = self.pending, b""
        return [self._text(rest)] if rest else []

    def _text(self, raw: bytes) -> str:
        self.line += 1
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise _bad(
                self.table, "invalid byte sequence for encoding UTF8", self.line, "22021"
            ) from None


def _unescape(match: re.Match[str]) -> str:
    token = match.group(1)
    if token[0] == "x" and len(token) > 1:
        return chr(int(token[1:], 16))
    if token[0] in "01234567":
        return chr(int(token, 8) & 0xFF)
    return _SIMPLE_ESCAPES.get(token, token)


class TextDecoder:
    def __init__(self, table: str, delimiter: str, null: str, header: bool) -> None:
        self.delimiter = delimiter
        self.null = null
        self.skip = header
        self.lines = _Lines(table)
        self.ended = False

    def feed(self, chunk: bytes) -> list[Record]:
        return self._records(self.lines.feed(chunk))

    def finish(self) -> list[Record]:
        return self._records(self.lines.rest())

    def _records(self, lines: list[str]) -> list[Record]:
        first = self.lines.line - len(lines) + 1
        records: list[Record] = []
        delimiter, null = self.delimiter, self.null
        for n, line in enumerate(lines, first):
            if self.ended:
                continue  # PostgreSQL ignores what follows the end marker
            if self.skip:
                self.skip = False
                continue
            if line == "\\.":
                self.ended = True
                continue
            if "\\" not in line:
                records.append((n, [None if f == null else f for f in line.split(delimiter)]))
            else:
                records.append((n, self._split_escaped(line)))
        return records

    def _split_escaped(self, line: str) -> list[str | None]:
        """Split at delimiters not preceded by a backslash, then de-escape."""
        fields: list[str | None] = []
        start = i = 0
        delimiter, size = self.delimiter, len(line)
        while i < size:
            char = line[i]
            if char == "\\":
                i += 2
                continue
            if char == delimiter:
                fields.append(self._field(line[start:i]))
                start = i + 1
            i += 1
        fields.append(self._field(line[start:]))
        return fields

    def _field(self, raw: str) -> str | None:
        if raw == self.null:
            return None
        return _BACKSLASH.sub(_unescape, raw) if "\\" in raw else raw


class CsvDecoder:
    def __init__(
        self, table: str, delimiter: str, null: str, quote: str, escape: str, header: bool
    ) -> None:
        self.delimiter = delimiter
        self.null = null
        self.quote = quote
        self.escape = escape
        self.skip = header
        self.lines = _Lines(table)
        self.partial: str | None = None  # a quoted field's record, continued on the next line
        self.partial_line = 0
        self.ended = False

    def feed(self, chunk: bytes) -> list[Record]:
        return self._records(self.lines.feed(chunk))

    def finish(self) -> list[Record]:
        records = self._records(self.lines.rest())
        if self.partial is not None:
            raise _bad(self.lines.table, "unterminated CSV quoted field", self.partial_line)
        return records

    def _records(self, lines: list[str]) -> list[Record]:
        first = self.lines.line - len(lines) + 1
        records: list[Record] = []
        delimiter, null, quote = self.delimiter, self.null, self.quote
        for n, line in enumerate(lines, first):
            if self.ended:
                continue
            if self.partial is not None:
                line = self.partial + "\n" + line
                start_line = self.partial_line
            else:
                if line == "\\.":
                    self.ended = True
                    continue
                start_line = n
            fields = (
                [None if f == null else f for f in line.split(delimiter)]
                if quote not in line
                else self._split_quoted(line)
            )
            if fields is None:  # inside quotes at the end of the line
                self.partial, self.partial_line = line, start_line
                continue
            self.partial = None
            if self.skip:
                self.skip = False
                continue
            records.append((start_line, fields))
        return records

    def _split_quoted(self, line: str) -> list[str | None] | None:
        fields: list[str | None] = []
        delimiter, quote, escape = self.delimiter, self.quote, self.escape
        value: list[str] = []
        quoted = in_quotes = False
        i, size = 0, len(line)
        while i < size:
            char = line[i]
            if in_quotes:
                if (
                    char == escape
                    and i + 1 < size
                    and line[i + 1] in (quote, escape)
                    and (escape != quote or line[i + 1] == quote)
                ):
                    value.append(line[i + 1])
                    i += 2
                    continue
                if char == quote:
                    in_quotes = False
                else:
                    value.append(char)
            elif char == quote:
                in_quotes = quoted = True
            elif char == delimiter:
                fields.append(self._field(value, quoted))
                value, quoted = [], False
            else:
                value.append(char)
            i += 1
        if in_quotes:
            return None
        fields.append(self._field(value, quoted))
        return fields

    def _field(self, value: list[str], quoted: bool) -> str | None:
        text = "".join(value)
        return None if not quoted and text == self.null else text


class BinaryDecoder:
    def __init__(self, table: str, oids: Sequence[int]) -> None:
        self.table = table
        self.oids = list(oids)
        self.buffer = bytearray()
        self.header_done = False
        self.ended = False
        self.tuple = 0

    def feed(self, chunk: bytes) -> list[Record]:
        self.buffer += chunk
        return self._records()

    def finish(self) -> list[Record]:
        records = self._records()
        if not self.ended:
            raise _bad(self.table, "unexpected EOF in COPY data", self.tuple + 1)
        return records

    def _records(self) -> list[Record]:
        buffer = self.buffer
        pos = 0
        if not self.header_done:
            if len(buffer) < 19:
                return []
            if bytes(buffer[:11]) != _BINARY_SIGNATURE:
                raise _bad(self.table, "COPY file signature not recognized", 1)
            (extension,) = struct.unpack_from(">i", buffer, 15)
            if len(buffer) < 19 + extension:
                return []
            pos = 19 + extension
            self.header_done = True
        records: list[Record] = []
        while not self.ended and len(buffer) - pos >= 2:
            (count,) = struct.unpack_from(">h", buffer, pos)
            if count == -1:
                self.ended = True
                pos += 2
                break
            end, fields = self._tuple(buffer, pos + 2, count)
            if end < 0:
                break  # the rest of the tuple is in a later chunk
            self.tuple += 1
            records.append((self.tuple, fields))
            pos = end
        del buffer[:pos]
        return records

    def _tuple(self, buffer: bytearray, pos: int, count: int) -> tuple[int, list[str | None]]:
        fields: list[str | None] = []
        for i in range(count):
            if len(buffer) - pos < 4:
                return -1, []
            (length,) = struct.unpack_from(">i", buffer, pos)
            pos += 4
            if length == -1:
                fields.append(None)
                continue
            if len(buffer) - pos < length:
                return -1, []
            data = bytes(buffer[pos : pos + length])
            pos += length
            oid = self.oids[i] if i < len(self.oids) else 25
            try:
                fields.append(decode_param(data, 1, oid))
            except (ValueError, UnsupportedFormat) as error:
                raise AdapterError(
                    f"incorrect binary data format: {error}",
                    code="22P03",
                    context=f"COPY {self.table}, line {self.tuple + 1}, column {i + 1}",
                ) from None
        return pos, fields


Decoder = TextDecoder | CsvDecoder | BinaryDecoder


def copy_decoder(plan: CopyFromPlan, oids: Sequence[int]) -> Decoder:
    """The decoder for a COPY FROM's format and options; `oids`: the data
    columns' types (binary only)."""
    table = plan.name.item
    if plan.format == "binary":
        return BinaryDecoder(table, oids)
    if plan.format == "csv":
        return CsvDecoder(table, plan.delimiter, plan.null, plan.quote, plan.escape, plan.header)
    return TextDecoder(table, plan.delimiter, plan.null, plan.header)


__all__ = ["BinaryDecoder", "CsvDecoder", "Decoder", "Record", "TextDecoder", "copy_decoder"]
