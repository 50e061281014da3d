"""bytea's escape input format."""

from __future__ import annotations

import re


def parse_bytea_escape(text: str) -> bytes:
    """bytea's escape format (`\\\\` and `\\nnn` octets, other characters as
    UTF-8): the input of a text cast and of decode(text, 'escape').
    Raises ValueError naming the type for a stray backslash."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out += ch.encode()
            i += 1
        elif text[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", text[i + 1 : i + 4]):
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            raise ValueError("invalid input syntax for type bytea")
    return bytes(out)


__all__ = ["parse_bytea_escape"]
