"""PostgreSQL's escape string constants, `E'...'`, read as its scanner
(scan.l) reads them.

Inside `E'...'` a backslash starts an escape: `\\b \\f \\n \\r \\t`, `\\NNN`
(one to three octal digits, a byte, modulo 256), `\\xH` / `\\xHH` (a byte;
`\\x` without a hex digit is `x`), `\\uXXXX` and `\\UXXXXXXXX` (a code point;
a UTF-16 surrogate pair written as two `\\u`s is one), and a backslash
before any other character is that character (`\\\\`, `\\'`). `''` is a
quote. The bytes must then be UTF-8 without NUL, as PostgreSQL's text is:
otherwise 22021 "invalid byte sequence for encoding "UTF8": 0x..". A
malformed `\\u` is 22025, a code point of 0, beyond U+10FFFF or an unpaired
surrogate 42601, as in PostgreSQL.
"""

from __future__ import annotations

import re

from coordinator_lib.sql.errors import CharacterNotInRepertoire, InvalidEscapeSequence, ParseError

_SIMPLE = {"b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t"}
_OCTAL = re.compile(r"[0-7]{1,3}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,2}")
_UNICODE_HINT = "Unicode escapes must be \\uXXXX or \\UXXXXXXXX."


def scan_escape_string(sql: str, start: int) -> tuple[str, int]:
    """The value of the `E'...'` whose body begins at offset `start` of
    `sql` (just after the opening quote), and the offset just past its
    closing quote. Raises ParseError if it never closes."""
    i = start
    size = len(sql)
    while i < size:
        ch = sql[i]
        if ch == "\\":
            i += 2
        elif ch == "'":
            if sql[i + 1 : i + 2] != "'":
                return decode_escape_string(sql[start:i], start), i + 1
            i += 2
        else:
            i += 1
    raise ParseError("unterminated quoted string", start - 1)


def decode_escape_string(body: str, offset: int = 0) -> str:
    """The text an escape string body (between the quotes) denotes; `offset`
    is where the body starts in the statement, for error positions."""
    out = bytearray()
    i = 0
    pending_high: int | None = None  # a high surrogate waiting for its pair
    while i < len(body):
        ch = body[i]
        if pending_high is not None and not body.startswith("\\u", i):
            raise ParseError("invalid Unicode surrogate pair", offset + i + 1)
        if ch == "'":  # '' inside the constant
            out += b"'"
            i += 2
            continue
        if ch != "\\" or i + 1 >= len(body):
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _SIMPLE:
            out += _SIMPLE[nxt]
            i += 2
        elif (octal := _OCTAL.match(body, i + 1)) is not None:
            out.append(int(octal.group(), 8) & 0xFF)
            i = octal.end()
        elif nxt == "x" and (hexa := _HEX.match(body, i + 2)) is not None:
            out.append(int(hexa.group(), 16))
            i = hexa.end()
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            digits = body[i + 2 : i + 2 + width]
            if len(digits) < width or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                raise InvalidEscapeSequence(
                    "invalid Unicode escape", offset + i + 1, hint=_UNICODE_HINT
                )
            code = int(digits, 16)
            at = offset + i + 1
            i += 2 + width
            if 0xD800 <= code <= 0xDBFF and pending_high is None:
                pending_high = code
                continue
            if pending_high is not None:
                if not 0xDC00 <= code <= 0xDFFF:
                    raise ParseError("invalid Unicode surrogate pair", at)
                code = 0x10000 + ((pending_high - 0xD800) << 10) + (code - 0xDC00)
                pending_high = None
            elif 0xDC00 <= code <= 0xDFFF:
                raise ParseError("invalid Unicode surrogate pair", at)
            if code == 0 or code > 0x10FFFF:
                raise ParseError("invalid Unicode escape value", at)
            out += chr(code).encode()
        else:
            out += nxt.encode("utf-8", "surrogatepass")
            i += 2
    if pending_high is not None:
        raise ParseError("invalid Unicode surrogate pair", offset + len(body) + 1)
    return utf8_text(bytes(out))


def utf8_text(data: bytes) -> str:
    """`data` as text, or PostgreSQL's 22021 naming the first byte sequence
    that is not UTF-8 (or is NUL, which text cannot hold)."""
    nul = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = error.start if nul < 0 else min(nul, error.start)
    else:
        if nul < 0:
            return text
        bad = nul
    raise CharacterNotInRepertoire(
        invalid_byte_sequence(data[bad : bad + _sequence_length(data[bad])])
    )


def invalid_byte_sequence(sequence: bytes) -> str:
    shown = " ".join(f"0x{b:02x}" for b in sequence)
    return f'invalid byte sequence for encoding "UTF8": {shown}'


def _sequence_length(first: int) -> int:
    """How many bytes PostgreSQL shows of a bad sequence (pg_utf_mblen)."""
    if first & 0xE0 == 0xC0:
        return 2
    if first & 0xF0 == 0xE0:
        return 3
    if first & 0xF8 == 0xF0:
        return 4
    return 1
