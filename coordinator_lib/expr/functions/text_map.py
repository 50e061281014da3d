"""Functions and operators of Materialize's `map[text=>text]`
(repr/text_map.py): `m -> key` (the value as text, NULL when absent),
`m ? key` (is the key there), `map_length(m)`. Spark runs them as UDFs of
the Python implementations.
"""

from __future__ import annotations

import functools

from coordinator_lib.expr.functions.registry import scalar_function, sig
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.text_map import map_entries

S = ScalarType


@functools.lru_cache(maxsize=1024)
def _entries(value: str) -> dict[str, str | None]:
    return map_entries(value)


@scalar_function("map_get", sig(S.MAP_TEXT, S.TEXT, result=S.TEXT), sql=())
def map_get(value: str, key: str) -> str | None:
    """`m -> key`."""
    return _entries(value).get(key)


@scalar_function("map_contains_key", sig(S.MAP_TEXT, S.TEXT, result=S.BOOLEAN), sql=())
def map_contains_key(value: str, key: str) -> bool:
    """`m ? key`."""
    return key in _entries(value)


@scalar_function("map_length", sig(S.MAP_TEXT, result=S.INTEGER))
def map_length(value: str) -> int:
    return len(_entries(value))
