"""Functions and operators of Materialize's `map[text=>text]`
(repr/text_map.py): `m -> key` (the value as text, NULL when absent),
`m ? key` (is the key there), `m ?& keys` / `m ?| keys` (all / any of a
text[]), `a @> b` (every entry of b is in a, NULL values equal), `a <@ b`,
`map_length(m)`, and map_agg's map of its collected keys and values.
Spark runs them as UDFs of the Python implementations.
"""

from __future__ import annotations

import functools

from coordinator_lib.expr.functions.registry import scalar_function, sig
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.text_map import map_entries, map_value

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


@scalar_function("map_contains_all_keys", sig(S.MAP_TEXT, S.TEXT_ARRAY, result=S.BOOLEAN), sql=())
def map_contains_all_keys(value: str, keys: tuple[str | None, ...]) -> bool:
    """`m ?& keys`: a NULL key is in no map."""
    entries = _entries(value)
    return all(key in entries for key in keys)


@scalar_function("map_contains_any_keys", sig(S.MAP_TEXT, S.TEXT_ARRAY, result=S.BOOLEAN), sql=())
def map_contains_any_keys(value: str, keys: tuple[str | None, ...]) -> bool:
    """`m ?| keys`."""
    entries = _entries(value)
    return any(key in entries for key in keys)


@scalar_function("map_contains_map", sig(S.MAP_TEXT, S.MAP_TEXT, result=S.BOOLEAN), sql=())
def map_contains_map(value: str, other: str) -> bool:
    """`a @> b` (and `b <@ a`): each key of b in a with the same value."""
    entries = _entries(value)
    return all(key in entries and entries[key] == v for key, v in _entries(other).items())


@scalar_function("map_length", sig(S.MAP_TEXT, result=S.INTEGER))
def map_length(value: str) -> int:
    return len(_entries(value))


@scalar_function("map_of_entries", sig(S.TEXT_ARRAY, S.TEXT_ARRAY, result=S.MAP_TEXT), sql=())
def map_of_entries(keys: tuple[str | None, ...], values: tuple[str | None, ...]) -> str:
    """map_agg's map from the keys and values array_agg collected in its
    order: a NULL key is left out, the last value of a key stays."""
    return map_value({k: v for k, v in zip(keys, values, strict=True) if k is not None})


@scalar_function(
    "map_build_entries",
    sig(result=S.MAP_TEXT, variadic=(S.TEXT, S.TEXT)),
    sql=(),
    nulls=lambda nullable: False,
)
def map_build_entries(*pairs: str | None) -> str:
    """MAP[k1 => v1, ...] (sql/map_syntax.py): the last value of a key
    stays, a NULL key is left out."""
    keys, values = pairs[::2], pairs[1::2]
    return map_value({k: v for k, v in zip(keys, values, strict=True) if k is not None})
