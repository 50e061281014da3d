"""SELECT plans: shapes, descs (names, types, nullability) and finishing."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from coordinator_lib.expr import (
    AggregateExpr,
    AggregateFunc,
    BinaryFunc,
    CallBinary,
    Cast,
    Column,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Literal,
    Map,
    Negate,
    Project,
    Reduce,
    Threshold,
    Union,
)
from coordinator_lib.expr.relation import OrderKey, TopK
from coordinator_lib.repr import GlobalId
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import AsOfTime, ColumnOrder, RowSetFinishing
from coordinator_lib.sql.errors import (
    GroupingError,
    InvalidParameter,
    UnknownColumn,
    UnsupportedFeature,
)
from tests.sql.reference_eval import evaluate, finish
from tests.sql.support import T_DESC, U_DESC, output_types, select

T, U, W = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
GET_T, GET_U = Get(T, T_DESC), Get(U, U_DESC)
INT = ColumnType(ScalarType.INTEGER, False)


def test_projection_filter() -> None:
    plan = select("SELECT b, a AS alias FROM t WHERE a > 1")
    assert plan.column_names == ("b", "alias")
    assert plan.expr == Project(
        Filter(GET_T, (CallBinary(BinaryFunc.GT, Column(0), Literal(1, INT)),)),
        (1, 0),
        ("b", "alias"),
    )
    assert output_types(plan) == [("text", True), ("integer", False)]
    assert plan.finishing == RowSetFinishing(project=(0, 1))
    assert plan.as_of is None


def test_star_and_qualified_star() -> None:
    plan = select("SELECT *, u.*, t.a FROM t, u")
    names = T_DESC.names + U_DESC.names + U_DESC.names + ("a",)
    assert plan.column_names == names
    assert isinstance(plan.expr, Project)
    assert plan.expr.outputs == (*range(16), 13, 14, 15, 0)


def test_select_without_from_is_one_row() -> None:
    plan = select("SELECT 1 AS one, 'x', NULL")
    assert evaluate(plan.expr, {}) == Counter({(1, "x", None): 1})
    assert output_types(plan) == [("integer", False), ("text", False), ("text", True)]
    assert plan.column_names == ("one", "?column?", "?column?")


def test_join_on_becomes_equivalences_and_residual_filter() -> None:
    plan = select("SELECT t.b, u.x FROM t JOIN u ON t.a = u.a AND u.x > t.e WHERE t.b = 'k'")
    project = plan.expr
    assert isinstance(project, Project) and project.outputs == (1, 14)
    filt = project.input
    assert isinstance(filt, Filter)
    assert filt.predicates == (CallBinary(BinaryFunc.GT, Column(14), Column(4)),)
    # The WHERE predicate reads t alone: it filters t below the join.
    t_b_is_k = CallBinary(
        BinaryFunc.EQ, Column(1), Literal("k", ColumnType(ScalarType.TEXT, False))
    )
    assert filt.input == Join((Filter(GET_T, (t_b_is_k,)), GET_U), ((Column(0), Column(13)),))


def test_comma_join_with_where_equalities() -> None:
    plan = select("SELECT 1 FROM t, u, w WHERE t.a = u.a AND u.a = w.a AND t.c = w.id")
    join = plan.expr
    while not isinstance(join, Join):
        join = join.inputs()[0]
    assert join.equivalences == (
        (Column(0), Column(13), Column(17)),
        (Column(2), Column(16)),
    )


def test_equalities_with_casts_stay_equivalences() -> None:
    plan = select("SELECT 1 FROM t JOIN w ON t.a = w.id")
    join = plan.expr
    while not isinstance(join, Join):
        join = join.inputs()[0]
    assert join.equivalences == ((Cast(Column(0), ScalarType.BIGINT), Column(13)),)


def test_join_using_merges_columns() -> None:
    plan = select("SELECT * FROM t JOIN u USING (a)")
    assert plan.column_names == (*T_DESC.names, "x", "y")
    tables = {T: [(1, "p") + (None,) * 11, (2, "q") + (None,) * 11], U: [(1, 1.5, "z")]}
    rows = evaluate(plan.expr, tables)
    assert rows == Counter({(1, "p") + (None,) * 11 + (1.5, "z"): 1})
    unqualified = select("SELECT a FROM t JOIN u USING (a)")  # not ambiguous
    assert unqualified.column_names == ("a",)


def test_group_by_with_aggregates() -> None:
    plan = select(
        "SELECT b, count(*), count(c), count(DISTINCT c), sum(a), min(d), max(e) FROM t GROUP BY b"
    )
    reduce = plan.expr
    assert isinstance(reduce, Reduce)
    assert reduce.group_key == (Column(1),)
    assert reduce.aggregates == (
        AggregateExpr(AggregateFunc.COUNT, Literal(True, ColumnType(ScalarType.BOOLEAN, False))),
        AggregateExpr(AggregateFunc.COUNT, Column(2)),
        AggregateExpr(AggregateFunc.COUNT, Column(2), distinct=True),
        AggregateExpr(AggregateFunc.SUM, Column(0)),
        AggregateExpr(AggregateFunc.MIN, Column(3)),
        AggregateExpr(AggregateFunc.MAX, Column(4)),
    )
    assert plan.column_names == ("b", "count", "count", "count", "sum", "min", "max")
    assert output_types(plan) == [
        ("text", True),
        ("bigint", False),
        ("bigint", False),
        ("bigint", False),
        ("bigint", True),
        ("date", True),
        ("double precision", True),
    ]


def test_group_by_expression_ordinal_and_alias() -> None:
    by_expr = select("SELECT a + 1, count(*) FROM t GROUP BY a + 1")
    by_ordinal = select("SELECT a + 1, count(*) FROM t GROUP BY 1")
    by_alias = select("SELECT a + 1 AS kk, count(*) FROM t GROUP BY kk")
    # an input column of that name wins over the alias, as in PostgreSQL (t has a column k)
    with pytest.raises(GroupingError):
        select("SELECT a + 1 AS k, count(*) FROM t GROUP BY k")
    assert by_expr.expr == by_ordinal.expr
    reduce = by_alias.expr
    assert isinstance(reduce, Reduce)  # the key takes the alias as its name: no Project
    assert reduce.group_key == by_expr.expr.inputs()[0].group_key  # type: ignore[attr-defined]


def test_having_filters_groups() -> None:
    plan = select("SELECT b FROM t GROUP BY b HAVING count(*) > 1 AND min(a) > 0")
    rows = [(1, "x"), (2, "x"), (3, "y")]
    tables = {T: [r + (None,) * 11 for r in rows]}
    assert evaluate(plan.expr, tables) == Counter({("x",): 1})


def test_global_aggregate_has_one_row_on_empty_input() -> None:
    plan = select("SELECT count(*), sum(a), max(b), count(c) FROM t")
    union = plan.expr
    assert isinstance(union, Union)
    reduce, default = union.inputs_
    assert isinstance(reduce, Reduce) and reduce.group_key == ()
    assert isinstance(default, Map)
    assert default.input == Union(
        (Constant((((), 1),), default.input.inputs_[0].desc), Negate(Project(reduce, ())))
    )
    assert evaluate(plan.expr, {T: []}) == Counter({(0, None, None, 0): 1})
    rows = [(1, "x") + (None,) * 11, (2, None, 5) + (None,) * 10]
    assert evaluate(plan.expr, {T: rows}) == Counter({(2, 3, "x", 1): 1})
    assert output_types(plan) == [
        ("bigint", False),
        ("bigint", True),
        ("text", True),
        ("bigint", False),
    ]


def test_avg_lowers_to_sum_over_count() -> None:
    plan = select("SELECT avg(a), avg(e) FROM t")
    assert output_types(plan) == [("numeric", True), ("double precision", True)]
    assert evaluate(plan.expr, {T: []}) == Counter({(None, None): 1})
    rows = [(1,) + (None,) * 3 + (1.0,) + (None,) * 8, (2,) + (None,) * 12]
    [(avg_a, avg_e)] = evaluate(plan.expr, {T: rows})
    assert float(avg_a) == 1.5 and avg_e == 1.0


def test_having_without_group_by_is_one_group() -> None:
    plan = select("SELECT 1 FROM t HAVING count(*) >= 0")
    assert evaluate(plan.expr, {T: []}) == Counter({(1,): 1})


def test_select_distinct() -> None:
    plan = select("SELECT DISTINCT b, a FROM t")
    assert plan.expr == Distinct(Project(GET_T, (1, 0), ("b", "a")))


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        ("UNION ALL", lambda left, right: Union((left, right))),
        ("UNION", lambda left, right: Distinct(Union((left, right)))),
        ("EXCEPT ALL", lambda left, right: Threshold(Union((left, Negate(right))))),
        ("EXCEPT", lambda left, right: Threshold(Union((Distinct(left), Negate(right))))),
    ],
)
def test_set_operations(op: str, shape: object) -> None:
    plan = select(f"SELECT a FROM t {op} SELECT a FROM u")
    left = Project(GET_T, (0,), ("a",))
    right = Project(GET_U, (0,), ("a",))
    assert plan.expr == shape(left, right)  # type: ignore[operator]


def test_union_unifies_types_and_unknown_literals() -> None:
    plan = select("SELECT a, NULL FROM t UNION ALL SELECT c, 1 FROM t")
    assert output_types(plan) == [("bigint", True), ("integer", True)]
    plan = select("SELECT 1 UNION SELECT 2.5")
    assert output_types(plan) == [("numeric", False)]


def test_order_by_limit_offset_go_to_finishing() -> None:
    plan = select("SELECT a, b FROM t ORDER BY b DESC, 1 NULLS FIRST, c LIMIT 10 OFFSET 5")
    assert plan.finishing == RowSetFinishing(
        order_by=(
            ColumnOrder(1, desc=True, nulls_last=False),
            ColumnOrder(0, desc=False, nulls_last=False),
            ColumnOrder(2, desc=False, nulls_last=True),
        ),
        limit=10,
        offset=5,
        project=(0, 1),
    )
    # c is not selected: it is an extra column the finishing projects away
    assert plan.expr.desc.arity == 3 and plan.desc.names == ("a", "b")
    rows = [(i, str(i), 10 - i) + (None,) * 10 for i in range(20)]
    # text order descending: "9", "8", ..., "5", then "4" is the sixth
    assert finish(evaluate(plan.expr, {T: rows}), plan.finishing)[0] == (4, "4")


def test_order_by_aggregate_and_output_alias() -> None:
    plan = select("SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY n DESC, count(*) + 1")
    assert plan.finishing.order_by[0] == ColumnOrder(1, desc=True, nulls_last=False)
    assert plan.finishing.order_by[1].column == 2
    assert plan.finishing.project == (0, 1)


def test_limit_all_and_fetch() -> None:
    assert select("SELECT a FROM t LIMIT ALL").finishing.limit is None
    assert select("SELECT a FROM t FETCH FIRST 3 ROWS ONLY").finishing.limit == 3
    with pytest.raises(UnsupportedFeature):
        select("SELECT a FROM t LIMIT a")
    with pytest.raises(InvalidParameter):
        select("SELECT a FROM t OFFSET -1")


def test_subquery_cte_and_values() -> None:
    plan = select(
        "WITH big AS (SELECT a, b FROM t WHERE a > 10) "
        "SELECT s.b, v.label FROM (SELECT * FROM big) AS s "
        "JOIN (VALUES (11, 'eleven'), (12, 'twelve')) AS v(num, label) ON s.a = v.num"
    )
    rows = [(i, str(i)) + (None,) * 11 for i in range(9, 14)]
    assert evaluate(plan.expr, {T: rows}) == Counter({("11", "eleven"): 1, ("12", "twelve"): 1})
    assert plan.column_names == ("b", "label")


def test_limit_in_subquery_is_a_topk() -> None:
    plan = select("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 1) AS s")
    assert isinstance(plan.expr, TopK)
    assert (plan.expr.order_key, plan.expr.limit) == ((OrderKey(0),), 1)


def test_as_of() -> None:
    assert select("SELECT a FROM t AS OF 1700000000000").as_of == AsOfTime(1700000000000)
    assert select("SELECT a FROM t AS OF AT LEAST 5").as_of == AsOfTime(5, at_least=True)
    at = select("SELECT a FROM t AS OF '2024-01-01 00:00:01+00'").as_of
    expected = int(dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert at == AsOfTime(expected)
    with pytest.raises(UnsupportedFeature):
        select("SELECT a FROM t AS OF now()")
    with pytest.raises(UnknownColumn):
        select("SELECT a FROM t AS OF a")


def test_self_join_with_aliases() -> None:
    plan = select("SELECT x.a, y.a FROM t AS x JOIN t AS y ON x.a = y.c")
    join = plan.expr.inputs()[0]
    assert isinstance(join, Join) and join.inputs_ == (GET_T, GET_T)
    assert join.equivalences == ((Cast(Column(0), ScalarType.BIGINT), Column(15)),)


def test_schema_qualified_names() -> None:
    plan = select("SELECT materialize.public.t.a, public.t.b FROM materialize.public.t")
    assert plan.expr == Project(GET_T, (0, 1), ("a", "b"))
