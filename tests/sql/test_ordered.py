"""Planning ORDER BY ... LIMIT in views (TopK), DISTINCT ON and window
functions: the operators they become, EXPLAIN's marks, and errors with
PostgreSQL's SQLSTATE and the position of the offending text."""

from __future__ import annotations

import pytest

from coordinator_lib.compute.explain import explain_view
from coordinator_lib.expr.relation import OrderKey, Project, TopK, Window, WindowFunc
from coordinator_lib.sql import CreateViewPlan, SqlError
from tests.sql.support import make_catalog, plan, select


def _view(sql: str) -> CreateViewPlan:
    p = plan(f"CREATE MATERIALIZED VIEW mv AS {sql}")
    assert isinstance(p, CreateViewPlan)
    return p


def test_limit_in_a_view_is_a_topk() -> None:
    p = _view("SELECT a, c FROM t ORDER BY c DESC, a LIMIT 2 OFFSET 1")
    topk = p.expr
    assert isinstance(topk, TopK)
    assert topk.group_key == ()
    assert topk.order_key == (OrderKey(1, desc=True, nulls_last=False), OrderKey(0))
    assert (topk.limit, topk.offset) == (2, 1)
    assert explain_view(topk, make_catalog().names()).splitlines() == [
        "TopK order_by=[#1 desc, #0] limit=2 offset=1 [incremental: touched keys]",
        "  Project (#0, #2) [incremental]",
        "    Get materialize.public.t [source]",
    ]


def test_limit_on_a_hidden_order_column_projects_it_away() -> None:
    p = _view("SELECT b FROM t ORDER BY c NULLS FIRST LIMIT 1")
    assert isinstance(p.expr, Project) and p.expr.outputs == (0,)
    topk = p.expr.input
    assert isinstance(topk, TopK)
    assert topk.order_key == (OrderKey(1, desc=False, nulls_last=False),)


def test_top_level_select_keeps_limit_as_finishing() -> None:
    p = select("SELECT a FROM t ORDER BY a LIMIT 3")
    assert not isinstance(p.expr, TopK)
    assert p.finishing.limit == 3


def test_subquery_and_nested_limits_are_topks() -> None:
    p = select("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3) q ORDER BY a LIMIT 1")
    assert isinstance(p.expr, TopK) and p.expr.limit == 3
    p = select("(SELECT a FROM t ORDER BY a LIMIT 3) ORDER BY 1 DESC LIMIT 1")
    assert isinstance(p.expr, TopK) and p.finishing.limit == 1


def test_distinct_on_is_a_topk_of_one_per_key() -> None:
    p = _view("SELECT DISTINCT ON (b) b, c FROM t ORDER BY b, c DESC")
    topk = p.expr
    assert isinstance(topk, TopK)
    assert topk.group_key == (0,) and topk.limit == 1
    assert topk.order_key[1:] == (OrderKey(1, desc=True, nulls_last=False),)
    text = explain_view(topk)
    assert text.splitlines()[0] == (
        "TopK group_by=[#0] order_by=[#0, #1 desc] limit=1 [incremental: touched keys]"
    )
    # A DISTINCT ON expression outside the select list is a hidden key.
    p = _view("SELECT DISTINCT ON (b) a FROM t ORDER BY b")
    assert isinstance(p.expr, Project)
    assert isinstance(p.expr.input, TopK) and p.expr.input.group_key == (1,)


def test_window_functions_plan_one_window_per_over_clause() -> None:
    p = _view(
        "SELECT a, row_number() OVER (PARTITION BY b ORDER BY c) AS rn,"
        " lag(c, 2, 0) OVER (PARTITION BY b ORDER BY c) AS prev,"
        " sum(c) OVER () AS total FROM t"
    )
    windows = []
    node = p.expr
    while node.inputs():
        if isinstance(node, Window):
            windows.append(node)
        node = node.inputs()[0]
    assert len(windows) == 2
    shared = next(w for w in windows if w.partition_key)
    assert [f.func for f in shared.functions] == [WindowFunc.ROW_NUMBER, WindowFunc.LAG]
    assert shared.functions[1].offset == 2
    lines = explain_view(p.expr).splitlines()
    window_lines = [line for line in lines if "Window" in line]
    assert all(line.endswith("[incremental: touched keys]") for line in window_lines)
    assert any(
        "partition_by=[#1] order_by=[#2] functions=[row_number(), lag(#2, 2, #" in line
        for line in window_lines
    )
    types = dict(zip(p.desc.names, p.desc.types, strict=True))
    assert types["rn"].scalar_type.value == "bigint" and not types["rn"].nullable
    assert types["total"].scalar_type.value == "numeric"


def test_window_over_an_aggregate() -> None:
    p = select("SELECT b, sum(c) AS s, rank() OVER (ORDER BY sum(c) DESC) FROM t GROUP BY b")
    assert [n for n in p.desc.names] == ["b", "s", "rank"]


def test_negative_lag_offset_is_lead() -> None:
    p = select("SELECT lag(c, -1) OVER (ORDER BY a) FROM t")
    node = p.expr
    while not isinstance(node, Window):
        node = node.inputs()[0]
    assert node.functions[0].func is WindowFunc.LEAD and node.functions[0].offset == 1


