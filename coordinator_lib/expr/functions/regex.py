"""PostgreSQL's regular expressions: regexp_replace and the match operators
`~` and `~*` (`!~`, `!~*` are NOT of them).

PostgreSQL's (ARE) patterns are run by Python's `re` after translating what
differs and is common: the POSIX bracket classes ([[:alpha:]] ...) and the
word boundaries \\m, \\M, \\y. The replacement text of regexp_replace takes
\\1 .. \\9 and \\& (the whole match), as in PostgreSQL. Flags: g (every
match), i (case-insensitive), c (sensitive), q (the pattern is literal
text); PostgreSQL's others are 0A000. Character classes and case-insensitive
matching are ASCII, as PostgreSQL's under the C locale (the one the tests'
server runs; Materialize's are Unicode).

Spark runs these as UDFs of the Python implementation: PostgreSQL's regular
expressions are neither Java's nor Spark's, and one implementation keeps
the engines identical.
"""

from __future__ import annotations

import functools
import re

from coordinator_lib.expr.functions.registry import FunctionError, scalar_function, sig
from coordinator_lib.repr.relation import ScalarType

S = ScalarType

# POSIX bracket classes, ASCII only (PostgreSQL's follow the database locale).
_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "space": r"\s",
    "upper": "A-Z",
    "lower": "a-z",
    "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f",
}


def _translate_pattern(pattern: str) -> str:
    """PostgreSQL's regular expression as Python's (see module docstring)."""
    out: list[str] = []
    i = 0
    in_bracket = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(r"\b" if not in_bracket and nxt in "mMy" else c + nxt)
            i += 2
            continue
        if in_bracket and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2 : end] if end > 0 else ""
            if name not in _CLASSES:
                raise FunctionError("invalid regular expression: invalid character class", "2201B")
            out.append(_CLASSES[name])
            i = end + 2
            continue
        if c == "[" and not in_bracket:
            in_bracket = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a ']' first in brackets is literal
                out.append(r"\]")
                i += 1
            continue
        if c == "]" and in_bracket:
            in_bracket = False
        elif c == "[" and in_bracket:
            c = r"\["  # Python warns about nested sets
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int, quoted: bool = False) -> re.Pattern[str]:
    translated = re.escape(pattern) if quoted else _translate_pattern(pattern)
    try:
        return re.compile(translated, flags)
    except re.error as error:
        raise FunctionError(f"invalid regular expression: {error}", "2201B") from None


def _flags(text: str) -> tuple[int, bool, bool]:
    """(re flags, g, q) of PostgreSQL's flag letters."""
    flags, every, quoted = re.ASCII, False, False
    for f in text:
        if f == "g":
            every = True
        elif f == "i":
            flags |= re.IGNORECASE
        elif f == "c":
            flags &= ~re.IGNORECASE
        elif f == "q":
            quoted = True
        elif f in "bemnpstwx":
            raise FunctionError(f'regular expression option "{f}" is not supported', "0A000")
        else:
            raise FunctionError(f'invalid regular expression option: "{f}"', "22023")
    return flags, every, quoted


@scalar_function(
    "regexp_replace",
    sig(S.TEXT, S.TEXT, S.TEXT, result=S.TEXT),
    sig(S.TEXT, S.TEXT, S.TEXT, S.TEXT, result=S.TEXT),
)
def regexp_replace(text: str, pattern: str, replacement: str, flags: str = "") -> str:
    re_flags, every, quoted = _flags(flags)
    compiled = _compile(pattern, re_flags, quoted)

    def substitute(match: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(replacement):
            c = replacement[i]
            if c == "\\" and i + 1 < len(replacement):
                nxt = replacement[i + 1]
                if nxt.isdigit() and nxt != "0":
                    n = int(nxt)
                    if n <= compiled.groups:
                        out.append(match.group(n) or "")
                    i += 2
                    continue
                if nxt == "&":
                    out.append(match.group(0))
                    i += 2
                    continue
                if nxt == "\\":
                    out.append("\\")
                    i += 2
                    continue
            out.append(c)
            i += 1
        return "".join(out)

    return compiled.sub(substitute, text, count=0 if every else 1)


@scalar_function("regex_match", sig(S.TEXT, S.TEXT, result=S.BOOLEAN), sql=())
def regex_match(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII).search(text) is not None


@scalar_function("regex_imatch", sig(S.TEXT, S.TEXT, result=S.BOOLEAN), sql=())
def regex_imatch(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII | re.IGNORECASE).search(text) is not None
