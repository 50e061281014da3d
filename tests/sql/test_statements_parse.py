"""The session and catalog statements parse into the dialect's nodes, print
back in Materialize's syntax and report syntax errors with a position."""

from __future__ import annotations

import pytest
from sqlglot import exp

from coordinator_lib.sql import Tidemark, parse_sql
from coordinator_lib.sql.errors import ParseError, UnsupportedFeature
from coordinator_lib.sql.statements import (
    AbortTransaction,
    AlterObject,
    CloseCursor,
    CommitTransaction,
    CopyTo,
    DeclareCursor,
    ExplainTimestamp,
    FetchCursor,
    ResetVariable,
    SetTransaction,
    SetVariable,
    ShowColumns,
    ShowCreate,
    ShowObjects,
    ShowVariable,
    StartTransaction,
    Subscribe,
)

ROUND_TRIPS = [
    "SHOW TABLES",
    "SHOW OBJECTS FROM s",
    "SHOW MATERIALIZED VIEWS FROM d.s LIKE 'a%'",
    "SHOW INDEXES ON t",
    "SHOW SCHEMAS FROM materialize",
    "SHOW DATABASES",
    "SHOW CLUSTERS",
    "SHOW SOURCES IN CLUSTER c",
    "SHOW VIEWS WHERE name = 'v'",
    "SHOW COLUMNS FROM s.t",
    "SHOW CREATE MATERIALIZED VIEW mv",
    "SHOW CREATE INDEX i",
    "SHOW search_path",
    "SHOW ALL",
    "SHOW TRANSACTION ISOLATION LEVEL",
    "SET search_path = a, \"B\", 'c'",
    "SET LOCAL x TO 5",
    "SET SESSION x = -1.5",
    "SET x TO DEFAULT",
    "SET TIME ZONE 'UTC'",
    "SET NAMES 'UTF8'",
    "SET schema = x",
    "SET TRANSACTION ISOLATION LEVEL STRICT SERIALIZABLE",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "RESET search_path",
    "RESET ALL",
    "BEGIN",
    "BEGIN WORK ISOLATION LEVEL READ COMMITTED, READ ONLY",
    "START TRANSACTION READ WRITE",
    "COMMIT",
    "ROLLBACK",
    "SUBSCRIBE TO t",
    "SUBSCRIBE (SELECT a FROM t WHERE a > 1) WITH (SNAPSHOT = false, PROGRESS) "
    "AS OF AT LEAST 5 UP TO 10",
    "DECLARE c CURSOR FOR SUBSCRIBE t",
    "DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1",
    "FETCH 5 c",
    "FETCH FORWARD ALL FROM c WITH (TIMEOUT = '1s')",
    "FETCH c WITH (timeout='1s')",
    "CLOSE c",
    "COPY (SELECT 1) TO STDOUT",
    "COPY (SUBSCRIBE t) TO STDOUT WITH (FORMAT binary)",
    "COPY t (a, b) TO STDOUT (FORMAT csv, HEADER)",
    "EXPLAIN TIMESTAMP FOR SELECT 1",
    "EXPLAIN TIMESTAMP AS JSON FOR SELECT * FROM t",
    "ALTER TABLE t RENAME TO x",
    "ALTER MATERIALIZED VIEW IF EXISTS s.mv RENAME TO mv2",
    "ALTER INDEX i SET (RETAIN HISTORY = FOR '1h')",
    "ALTER SOURCE s RESET (RETAIN HISTORY)",
    "CREATE SCHEMA IF NOT EXISTS d.s",
    "CREATE DATABASE d",
    "CREATE TABLE t (a INT) WITH (RETAIN HISTORY FOR '1h')",
    "CREATE INDEX i ON t (a) WITH (RETAIN HISTORY FOR '1h')",
    "CREATE DEFAULT INDEX t_primary_idx IN CLUSTER c ON t",
    "CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1s') "
    "WITH (RETAIN HISTORY FOR '1h')",
    "SELECT * FROM t WHERE a = $1 AND b = $2",
]


@pytest.mark.parametrize("sql", ROUND_TRIPS)
def test_round_trip(sql: str) -> None:
    [tree] = parse_sql(sql)
    printed = tree.sql(dialect=Tidemark)
    [again] = parse_sql(printed)
    assert again == tree
    assert again.sql(dialect=Tidemark) == printed


