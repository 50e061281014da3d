"""Every float NaN in a row is `math.nan`, one object.

Why: PostgreSQL's NaN equals NaN (one group, one DISTINCT row, a join
match, a retraction that cancels its insertion), but a Python NaN equals
nothing, and each NaN object hashes by its identity, so rows holding two
NaN objects are two dict keys: a view kept two NaN rows of one DISTINCT
and never retracted them. Tuples compare their elements by identity before
equality, so rows holding the one object `math.nan` are equal and hash
alike. Values enter rows by decoding batches and Spark results
(repr/relation.py), by evaluating expressions (compute/local_scalar.py), as
a plan's constants (compute/local_backend.py) and by reading an operator's
arranged state back (persist/arrangement_store.py: unpickling makes new NaN
objects); each passes its values through `one_nan`. A window's peer groups
also compare NaN as equal (compute/local_ordered.py).
"""

from __future__ import annotations

import math
from typing import Any


def one_nan(value: Any) -> Any:
    """`value`, with a float NaN (also an array's element) as `math.nan`."""
    if type(value) is float:
        return math.nan if value != value else value
    if type(value) is tuple and any(type(v) is float and v != v for v in value):
        return tuple(math.nan if type(v) is float and v != v else v for v in value)
    return value


def is_nan(value: Any) -> bool:
    return type(value) is float and value != value


def nan_ordered(value: Any) -> tuple[bool, Any]:
    """A key comparing as PostgreSQL compares floats: NaN equals NaN and is
    above every other value (Python's NaN compares false with everything)."""
    return (True, 0.0) if is_nan(value) else (False, value)


__all__ = ["is_nan", "nan_ordered", "one_nan"]
