"""Scalar functions called by name: one registry (`registry.py`) filled by
one module per family, each declaring a function once (overloads, result
types, Python implementation, optional Spark builder)."""

from coordinator_lib.expr.functions import (  # noqa: F401  (each module declares its family)
    arrays,
    character,
    datetime,
    interval,
    jsonb,
    lists,
    math,
    regex,
    text,
    text_map,
    to_char,
    webhook,
)
from coordinator_lib.expr.functions.registry import (
    REGISTRY,
    CallFunction,
    FunctionError,
    Param,
    Pseudo,
    ScalarFunction,
    Signature,
    SparkCall,
    evaluate,
    functions_named,
    scalar_function,
    sig,
)

__all__ = [
    "REGISTRY",
    "CallFunction",
    "FunctionError",
    "Param",
    "Pseudo",
    "ScalarFunction",
    "Signature",
    "SparkCall",
    "evaluate",
    "functions_named",
    "scalar_function",
    "sig",
]
