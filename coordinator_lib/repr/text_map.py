"""Values of Materialize's `map[text=>T]`: text keys to values of T (or
NULL), unordered, keys unique. A value is carried as its canonical JSON
object text (keys sorted), so storage, Spark and equality treat it as a
string, as jsonb is; it prints in Materialize's map syntax, `{a=>1,b=>NULL}`.
Each value is held as a string: its type's text output (`entry_text`: one
canonical text per value, so equal maps are equal strings), a map's value as
that map's own carried text. `m -> key` reads it back with T's text input.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from coordinator_lib.repr.numeric import numeric_display
from coordinator_lib.repr.relation import ScalarType

# A key or value printed bare: no character map syntax or whitespace reads.
_BARE = re.compile(r'[^\s{}",\\=>]+')


def map_value(entries: Mapping[str, str | None]) -> str:
    """The carried value of a map with `entries`."""
    return json.dumps(dict(entries), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def map_entries(value: str) -> dict[str, str | None]:
    entries: dict[str, str | None] = json.loads(value)
    return entries


def _element_text(text: str, is_value: bool) -> str:
    if _BARE.fullmatch(text) and not (is_value and text.upper() == "NULL"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def entry_text(value: Any, st: ScalarType) -> str:
    """How a map holds `value` of its value type `st`: the type's text output
    (booleans `t` / `f`, numerics without trailing zeros), a map's or a jsonb's
    own carried text."""
    if st is ScalarType.BOOLEAN:
        return "t" if value else "f"
    if st is ScalarType.NUMERIC:
        return format(numeric_display(value), "f")
    if st is ScalarType.DOUBLE:
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if float(value).is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(float(value))
    if st in (ScalarType.SMALLINT, ScalarType.INTEGER, ScalarType.BIGINT):
        return str(int(value))
    return str(value)


def format_map(value: str, value_type: ScalarType = ScalarType.TEXT) -> str:
    """Materialize's text output: `{a=>1,"b c"=>NULL}`, keys in order; a map
    of maps prints its values bare, `{a=>{b=>1}}`."""
    inner = value_type.map_value
    parts = []
    for key, item in sorted(map_entries(value).items()):
        if item is None:
            shown = "NULL"
        elif inner is not None:
            shown = format_map(item, inner)
        else:
            shown = _element_text(item, True)
        parts.append(f"{_element_text(key, False)}=>{shown}")
    return "{" + ",".join(parts) + "}"


class MapSyntaxError(ValueError):
    pass


def parse_map(text: str) -> str:
    """`{a=>1, "b c"=>NULL}` (Materialize's map input) as a carried value of
    map[text=>text]; MapSyntaxError if it is not one. A later duplicate key wins."""
    return map_value(parse_map_entries(text))


def parse_map_entries(text: str, nested: bool = False) -> dict[str, str | None]:
    """The keys and values of a map's text input, each value's text as
    written (None for NULL); with `nested`, a value may be a map's braced
    text, `{a=>{b=>1}}`, given whole."""
    reader = _Reader(text)
    reader.skip_space()
    reader.expect("{")
    entries: dict[str, str | None] = {}
    reader.skip_space()
    if not reader.take("}"):
        while True:
            key, _ = reader.element()
            reader.skip_space()
            reader.expect("=>")
            item, quoted = reader.braced() if nested else reader.element()
            entries[key] = None if not quoted and item.upper() == "NULL" else item
            reader.skip_space()
            if reader.take("}"):
                break
            reader.expect(",")
    reader.skip_space()
    if reader.pos != len(text):
        raise MapSyntaxError(f'invalid input syntax for type map: "{text}"')
    return entries


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def fail(self) -> MapSyntaxError:
        return MapSyntaxError(f'invalid input syntax for type map: "{self.text}"')

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, token: str) -> bool:
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            raise self.fail()

    def braced(self) -> tuple[str, bool]:
        """A nested map's value: its `{...}` text whole (quotes and
        backslashes inside kept), reported as quoted; else an element."""
        self.skip_space()
        if not self.text.startswith("{", self.pos):
            return self.element()
        start, depth, quoted = self.pos, 0, False
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if quoted:
                if ch == "\\":
                    self.pos += 1
                elif ch == '"':
                    quoted = False
            elif ch == '"':
                quoted = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return self.text[start : self.pos], True
        raise self.fail()

    def element(self) -> tuple[str, bool]:
        """A key or value: quoted (with backslash escapes) or bare."""
        self.skip_space()
        if self.take('"'):
            out = []
            while self.pos < len(self.text) and self.text[self.pos] != '"':
                if self.text[self.pos] == "\\":
                    self.pos += 1
                if self.pos < len(self.text):
                    out.append(self.text[self.pos])
                    self.pos += 1
            self.expect('"')
            return "".join(out), True
        match = _BARE.match(self.text, self.pos)
        if match is None:
            raise self.fail()
        self.pos = match.end()
        return match.group(), False


__all__ = [
    "MapSyntaxError",
    "entry_text",
    "format_map",
    "map_entries",
    "map_value",
    "parse_map",
    "parse_map_entries",
]