def test_explain_shows_frames_and_the_window_rule() -> None:
    """Each framed function prints its frame; the default frame prints
    nothing; the Window is maintained by its touched partitions."""
    p = _view(
        "SELECT a, sum(c) OVER (PARTITION BY a ORDER BY c ROWS BETWEEN 1 PRECEDING"
        " AND 1 FOLLOWING) AS s, lag(c, a) OVER (PARTITION BY a ORDER BY c) AS l,"
        " max(c) OVER (PARTITION BY a ORDER BY c) AS m FROM t"
    )
    window = next(
        line
        for line in explain_view(p.expr, make_catalog().names()).splitlines()
        if "Window" in line
    )
    assert window.strip() == (
        "Window partition_by=[#0] order_by=[#2] functions=[sum(#2) rows between 1 preceding"
        " and 1 following, lag(#2, #13), max(#2)] [incremental: touched keys]"
    )


@pytest.mark.parametrize(
    ("sql", "code", "message", "near"),
    [
        (
            "SELECT a FROM t WHERE row_number() OVER () > 1",
            "42P20",
            "window functions are not allowed in WHERE",
            "row_number",
        ),
        (
            "SELECT b, count(*) FROM t GROUP BY b HAVING rank() OVER () > 1",
            "42P20",
            "window functions are not allowed in HAVING",
            "rank",
        ),
        (
            "SELECT sum(rank() OVER ()) OVER () FROM t",
            "42P20",
            "window function calls cannot be nested",
            "rank",
        ),
        (
            "SELECT DISTINCT ON (a) a, c FROM t ORDER BY c, a",
            "42P10",
            "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
            "c, a",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
            "0A000",
            "GROUPS in window frames not yet supported",
            "1 PRECEDING",
        ),
        (  # GROUPS first in OVER (...) opens a frame, not a window's name
            "SELECT sum(c) OVER (GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) FROM t",
            "0A000",
            "GROUPS in window frames not yet supported",
            "1 PRECEDING",
        ),
        (
            "SELECT sum(c) OVER (GROUPS 2 PRECEDING) FROM t",
            "0A000",
            "GROUPS in window frames not yet supported",
            "2 PRECEDING",
        ),
        (  # PostgreSQL's words: a CURRENT ROW end counts as preceding rows
            "SELECT sum(c) OVER (ORDER BY a ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) FROM t",
            "42P20",
            "frame starting from following row cannot have preceding rows",
            "1 FOLLOWING",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a ROWS UNBOUNDED PRECEDING EXCLUDE TIES) FROM t",
            "0A000",
            "EXCLUDE in window frames is not supported",
            "sum",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a, c RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
            "42P20",
            "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column",
            "1 PRECEDING",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY b RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
            "0A000",
            "RANGE with offset PRECEDING/FOLLOWING is not supported for column type text",
            "1 PRECEDING",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a ROWS BETWEEN a PRECEDING AND CURRENT ROW) FROM t",
            "42P10",
            "argument of ROWS must not contain variables",
            "a PRECEDING",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING) FROM t",
            "42P20",
            "frame starting from following row cannot have preceding rows",
            "1 FOLLOWING",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a ROWS BETWEEN UNBOUNDED FOLLOWING AND CURRENT ROW)"
            " FROM t",
            "42P20",
            "frame start cannot be UNBOUNDED FOLLOWING",
            "sum",
        ),
        (
            "SELECT sum(c) OVER (ORDER BY a ROWS -1 PRECEDING) FROM t",
            "22013",
            "frame offset must not be negative",
            "-1",
        ),
        (
            "SELECT nth_value(c, 0) OVER (ORDER BY a) FROM t",
            "22016",
            "argument of nth_value must be greater than zero",
            "0)",
        ),
        (
            "SELECT string_agg(b, ',') OVER (ORDER BY a) FROM t",
            "0A000",
            "string_agg over a window ordered by anything but the aggregated value",
            "a) FROM",
        ),
        ("SELECT ntile(2) OVER () FROM t", "0A000", "window function ntile", "ntile"),
        ("SELECT rank(c) OVER () FROM t", "42883", "function rank(bigint) does not exist", "rank"),
        (
            "SELECT lag(c, b) OVER () FROM t",
            "42883",
            "function lag(bigint, text) does not exist",
            "lag",
        ),
        (
            "SELECT count(DISTINCT c) OVER () FROM t",
            "0A000",
            "DISTINCT is not implemented for window functions",
            "count",
        ),
        (
            "SELECT sum(b) OVER () FROM t",
            "42883",
            "function sum(text) does not exist",
            "b) OVER",
        ),
        (
            "SELECT b, rank() OVER (ORDER BY c) FROM t GROUP BY b",
            "42803",
            'column "t.c" must appear in the GROUP BY clause',
            "c) FROM",
        ),
    ],
)
def test_errors(sql: str, code: str, message: str, near: str) -> None:
    with pytest.raises(SqlError) as info:
        plan(sql)
    assert info.value.code == code
    assert message in str(info.value)
    assert info.value.position is not None
    rest = sql[info.value.position - 1 :]  # positions are 1-based
    assert rest.startswith(near), (rest, near)


def test_column_lineage_of_window_columns() -> None:
    from coordinator_lib.expr.lineage import column_lineage

    p = _view("SELECT a, lag(b) OVER (PARTITION BY c ORDER BY d) AS prev FROM t")
    lineage = column_lineage(p.expr)
    table = next(iter(lineage[0]))[0]
    assert lineage[0] == {(table, 0)}
    assert lineage[1] == {(table, 1), (table, 2), (table, 3)}  # b, partition c, order d