@pytest.mark.parametrize(
    ("sql", "node"),
    [
        ("SHOW TABLES", ShowObjects),
        ("SHOW COLUMNS FROM t", ShowColumns),
        ("SHOW CREATE VIEW v", ShowCreate),
        ("SHOW cluster", ShowVariable),
        ("SET cluster = c", SetVariable),
        ("RESET cluster", ResetVariable),
        ("SET TRANSACTION READ ONLY", SetTransaction),
        ("BEGIN", StartTransaction),
        ("START TRANSACTION", StartTransaction),
        ("COMMIT WORK AND NO CHAIN", CommitTransaction),
        ("END", CommitTransaction),
        ("ABORT TRANSACTION", AbortTransaction),
        ("ROLLBACK WORK", AbortTransaction),
        ("SUBSCRIBE t", Subscribe),
        ("DECLARE c CURSOR FOR SELECT 1", DeclareCursor),
        ("FETCH NEXT IN c", FetchCursor),
        ("CLOSE c", CloseCursor),
        ("COPY t TO STDOUT", CopyTo),
        ("EXPLAIN TIMESTAMP FOR SELECT 1", ExplainTimestamp),
        ("ALTER VIEW v RENAME TO w", AlterObject),
    ],
)
def test_statement_nodes(sql: str, node: type) -> None:
    [tree] = parse_sql(sql)
    assert isinstance(tree, node)
    assert tree.meta["start"] == 0


def test_statements_split_on_semicolons() -> None:
    trees = parse_sql("BEGIN; SELECT 1; END; SHOW TABLES; SET x = 1")
    assert [type(t).__name__ for t in trees] == [
        "StartTransaction",
        "Select",
        "EndStatement",  # sqlglot's own node for a lone END after other statements
        "ShowObjects",
        "SetVariable",
    ]


def test_parsed_fields() -> None:
    [show] = parse_sql("SHOW INDEXES ON s.t LIKE 'x%'")
    assert show.args["kind"] == "INDEXES" and show.args["on"].name == "t"
    assert show.args["like"].this == "x%"
    [setting] = parse_sql("SET LOCAL Search_Path TO a, 'b'")
    assert setting.name == "search_path" and setting.args["local"] is True
    assert [v.name for v in setting.expressions] == ["a", "b"]
    [begin] = parse_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    assert begin.args["isolation"] == "repeatable read" and begin.args["read_only"] is True
    [fetch] = parse_sql("FETCH FORWARD 7 FROM c")
    assert fetch.args["count"].this == "7" and fetch.this.name == "c"
    [declare] = parse_sql("DECLARE c CURSOR WITH HOLD FOR SELECT 1")
    assert declare.args["hold"] is True and isinstance(declare.expression, exp.Select)
    [subscribe] = parse_sql("SUBSCRIBE TO s.mv AS OF 3")
    assert subscribe.this.name == "mv" and subscribe.args["as_of"].this.this == "3"
    [schema] = parse_sql("CREATE SCHEMA d.s")
    assert schema.kind == "SCHEMA" and schema.this.name == "s" and schema.this.db == "d"
    [param] = parse_sql("SELECT $12")
    assert isinstance(param.expressions[0], exp.Parameter)


@pytest.mark.parametrize(
    ("sql", "position"),
    [
        ("SHOW CREATE FUNCTION f", 13),
        ("SHOW COLUMNS t", 14),
        ("SHOW 'x'", 6),
        ("SET x 5", 7),
        ("BEGIN ISOLATION LEVEL FOO", 23),
        ("SUBSCRIBE t UP TO 3 AS OF 5", 21),
        ("SUBSCRIBE (SHOW TABLES)", 12),
        ("DECLARE c FOR SELECT 1", 11),
        ("FETCH 5", 7),
        ("COPY t", 6),
        ("EXPLAIN TIMESTAMP AS XML FOR SELECT 1", 22),
        ("ALTER TABLE t RENAME TO s.x", 26),
        ("SELECT 1 FROM t WHERE", 22),  # "at end of input", as PostgreSQL
    ],
)
def test_syntax_errors_have_positions(sql: str, position: int) -> None:
    with pytest.raises(ParseError) as info:
        parse_sql(sql)
    assert info.value.code == "42601"
    assert info.value.position == position


@pytest.mark.parametrize(
    ("sql", "words", "position"),
    [
        ("SHOW SUBSOURCES", "SHOW SUBSOURCES", 6),
        ("SHOW CLUSTER REPLICAS", "SHOW CLUSTER REPLICAS", 6),
        ("SHOW CREATE SINK k", "SHOW CREATE SINK", 6),
        ("FETCH BACKWARD 1 c", "BACKWARD", 7),
        ("COPY t FROM '/tmp/x'", "FROM STDIN", 13),
        ("COPY (SELECT 1) TO '/tmp/x'", "TO STDOUT", 20),
        ("SUBSCRIBE t ENVELOPE UPSERT (KEY (a))", "ENVELOPE", 13),
        ("CLOSE ALL", "CLOSE ALL", 7),
        ("COMMIT AND CHAIN", "AND CHAIN", 12),
    ],
)
def test_unsupported_syntax(sql: str, words: str, position: int) -> None:
    with pytest.raises(UnsupportedFeature) as info:
        parse_sql(sql)
    assert info.value.code == "0A000"
    assert words in info.value.message
    assert info.value.position == position
