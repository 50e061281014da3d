"""A ScalarBinder that also knows the functions webhook validation uses:
hmac, decode, encode, constant_time_eq, and now() (the request's receipt
time, a column of the row being checked); jsonb's `->` / `->>` come from
the plain binder (`sql/function_calls.py`).

It binds expressions that are evaluated in-process only (a webhook CHECK, a
secret's value), so it may offer functions the Spark renderer does not have
(`local_only` in `expr/functions/`); queries keep using the plain ScalarBinder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.functions import REGISTRY, CallFunction
from coordinator_lib.expr.scalar import Column
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.errors import UnsupportedFeature
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scalar import ScalarBinder, Typed
from coordinator_lib.sql.scope import Scope, ident_name

S = ScalarType


class FunctionBinder(ScalarBinder):
    """`now_column`: the column holding now() (None: now() is refused)."""

    def __init__(
        self,
        scope: Scope,
        clause: str,
        *,
        types: tuple[ColumnType, ...] | None = None,
        now_column: int | None = None,
    ) -> None:
        super().__init__(scope, clause, types=types)
        self.now_column = now_column

    def _handler(self, node: exp.Expr) -> Callable[[Any], Typed]:
        extra: dict[type, Callable[[Any], Typed]] = {
            exp.Decode: self._decode,
            exp.Encode: self._encode,
            exp.CurrentTimestamp: self._now,
            exp.Anonymous: self._named,
        }
        return extra.get(type(node)) or super()._handler(node)

    # --- helpers ------------------------------------------------------------------

    def _call(self, name: str, args: list[Typed]) -> Typed:
        """The call with the registry's result type (one for all of these
        functions' overloads: an argument may be text where bytea is wanted)."""
        (result,) = {signature.result for signature in REGISTRY[name].signatures}
        nullable = any(arg.type.nullable for arg in args)
        expr = CallFunction(name, tuple(a.expr for a in args), ColumnType(result, nullable))
        return Typed(expr, expr.type)

    def _as(
        self,
        value: Typed,
        target: ScalarType,
        node: exp.Expr,
        name: str,
        args: list[Typed],
        *,
        bytes_or_text: bool = False,
    ) -> Typed:
        """`value` as `target` where the overload wants it: unknown literals
        take the type; any other type must already be it (with
        `bytes_or_text`, text is taken as its UTF-8 bytes where bytea is wanted)."""
        if value.unknown:
            return self.resolve_unknown(value, target, node)
        if value.scalar is target or (bytes_or_text and value.scalar in (S.TEXT, S.BYTEA)):
            return value
        raise self.no_function(node, name, args)

    # --- functions ----------------------------------------------------------------

    def _named(self, node: exp.Anonymous) -> Typed:
        name = ident_name(node.this) if isinstance(node.this, exp.Identifier) else str(node.this)
        name = name.lower()
        if name == "hmac":
            return self._hmac(node)
        if name == "constant_time_eq":
            return self._constant_time_eq(node)
        if name in ("now", "current_timestamp"):
            return self._now(node)
        return super()._anonymous(node)

    def _hmac(self, node: exp.Anonymous) -> Typed:
        """hmac(data, key, type) -> bytea; data and key text or bytea (text
        is its UTF-8 bytes, so a text body and a bytea secret mix)."""
        nodes = list(node.expressions)
        args = [self.bind(a) for a in nodes]
        if len(args) != 3:
            raise self.no_function(node, "hmac", args)
        binary = any(not a.unknown and a.scalar is S.BYTEA for a in args[:2])
        target = S.BYTEA if binary else S.TEXT
        data = self._as(args[0], target, nodes[0], "hmac", args, bytes_or_text=True)
        key = self._as(args[1], target, nodes[1], "hmac", args, bytes_or_text=True)
        kind = self._as(args[2], S.TEXT, nodes[2], "hmac", args)
        return self._call("hmac", [data, key, kind])

    def _constant_time_eq(self, node: exp.Anonymous) -> Typed:
        """constant_time_eq(a, b) -> boolean; text or bytea (text compared
        as its UTF-8 bytes)."""
        nodes = list(node.expressions)
        args = [self.bind(a) for a in nodes]
        if len(args) != 2:
            raise self.no_function(node, "constant_time_eq", args)
        binary = any(not a.unknown and a.scalar is S.BYTEA for a in args)
        target = S.BYTEA if binary else S.TEXT
        name = "constant_time_eq"
        left = self._as(args[0], target, nodes[0], name, args, bytes_or_text=True)
        right = self._as(args[1], target, nodes[1], name, args, bytes_or_text=True)
        return self._call("constant_time_eq", [left, right])

    def _decode(self, node: exp.Decode) -> Typed:
        """decode(text, format) -> bytea (format: base64, hex, escape)."""
        nodes = [node.this, node.args["charset"]]
        args = [self.bind(n) for n in nodes]
        text = self._as(args[0], S.TEXT, nodes[0], "decode", args)
        fmt = self._as(args[1], S.TEXT, nodes[1], "decode", args)
        return self._call("decode", [text, fmt])

    def _encode(self, node: exp.Encode) -> Typed:
        """encode(bytea, format) -> text (format: base64, hex, escape)."""
        nodes = [node.this, node.args["charset"]]
        args = [self.bind(n) for n in nodes]
        data = self._as(args[0], S.BYTEA, nodes[0], "encode", args)
        fmt = self._as(args[1], S.TEXT, nodes[1], "encode", args)
        return self._call("encode", [data, fmt])

    def _now(self, node: exp.Expr) -> Typed:
        if self.now_column is None:
            raise UnsupportedFeature(
                "now() is only supported in webhook CHECK expressions", position_of(node)
            )
        column = ColumnType(S.TIMESTAMPTZ, False)
        return Typed(Column(self.now_column), column)


__all__ = ["FunctionBinder"]
