"""The Tidemark dialect parses Materialize's statements into sqlglot trees and
prints them back; syntax errors carry PostgreSQL's code and a position."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from coordinator_lib.sql import Tidemark, parse_sql
from coordinator_lib.sql.dialect import (
    AsOf,
    CreateSource,
    DefaultIndex,
    Explain,
    InCluster,
    WithOptions,
)
from coordinator_lib.sql.errors import ParseError

ROUND_TRIPS = [
    "CREATE MATERIALIZED VIEW mv AS SELECT a FROM t",
    "CREATE MATERIALIZED VIEW mv IN CLUSTER c AS SELECT a FROM t",
    "CREATE MATERIALIZED VIEW mv WITH (RETAIN HISTORY FOR '1h') AS SELECT a FROM t",
    "CREATE OR REPLACE MATERIALIZED VIEW IF NOT EXISTS s.mv (x) IN CLUSTER c "
    "WITH (RETAIN HISTORY FOR '1h') AS SELECT a FROM t UNION SELECT 1",
    "CREATE INDEX i ON t (a, b)",
    "CREATE INDEX i IN CLUSTER c ON t (a)",
    "CREATE INDEX ON t (a)",
    "CREATE INDEX IF NOT EXISTS i ON db.s.t (a)",
    "CREATE DEFAULT INDEX ON t",
    "CREATE DEFAULT INDEX IN CLUSTER c ON t",
    "CREATE SOURCE s FROM LOAD GENERATOR COUNTER",
    "CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK INTERVAL '500ms', MAX CARDINALITY 10)",
    "CREATE SOURCE IF NOT EXISTS s IN CLUSTER c FROM LOAD GENERATOR AUCTION "
    "(TICK INTERVAL '1s', SEED 3) FOR ALL TABLES",
    "SELECT a FROM t AS OF 5",
    "SELECT a FROM t AS OF AT LEAST 1700000000000",
    "SELECT a FROM t AS x ORDER BY a LIMIT 2 AS OF 7",
    "SELECT 1 UNION SELECT 2 AS OF 7",
    "DROP TABLE t",
    "DROP TABLE IF EXISTS t, u CASCADE",
    "DROP VIEW v RESTRICT",
    "DROP MATERIALIZED VIEW IF EXISTS mv, s.mv2 CASCADE",
    "DROP INDEX i, j",
    "DROP SOURCE s CASCADE",
    "DROP SINK k",
    "DROP CLUSTER REPLICA c.r",
    "EXPLAIN SELECT a FROM t",
    "EXPLAIN OPTIMIZED PLAN FOR SELECT a FROM t AS OF 3",
    "EXPLAIN MATERIALIZED VIEW mv",
    "EXPLAIN CREATE MATERIALIZED VIEW mv AS SELECT 1",
    "CREATE TABLE t (a INT NOT NULL, b TEXT)",
    "CREATE VIEW v AS SELECT a FROM t",
    "SELECT TO_CHAR(ts, 'FMDay \"at\" HH12:MI AM') FROM t",
]


def test_to_char_keeps_its_template() -> None:
    """sqlglot would read TO_CHAR as TimeToStr with strftime codes; the
    binder needs PostgreSQL's template text."""
    [tree] = parse_sql("SELECT to_char(ts, 'YYYY-MM-DD \"Q\"Q') FROM t")
    call = tree.expressions[0]
    assert isinstance(call, exp.Anonymous) and call.name.lower() == "to_char"
    assert call.expressions[1].this == 'YYYY-MM-DD "Q"Q'


def test_is_not_null_prints_as_written() -> None:
    """`r IS NOT NULL` and `NOT r IS NULL` differ for a row constructor (every
    field non-NULL, against some field non-NULL), and a stored view is
    re-read from the printed text: each prints back as written."""
    sql = "SELECT (a, b) IS NOT NULL, NOT (a, b) IS NULL, a IS NOT NULL FROM t"
    [tree] = parse_sql(sql)
    assert tree.sql(dialect=Tidemark) == sql


@pytest.mark.parametrize("sql", ROUND_TRIPS)
def test_round_trip(sql: str) -> None:
    [tree] = parse_sql(sql)
    printed = tree.sql(dialect=Tidemark)
    [again] = parse_sql(printed)
    assert again == tree
    assert again.sql(dialect=Tidemark) == printed


def test_dialect_is_registered_with_sqlglot() -> None:
    tree = sqlglot.parse_one("SELECT a FROM t AS OF 5", read="tidemark")
    assert isinstance(tree.args["as_of"], AsOf)


def test_materialized_view_properties() -> None:
    [tree] = parse_sql(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS mv (x, y) IN CLUSTER quickstart "
        "WITH (RETAIN HISTORY = FOR '2h') AS SELECT a, b FROM t"
    )
    assert isinstance(tree, exp.Create) and tree.args["kind"] == "VIEW"
    assert tree.args["exists"] is True
    props = tree.args["properties"].expressions
    assert any(isinstance(p, exp.MaterializedProperty) for p in props)
    cluster = next(p for p in props if isinstance(p, InCluster))
    assert cluster.this.name == "quickstart"
    options = next(p for p in props if isinstance(p, WithOptions)).expressions
    assert [(o.name, o.args["value"].this) for o in options] == [("RETAIN HISTORY", "2h")]
    assert [c.name for c in tree.this.expressions] == ["x", "y"]
    assert isinstance(tree.expression, exp.Select)


