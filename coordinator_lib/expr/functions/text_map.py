"""Functions and operators of Materialize's `map[text=>T]`
(repr/text_map.py): `m -> key` (the value's text, NULL when absent; the
binder reads it as T),
`m ? key` (is the key there), `m ?& keys` / `m ?| keys` (all / any of a
text[]), `a @> b` (every entry of b is in a, NULL values equal), `a <@ b`,
`map_length(m)`, and map_agg's map of its collected keys and values.
Spark runs them as UDFs of the Python implementations.
"""

from __future__ import annotations

import functools
from typing import Any

from coordinator_lib.expr.functions.registry import Pseudo, scalar_function, sig
from coordinator_lib.repr.relation import ScalarType, parse_scalar_type
from coordinator_lib.repr.text_map import entry_text, map_entries, map_value

S = ScalarType


@functools.lru_cache(maxsize=1024)
def _entries(value: str) -> dict[str, str | None]:
    return map_entries(value)


@scalar_function("map_get", sig(Pseudo.ANY_MAP, S.TEXT, result=S.TEXT), sql=())
def map_get(value: str, key: str) -> str | None:
    """`m -> key`."""
    return _entries(value).get(key)


@scalar_function("map_contains_key", sig(Pseudo.ANY_MAP, S.TEXT, result=S.BOOLEAN), sql=())
def map_contains_key(value: str, key: str) -> bool:
    """`m ? key`."""
    return key in _entries(value)


@scalar_function(
    "map_contains_all_keys", sig(Pseudo.ANY_MAP, S.TEXT_ARRAY, result=S.BOOLEAN), sql=()
)
def map_contains_all_keys(value: str, keys: tuple[str | None, ...]) -> bool:
    """`m ?& keys`: a NULL key is in no map."""
    entries = _entries(value)
    return all(key in entries for key in keys)


@scalar_function(
    "map_contains_any_keys", sig(Pseudo.ANY_MAP, S.TEXT_ARRAY, result=S.BOOLEAN), sql=()
)
def map_contains_any_keys(value: str, keys: tuple[str | None, ...]) -> bool:
    """`m ?| keys`."""
    entries = _entries(value)
    return any(key in entries for key in keys)


@scalar_function("map_contains_map", sig(Pseudo.ANY_MAP, Pseudo.ANY_MAP, result=S.BOOLEAN), sql=())
def map_contains_map(value: str, other: str) -> bool:
    """`a @> b` (and `b <@ a`): each key of b in a with the same value."""
    entries = _entries(value)
    return all(key in entries and entries[key] == v for key, v in _entries(other).items())


@scalar_function("map_length", sig(Pseudo.ANY_MAP, result=S.INTEGER))
def map_length(value: str) -> int:
    return len(_entries(value))


@functools.lru_cache(maxsize=64)
def _value_type(name: str) -> ScalarType:
    return parse_scalar_type(name)


@scalar_function("map_entry_text", sig(Pseudo.ANY, S.TEXT, result=S.TEXT), sql=())
def map_entry_text(value: Any, value_type: str) -> str:
    """How a map of `value_type` holds `value` (map_agg's values)."""
    return entry_text(value, _value_type(value_type))


@scalar_function("map_of_entries", sig(S.TEXT_ARRAY, S.TEXT_ARRAY, result=S.MAP_TEXT), sql=())
def map_of_entries(keys: tuple[str | None, ...], values: tuple[str | None, ...]) -> str:
    """map_agg's map from the keys and values (as map_entry_text holds
    them) array_agg collected in its order: a NULL key is left out, the last
    value of a key stays. The call's type is the map's."""
    return map_value({k: v for k, v in zip(keys, values, strict=True) if k is not None})


@scalar_function(
    "map_build_entries",
    sig(S.TEXT, result=S.MAP_TEXT, variadic=(S.TEXT, Pseudo.ANY)),
    sql=(),
    nulls=lambda nullable: False,
)
def map_build_entries(value_type: str, *pairs: Any) -> str:
    """MAP[k1 => v1, ...] (sql/map_syntax.py) of values of `value_type`
    (the call's type is its map type): the last value of a key stays, a
    NULL key is left out."""
    st = _value_type(value_type)
    keys, values = pairs[::2], pairs[1::2]
    return map_value(
        {
            k: None if v is None else entry_text(v, st)
            for k, v in zip(keys, values, strict=True)
            if k is not None
        }
    )
