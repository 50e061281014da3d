"""jsonb functions and operators: `->`, `->>`, `#>`, `#>>`, `@>`, and
json_build_object. jsonb values are their canonical text
(`repr/jsonb.canonical_jsonb`); Spark runs these as UDFs of the Python
implementation (Spark's JSON functions would not print it the same way).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import re
from typing import Any

from coordinator_lib.expr.functions.registry import Pseudo, scalar_function, sig
from coordinator_lib.repr.jsonb import canonical_jsonb
from coordinator_lib.repr.relation import ScalarType

S = ScalarType
GET = (sig(S.JSONB, S.TEXT, result=S.JSONB), sig(S.JSONB, S.BIGINT, result=S.JSONB))
GET_TEXT = (sig(S.JSONB, S.TEXT, result=S.TEXT), sig(S.JSONB, S.BIGINT, result=S.TEXT))


@functools.lru_cache(maxsize=1024)
def _parsed(jsonb: str) -> Any:
    return json.loads(jsonb)


def _element(jsonb: str, key: str | int) -> tuple[bool, Any]:
    value = _parsed(jsonb)
    if isinstance(key, str):
        if isinstance(value, dict) and key in value:
            return True, value[key]
        return False, None
    if isinstance(value, list) and -len(value) <= key < len(value):
        return True, value[key]
    return False, None


@scalar_function("jsonb_get", *GET, sql=())
def jsonb_get(jsonb: str, key: str | int) -> str | None:
    """`jsonb -> key`: the field or element as jsonb, NULL if absent."""
    found, value = _element(jsonb, key)
    return canonical_jsonb(value) if found else None


@scalar_function("jsonb_get_text", *GET_TEXT, sql=())
def jsonb_get_text(jsonb: str, key: str | int) -> str | None:
    """`jsonb ->> key`: the field or element as text (a JSON null is NULL)."""
    found, value = _element(jsonb, key)
    if not found or value is None:
        return None
    if isinstance(value, str):
        return value
    return canonical_jsonb(value)


def _text_array(text: str) -> list[str]:
    """A text[] constant as PostgreSQL writes one: `{a,0,"b c"}`."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(f'malformed array literal: "{text}"')
    inner = inner[1:-1].strip()
    if not inner:
        return []
    out: list[str] = []
    for match in re.finditer(r'\s*("((?:[^"\\]|\\.)*)"|[^,]*?)\s*(,|$)', inner):
        if match.group(0) == "":
            break
        quoted = match.group(2)
        out.append(re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group(1))
    return out


def _path(jsonb: str, path: str) -> tuple[bool, Any]:
    value = _parsed(jsonb)
    for key in _text_array(path):
        if isinstance(value, dict):
            if key not in value:
                return False, None
            value = value[key]
        elif isinstance(value, list):
            try:
                index = int(key)
            except ValueError:
                return False, None
            if not -len(value) <= index < len(value):
                return False, None
            value = value[index]
        else:
            return False, None
    return True, value


@scalar_function("jsonb_get_path", sig(S.JSONB, S.TEXT, result=S.JSONB), sql=())
def jsonb_get_path(jsonb: str, path: str) -> str | None:
    """`jsonb #> path`: the value at the path as jsonb, NULL if absent."""
    found, value = _path(jsonb, path)
    return canonical_jsonb(value) if found else None


@scalar_function("jsonb_get_path_text", sig(S.JSONB, S.TEXT, result=S.TEXT), sql=())
def jsonb_get_path_text(jsonb: str, path: str) -> str | None:
    """`jsonb #>> path`: the value at the path as text (a JSON null is NULL)."""
    found, value = _path(jsonb, path)
    if not found or value is None:
        return None
    return value if isinstance(value, str) else canonical_jsonb(value)


def _contains(a: Any, b: Any, top: bool = False) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and all(k in a and _contains(a[k], v) for k, v in b.items())
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(_contains(x, y) for x in a) for y in b)
        # only at the top level does an array contain a bare scalar
        return top and not isinstance(b, dict) and any(_contains(x, b) for x in a)
    if isinstance(b, dict | list):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


@scalar_function("jsonb_contains", sig(S.JSONB, S.JSONB, result=S.BOOLEAN), sql=())
def jsonb_contains(a: str, b: str) -> bool:
    """`a @> b`: PostgreSQL's jsonb containment."""
    return _contains(_parsed(a), _parsed(b), top=True)


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal) or (
        isinstance(value, float) and math.isfinite(value)
    ):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return json.dumps(value.isoformat())
    return json.dumps(str(value))


@scalar_function(
    "json_build_object",
    sig(result=S.JSONB, variadic=(Pseudo.ANY_TEXT, Pseudo.ANY)),
    nulls=lambda nullable: False,
)
def json_build_object(*args: Any) -> str:
    """json_build_object(k1, v1, ...): keys as text, values as JSON (numbers
    and booleans as themselves, NULL as null, the rest as strings)."""
    if len(args) % 2:
        raise ValueError("argument list must have even number of elements")
    if any(key is None for key in args[::2]):
        raise ValueError("null value not allowed for object key")
    pairs = (
        f"{json.dumps(str(k))}: {_json_value(v)}"
        for k, v in zip(args[::2], args[1::2], strict=True)
    )
    return "{" + ", ".join(pairs) + "}"


# jsonb_agg and jsonb_object_agg's last step (sql/aggregates.py): array_agg's
# arrays of the values (and keys) made one jsonb value. Values that are
# already jsonb are embedded as they are, others converted as to_jsonb does.
def _jsonb_of(value: Any) -> Any:
    return None if value is None else json.loads(value)


def _value_of(value: Any) -> Any:
    return json.loads(_json_value(value))


@scalar_function("jsonb_agg_of_values", sig(Pseudo.ANY, result=S.JSONB), sql=())
def jsonb_agg_of_values(values: Any) -> str:
    return canonical_jsonb([_value_of(v) for v in values])


@scalar_function("jsonb_agg_of_jsonb", sig(Pseudo.ANY, result=S.JSONB), sql=())
def jsonb_agg_of_jsonb(values: Any) -> str:
    return canonical_jsonb([_jsonb_of(v) for v in values])


def _object(keys: Any, values: Any, convert: Any) -> str:
    """NULL keys are skipped and a repeated key keeps its last value (Materialize's rule)."""
    return canonical_jsonb(
        {k: convert(v) for k, v in zip(keys, values, strict=True) if k is not None}
    )


@scalar_function("jsonb_object_agg_of_values", sig(Pseudo.ANY, Pseudo.ANY, result=S.JSONB), sql=())
def jsonb_object_agg_of_values(keys: Any, values: Any) -> str:
    return _object(keys, values, _value_of)


@scalar_function("jsonb_object_agg_of_jsonb", sig(Pseudo.ANY, Pseudo.ANY, result=S.JSONB), sql=())
def jsonb_object_agg_of_jsonb(keys: Any, values: Any) -> str:
    return _object(keys, values, _jsonb_of)
