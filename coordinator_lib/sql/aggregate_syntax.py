"""Aggregate calls sqlglot parses under another name or not as aggregates:
jsonb_agg (a plain call to sqlglot), jsonb_object_agg, var_samp and var_pop
(sqlglot's JSONBObjectAgg, Variance and VariancePop, whose SQL names would
name the column `j_s_o_n_b_object_agg` or `variance`). The dialect's parser
builds these nodes, so a column is named as PostgreSQL names it and the
planner (`sql/aggregates.py`) knows each call is an aggregate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp


class JsonbAgg(exp.Expression, exp.AggFunc):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}
    _sql_names: ClassVar[list[str]] = ["JSONB_AGG"]


class JsonbObjectAgg(exp.Expression, exp.AggFunc):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}
    _sql_names: ClassVar[list[str]] = ["JSONB_OBJECT_AGG"]


class MapAgg(JsonbObjectAgg):
    """Materialize's map_agg(keys, values): planned as jsonb_object_agg is."""

    _sql_names: ClassVar[list[str]] = ["MAP_AGG"]


class ListAgg(exp.ArrayAgg):
    """Materialize's list_agg(value [ORDER BY ...]): planned as array_agg is."""

    _sql_names: ClassVar[list[str]] = ["LIST_AGG"]


class VarSamp(exp.Variance):
    _sql_names: ClassVar[list[str]] = ["VAR_SAMP"]


class VarPop(exp.VariancePop):
    _sql_names: ClassVar[list[str]] = ["VAR_POP"]


def _builder(node: type[exp.Func]) -> Callable[[list[Any]], exp.Func]:
    return lambda args: node.from_arg_list(args)


FUNCTIONS: dict[str, Callable[[list[Any]], exp.Func]] = {
    "JSONB_AGG": _builder(JsonbAgg),
    "JSONB_OBJECT_AGG": _builder(JsonbObjectAgg),
    "MAP_AGG": _builder(MapAgg),
    "LIST_AGG": _builder(ListAgg),
    "VAR_SAMP": _builder(VarSamp),
    "VAR_POP": _builder(VarPop),
}

__all__ = ["FUNCTIONS", "JsonbAgg", "JsonbObjectAgg", "ListAgg", "MapAgg", "VarPop", "VarSamp"]
