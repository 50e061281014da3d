"""Array values as text: PostgreSQL's array output (`{1,2,NULL}`).

Array (and list) values are tuples of element values (`ScalarType.<X>_ARRAY`, see
repr/relation.py). An element is written as its type's text form, in double
quotes (with `"` and `\\` escaped by a backslash) when it is empty, contains
`{`, `}`, `,`, `"`, `\\` or whitespace, or is `NULL` in any case; a NULL
element is `NULL` unquoted. The same function serves the local engine's
`::text`, the Spark UDF and pgwire's text format, so they agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

_SPECIAL = frozenset('{},"\\')


def quote_element(text: str, listed: bool = False) -> str:
    """One element's text, quoted if PostgreSQL would quote it; in a list
    (`listed`) `NULL` is quoted only as written in capitals (Materialize's
    list output: `null` prints bare)."""
    null_word = text == "NULL" if listed else text.upper() == "NULL"
    if text == "" or null_word or any(c in _SPECIAL or c.isspace() for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def array_text(
    values: Sequence[Any], element_text: Callable[[Any], str], listed: bool = False
) -> str:
    """`{a,b,NULL}` from element values and their type's text output (of a
    list when `listed`)."""
    parts = ("NULL" if v is None else quote_element(element_text(v), listed) for v in values)
    return "{" + ",".join(parts) + "}"


__all__ = ["array_text", "quote_element"]
