"""`x = ANY (array)` as a function (a UDF on Spark)."""

from __future__ import annotations

from typing import Any

from coordinator_lib.expr.functions.registry import Pseudo, scalar_function, sig
from coordinator_lib.repr.relation import ScalarType


@scalar_function("array_contains", sig(Pseudo.ANY, Pseudo.ANY, result=ScalarType.BOOLEAN), sql=())
def array_contains(values: Any, x: Any) -> bool | None:
    """`x = ANY (values)` with PostgreSQL's NULLs: TRUE if an element equals
    x, else NULL if an element is NULL, else FALSE."""
    if any(v is not None and v == x for v in values):
        return True
    return None if any(v is None for v in values) else False
