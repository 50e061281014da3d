"""Values of Materialize's `map[text=>text]`: text keys to text values (or
NULL), unordered, keys unique. A value is carried as its canonical JSON
object text (keys sorted), so storage, Spark and equality treat it as a
string, as jsonb is; it prints in Materialize's map syntax, `{a=>1,b=>NULL}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

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


def format_map(value: str) -> str:
    """Materialize's text output: `{a=>1,"b c"=>NULL}`, keys in order."""
    parts = []
    for key, item in sorted(map_entries(value).items()):
        shown = "NULL" if item is None else _element_text(item, True)
        parts.append(f"{_element_text(key, False)}=>{shown}")
    return "{" + ",".join(parts) + "}"


class MapSyntaxError(ValueError):
    pass


def parse_map(text: str) -> str:
    """`{a=>1, "b c"=>NULL}` (Materialize's map input) as a carried value;
    MapSyntaxError if it is not one. A later duplicate key wins."""
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
            item, quoted = reader.element()
            entries[key] = None if not quoted and item.upper() == "NULL" else item
            reader.skip_space()
            if reader.take("}"):
                break
            reader.expect(",")
    reader.skip_space()
    if reader.pos != len(text):
        raise MapSyntaxError(f'invalid input syntax for type map: "{text}"')
    return map_value(entries)


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


__all__ = ["MapSyntaxError", "format_map", "map_entries", "map_value", "parse_map"]