def test_plain_materialized_view_is_sqlglots_own_shape() -> None:
    [ours] = parse_sql("CREATE MATERIALIZED VIEW mv AS SELECT 1")
    assert isinstance(ours, exp.Create)
    assert isinstance(ours.args["properties"].expressions[0], exp.MaterializedProperty)


def test_create_index_forms() -> None:
    [named] = parse_sql("CREATE INDEX i IN CLUSTER c ON s.t (a, b)")
    index = named.this
    assert isinstance(index, exp.Index) and index.this.name == "i"
    assert index.args["table"].name == "t" and index.args["table"].db == "s"
    assert [c.this.name for c in index.args["params"].args["columns"]] == ["a", "b"]
    assert isinstance(named.args["properties"].expressions[0], InCluster)
    [anonymous] = parse_sql("CREATE INDEX ON t (a)")
    assert anonymous.this.this is None
    [default] = parse_sql("CREATE DEFAULT INDEX ON t")
    assert any(isinstance(p, DefaultIndex) for p in default.args["properties"].expressions)
    assert default.this.args["params"].args.get("columns") is None


def test_create_source() -> None:
    [tree] = parse_sql(
        "CREATE SOURCE src IN CLUSTER c FROM LOAD GENERATOR AUCTION "
        "(TICK INTERVAL '1s', SEED 42) FOR ALL TABLES"
    )
    assert isinstance(tree, CreateSource)
    assert tree.this.name == "src" and tree.args["generator"] == "AUCTION"
    assert tree.args["cluster"].this.name == "c"
    assert [(o.name, o.args["value"].this) for o in tree.args["options"]] == [
        ("TICK INTERVAL", "1s"),
        ("SEED", "42"),
    ]
    assert tree.args["for_all_tables"] is True


@pytest.mark.parametrize(
    ("sql", "at_least"),
    [("SELECT * FROM t AS OF 10", False), ("SELECT * FROM t AS OF AT LEAST 10", True)],
)
def test_as_of(sql: str, at_least: bool) -> None:
    [tree] = parse_sql(sql)
    as_of = tree.args["as_of"]
    assert as_of.this.this == "10" and bool(as_of.args["at_least"]) is at_least
    # `AS OF` is not a table alias
    assert tree.args["from_"].this.alias == ""


@pytest.mark.parametrize(
    ("sql", "kind", "materialized", "names", "exists", "cascade", "restrict"),
    [
        ("DROP TABLE t", "TABLE", False, ["t"], False, False, False),
        ("DROP TABLE IF EXISTS t, u CASCADE", "TABLE", False, ["t", "u"], True, True, False),
        ("DROP VIEW v RESTRICT", "VIEW", False, ["v"], False, False, True),
        ("DROP MATERIALIZED VIEW mv, mv2", "VIEW", True, ["mv", "mv2"], False, False, False),
        ("DROP INDEX IF EXISTS i, j", "INDEX", False, ["i", "j"], True, False, False),
        ("DROP SOURCE s CASCADE", "SOURCE", False, ["s"], False, True, False),
    ],
)
def test_drop_forms(
    sql: str,
    kind: str,
    materialized: bool,
    names: list[str],
    exists: bool,
    cascade: bool,
    restrict: bool,
) -> None:
    [tree] = parse_sql(sql)
    assert isinstance(tree, exp.Drop)
    assert tree.args["kind"] == kind
    assert bool(tree.args.get("materialized")) is materialized
    assert [t.name for t in tree.args["tables"]] == names
    assert bool(tree.args["exists"]) is exists
    assert bool(tree.args["cascade"]) is cascade
    assert bool(tree.args["restrict"]) is restrict


def test_explain_forms() -> None:
    [plain] = parse_sql("EXPLAIN SELECT 1")
    assert isinstance(plain, Explain) and isinstance(plain.this, exp.Select)
    [staged] = parse_sql("EXPLAIN OPTIMIZED PLAN AS TEXT FOR SELECT 1")
    assert staged.args["stage"] == "OPTIMIZED"
    [existing] = parse_sql("EXPLAIN PLAN FOR MATERIALIZED VIEW s.mv")
    assert existing.args["kind"] == "MATERIALIZED VIEW" and existing.this.name == "mv"


def test_several_statements() -> None:
    trees = parse_sql("CREATE TABLE t (a int); INSERT INTO t VALUES (1);; SELECT * FROM t;")
    assert [type(t).__name__ for t in trees] == ["Create", "Insert", "Select"]


@pytest.mark.parametrize(
    ("sql", "position", "near"),
    [
        ("SELECT a FROM t WHERE", 22, "syntax error at end of input"),  # as PostgreSQL
        ("SELECT a FROM t AS OF", 20, "OF"),
        ("CREATE SOURCE s FROM KAFKA", 17, "FROM"),
        ("CREATE INDEX i ON t", 19, "t"),
    ],
)
def test_syntax_errors_have_code_and_position(sql: str, position: int, near: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_sql(sql)
    assert info.value.code == "42601"
    assert info.value.position == position
    assert near in str(info.value)
    assert f"at or near position {position}" in str(info.value)


def test_unterminated_string() -> None:
    with pytest.raises(ParseError) as info:
        parse_sql("SELECT 'abc FROM t")
    assert info.value.code == "42601"
    assert info.value.position == 8
    assert "unterminated" in info.value.message


def test_operator_positions_are_recorded() -> None:
    [tree] = parse_sql("SELECT a  +  (b) FROM t WHERE c BETWEEN 1 AND 2")
    add = tree.expressions[0]
    assert add.meta["op_start"] == 10
    between = tree.args["where"].this
    assert between.meta["op_start"] == 32
