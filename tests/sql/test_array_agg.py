"""array_agg and the array types it returns: planning, types, EXPLAIN, errors.
The engines' results are held to DuckDB by tests/compute/test_sql_differential.py
(`agg_array_agg*` views) and the wire formats by tests/server."""

from __future__ import annotations

import pyarrow as pa
import pytest

from coordinator_lib.compute.explain import view_annotator
from coordinator_lib.expr.relation import AggregateFunc, Reduce
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.relation import RelationDesc, ScalarType, parse_scalar_type
from coordinator_lib.sql import explain
from coordinator_lib.sql.errors import SqlError
from tests.sql.support import make_catalog, output_types, select


def _reduce(expr) -> Reduce:  # type: ignore[no-untyped-def]
    while not isinstance(expr, Reduce):
        expr = expr.inputs()[0]
    return expr


def test_array_types() -> None:
    assert ScalarType.INTEGER.array() is ScalarType.INTEGER_ARRAY
    assert ScalarType.TEXT_ARRAY.element is ScalarType.TEXT
    assert ScalarType.TEXT.element is None
    assert parse_scalar_type("int4[]") is ScalarType.INTEGER_ARRAY
    assert parse_scalar_type("timestamp with time zone[]") is ScalarType.TIMESTAMPTZ_ARRAY
    assert ScalarType.BIGINT_ARRAY.to_arrow() == pa.list_(pa.int64())
    desc = RelationDesc.of(("a", "integer[]"), ("b", "text[]", False))
    assert desc.validate_row(((1, None), ())) == ((1, None), ())
    with pytest.raises(InvalidRow, match="as a tuple"):
        desc.validate_row(([1], ("x",)))
    with pytest.raises(InvalidRow, match="array element"):
        desc.validate_row(((1, "x"), ("x",)))
    with pytest.raises(InvalidRow, match="NOT NULL"):
        desc.validate_row(((1,), None))
    assert RelationDesc.from_json(desc.to_json()) == desc


def test_result_types_and_order_keys() -> None:
    plan = select(
        "SELECT b, array_agg(a ORDER BY c DESC, e NULLS FIRST, d DESC NULLS LAST) AS x,"
        " array_agg(b) AS y, array_agg(k) AS z FROM t GROUP BY b"
    )
    assert output_types(plan) == [
        ("text", True),
        ("integer[]", True),
        ("text[]", True),
        ("timestamp with time zone[]", True),
    ]
    reduce = _reduce(plan.expr)
    x, y, _ = reduce.aggregates
    assert x.func is AggregateFunc.ARRAY_AGG
    # PostgreSQL's defaults: ASC is NULLS LAST, DESC is NULLS FIRST.
    assert x.order == ((True, True), (False, True), (True, False))
    assert y.order == ()


def test_explain_marks_touched_keys() -> None:
    catalog = make_catalog()
    plan = select(
        "SELECT b, array_agg(a ORDER BY c DESC) FILTER (WHERE a > 1) AS x FROM t GROUP BY b",
        catalog,
    )
    text = explain(plan.expr, view_annotator(plan.expr), names=catalog.names())
    assert text.splitlines()[0] == (
        "Reduce group_by=[#1] aggregates=[array_agg(#0 order by #2 desc nulls first)"
        " filter (where (#0 > 1))] [incremental: touched keys]"
    )


def test_equality_is_null_and_text_cast() -> None:
    plan = select(
        "SELECT array_agg(a) = array_agg(a ORDER BY c), array_agg(b) <> array_agg(b),"
        " array_agg(a) IS NULL, array_agg(a)::text FROM t"
    )
    assert output_types(plan) == [
        ("boolean", True),
        ("boolean", True),
        ("boolean", False),
        ("text", True),
    ]


@pytest.mark.parametrize(
    ("sql", "code", "message"),
    [
        ("SELECT array_agg(DISTINCT a) FROM t", "0A000", "DISTINCT"),
        # arrays order (array_cmp), but not by elements without one order on both engines
        (
            "SELECT array_agg(a::text::char(2)) < array_agg(a::text::char(2)) FROM t",
            "42883",
            "character[] < character[]",
        ),
        ("SELECT array_agg(a) = array_agg(h) FROM t", "42883", "integer[] = smallint[]"),
        ("SELECT array_agg(a) + array_agg(a) FROM t", "42883", "integer[] + integer[]"),
        ("SELECT array_agg(x) FROM (SELECT array_agg(a) AS x FROM t) q", "0A000", "array"),
        ("SELECT max(x) FROM (SELECT array_agg(a) AS x FROM t) q", "42883", "max(integer[])"),
    ],
)
def test_refused(sql: str, code: str, message: str) -> None:
    with pytest.raises(SqlError) as info:
        select(sql)
    assert info.value.code == code
    assert message in str(info.value)


def test_top_level_order_by_an_array_is_postgres_order() -> None:
    """A query's ORDER BY (the adapter's finishing): element by element, a
    NULL element above every value, a prefix first."""
    from coordinator_lib.adapter.finishing import finish_rows
    from coordinator_lib.sql.plans import ColumnOrder, RowSetFinishing

    rows = [((v,), 1) for v in [(1, None), (1, 2), (1,), None, (0, 5), (1, 2)]]
    finishing = RowSetFinishing(order_by=(ColumnOrder(0, False, True),), limit=None, offset=0)
    assert [r[0] for r in finish_rows(rows, finishing)] == [
        (0, 5),
        (1,),
        (1, 2),
        (1, 2),
        (1, None),
        None,
    ]
