"""SHOW/SET/RESET, transactions, SUBSCRIBE, cursors, COPY TO STDOUT and EXPLAIN
TIMESTAMP become plans the adapter executes."""

from __future__ import annotations

import pytest

from coordinator_lib.expr import Get, Project
from coordinator_lib.repr import GlobalId
from coordinator_lib.sql import (
    AbortTransactionPlan,
    AsOfTime,
    ClosePlan,
    CommitTransactionPlan,
    CopyToPlan,
    DeclarePlan,
    ExplainTimestampPlan,
    FetchPlan,
    SelectPlan,
    SetVariablePlan,
    ShowVariablePlan,
    StartTransactionPlan,
    SubscribePlan,
    plan_statement,
    plan_statements,
)
from coordinator_lib.sql.errors import (
    InvalidParameter,
    ParseError,
    SqlError,
    UnknownObject,
    UnsupportedFeature,
    WrongObjectType,
)
from tests.sql.support import T_DESC, U_DESC, make_catalog, select


def fails(sql: str, error: type[SqlError], code: str, position: int | None) -> str:
    catalog = make_catalog()
    with pytest.raises(error) as info:
        plan_statement(sql, catalog)
    assert info.value.code == code
    assert info.value.position == position
    return info.value.message


# --- variables -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("SHOW search_path", "search_path"),
        ("SHOW Cluster", "cluster"),
        ('SHOW "TimeZone"', "timezone"),
        ("SHOW ALL", "all"),
        ("SHOW TRANSACTION ISOLATION LEVEL", "transaction_isolation"),
        ("SHOW TIME ZONE", "timezone"),
        ("SHOW database", "database"),
    ],
)
def test_show_variable(sql: str, name: str) -> None:
    assert plan_statement(sql, make_catalog()) == ShowVariablePlan(name)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SET search_path = a, B", SetVariablePlan("search_path", "a, b")),
        (
            "SET search_path TO 'My Schema', \"Other\"",
            SetVariablePlan("search_path", "My Schema, Other"),
        ),
        ("SET SESSION cluster = quickstart", SetVariablePlan("cluster", "quickstart")),
        ("SET LOCAL statement_timeout TO 1000", SetVariablePlan("statement_timeout", "1000", True)),
        ("SET extra_float_digits = -3", SetVariablePlan("extra_float_digits", "-3")),
        ("SET x = 1.5", SetVariablePlan("x", "1.5")),
        ("SET enable_x TO ON", SetVariablePlan("enable_x", "on")),
        ("SET enable_x = true", SetVariablePlan("enable_x", "true")),
        ("SET Application_Name = 'psql'", SetVariablePlan("application_name", "psql")),
        ("SET cluster TO DEFAULT", SetVariablePlan("cluster", None)),
        ("SET TIME ZONE 'UTC'", SetVariablePlan("timezone", "UTC")),
        ("SET TIME ZONE LOCAL", SetVariablePlan("timezone", None)),
        ("SET NAMES 'UTF8'", SetVariablePlan("client_encoding", "UTF8")),
        ("SET SCHEMA 'app'", SetVariablePlan("search_path", "app")),
        ("RESET cluster", SetVariablePlan("cluster", None)),
        ("RESET ALL", SetVariablePlan("all", None)),
        (
            "SET TRANSACTION ISOLATION LEVEL STRICT SERIALIZABLE",
            SetVariablePlan("transaction_isolation", "strict serializable", local=True),
        ),
        (
            "SET TRANSACTION READ ONLY",
            SetVariablePlan("transaction_read_only", "on", local=True),
        ),
        (
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            SetVariablePlan("transaction_isolation", "serializable"),
        ),
    ],
)
def test_set_variable(sql: str, expected: SetVariablePlan) -> None:
    assert plan_statement(sql, make_catalog()) == expected


def test_set_transaction_with_two_modes_is_refused() -> None:
    fails("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY", UnsupportedFeature, "0A000", 1)


# --- transactions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN", StartTransactionPlan()),
        ("BEGIN WORK", StartTransactionPlan()),
        ("BEGIN TRANSACTION READ ONLY", StartTransactionPlan(read_only=True)),
        (
            "BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE",
            StartTransactionPlan("serializable", False),
        ),
        (
            "START TRANSACTION ISOLATION LEVEL STRICT SERIALIZABLE",
            StartTransactionPlan("strict serializable"),
        ),
        (
            "START TRANSACTION ISOLATION LEVEL READ COMMITTED",
            StartTransactionPlan("read committed"),
        ),
        ("START TRANSACTION NOT DEFERRABLE", StartTransactionPlan()),
        ("COMMIT", CommitTransactionPlan()),
        ("COMMIT TRANSACTION", CommitTransactionPlan()),
        ("END WORK", CommitTransactionPlan()),
        ("ROLLBACK", AbortTransactionPlan()),
        ("ABORT", AbortTransactionPlan()),
    ],
)
def test_transactions(sql: str, expected: object) -> None:
    assert plan_statement(sql, make_catalog()) == expected


def test_transaction_block_in_one_text() -> None:
    plans = plan_statements("BEGIN; SELECT a FROM t; END", make_catalog())
    assert isinstance(plans[0], StartTransactionPlan) and isinstance(plans[1], SelectPlan)
    assert plans[2] == CommitTransactionPlan()


# --- SUBSCRIBE ---------------------------------------------------------------------


def test_subscribe_to_a_table() -> None:
    plan = plan_statement("SUBSCRIBE TO t", make_catalog())
    assert plan == SubscribePlan(
        Get(GlobalId.user(1), T_DESC),
        from_id=GlobalId.user(1),
        depends_on=frozenset({GlobalId.user(1)}),
    )


def test_subscribe_to_a_view_inlines_it() -> None:
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE VIEW v AS SELECT a, y FROM u", catalog))
    plan = plan_statement("SUBSCRIBE v WITH (SNAPSHOT = false, PROGRESS = true)", catalog)
    assert isinstance(plan, SubscribePlan)
    assert plan.expr == catalog.resolve(("v",)).expr
    assert plan.from_id == GlobalId.user(4)
    assert not plan.with_snapshot and plan.progress
    assert plan.depends_on == {GlobalId.user(2), GlobalId.user(4)}


def test_subscribe_to_a_materialized_view_reads_it() -> None:
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE MATERIALIZED VIEW mv AS SELECT a FROM u", catalog))
    plan = plan_statement("SUBSCRIBE mv WITH (PROGRESS)", catalog)
    assert isinstance(plan, SubscribePlan) and plan.progress and plan.with_snapshot
    assert isinstance(plan.expr, Get) and plan.expr.id == GlobalId.user(4)


def test_subscribe_to_a_query() -> None:
    plan = plan_statement(
        "SUBSCRIBE (SELECT a, y AS why FROM u WHERE a > 1) AS OF AT LEAST 5 UP TO 10",
        make_catalog(),
    )
    assert isinstance(plan, SubscribePlan)
    assert plan.expr == select("SELECT a, y AS why FROM u WHERE a > 1").expr
    assert plan.expr.desc.names == ("a", "why")
    assert plan.from_id is None
    assert plan.as_of == AsOfTime(5, at_least=True) and plan.up_to == 10
    assert plan.depends_on == {GlobalId.user(2)}


def test_subscribe_times_accept_timestamps() -> None:
    plan = plan_statement(
        "SUBSCRIBE t AS OF '1970-01-01 00:00:01+00' UP TO '1970-01-01 00:00:02+00'",
        make_catalog(),
    )
    assert isinstance(plan, SubscribePlan)
    assert plan.as_of == AsOfTime(1000) and plan.up_to == 2000


def test_subscribe_errors() -> None:
    assert "ORDER BY" in fails(
        "SUBSCRIBE (SELECT a FROM t ORDER BY a)", UnsupportedFeature, "0A000", 37
    )
    fails("SUBSCRIBE (SELECT a FROM t LIMIT 3)", UnsupportedFeature, "0A000", 34)
    fails("SUBSCRIBE (SELECT a FROM t AS OF 3)", ParseError, "42601", 31)
    fails("SUBSCRIBE nope", UnknownObject, "42P01", 11)
    fails("SUBSCRIBE t WITH (FOO)", ParseError, "42601", 19)
    fails("SUBSCRIBE t WITH (SNAPSHOT = 3)", InvalidParameter, "22023", 30)
    fails("SUBSCRIBE t WITH (PROGRESS, PROGRESS)", InvalidParameter, "22023", 29)
    fails("SUBSCRIBE t AS OF 10 UP TO 5", InvalidParameter, "22023", 28)
    fails("SUBSCRIBE t UP TO NULL", UnsupportedFeature, "0A000", 19)
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE INDEX i ON t (a)", catalog))
    with pytest.raises(WrongObjectType):
        plan_statement("SUBSCRIBE i", catalog)


# --- cursors ------------------------------------------------------------------------


def test_declare() -> None:
    catalog = make_catalog()
    plan = plan_statement("DECLARE C CURSOR FOR SELECT a FROM t", catalog)
    assert isinstance(plan, DeclarePlan) and plan.name == "c"
    assert plan.plan == select("SELECT a FROM t")
    assert plan.sql == "SELECT a FROM t"
    plan = plan_statement("DECLARE c CURSOR WITHOUT HOLD FOR SUBSCRIBE t", catalog)
    assert isinstance(plan, DeclarePlan) and isinstance(plan.plan, SubscribePlan)
    assert plan.sql == "SUBSCRIBE t"
    fails("DECLARE c CURSOR WITH HOLD FOR SELECT 1", UnsupportedFeature, "0A000", 1)
    fails("DECLARE c CURSOR FOR INSERT INTO u VALUES (1)", UnsupportedFeature, "0A000", 22)
    fails("DECLARE c CURSOR FOR SELECT * FROM nope", UnknownObject, "42P01", 36)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("FETCH c", FetchPlan("c")),
        ("FETCH 5 c", FetchPlan("c", 5)),
        ("FETCH FORWARD 0 FROM c", FetchPlan("c", 0)),
        ("FETCH NEXT IN c", FetchPlan("c", 1)),
        ("FETCH ALL c", FetchPlan("c", None)),
        ("FETCH FORWARD ALL FROM c WITH (TIMEOUT = '1s')", FetchPlan("c", None, 1000)),
        ("FETCH 10 c WITH (timeout='0s')", FetchPlan("c", 10, 0)),
        ('FETCH "Cur"', FetchPlan("Cur")),
    ],
)
def test_fetch(sql: str, expected: FetchPlan) -> None:
    assert plan_statement(sql, make_catalog()) == expected


def test_fetch_errors_and_close() -> None:
    fails("FETCH 1.5 c", InvalidParameter, "22023", 7)
    fails("FETCH c WITH (WAIT = '1s')", InvalidParameter, "22023", 15)
    fails("FETCH c WITH (TIMEOUT = 'later')", InvalidParameter, "22023", 25)
    assert plan_statement("CLOSE C", make_catalog()) == ClosePlan("c")


# --- COPY / EXPLAIN TIMESTAMP -----------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "fmt"),
    [
        ("COPY (SELECT a FROM t) TO STDOUT", "text"),
        ("COPY (SELECT a FROM t) TO STDOUT WITH (FORMAT csv)", "csv"),
        ("COPY (SELECT a FROM t) TO STDOUT (FORMAT 'binary')", "binary"),
        ("COPY (SELECT a FROM t) TO STDOUT WITH (FORMAT TEXT)", "text"),
    ],
)
def test_copy_query(sql: str, fmt: str) -> None:
    plan = plan_statement(sql, make_catalog())
    assert plan == CopyToPlan(select("SELECT a FROM t"), fmt)


def test_copy_table_and_subscribe() -> None:
    catalog = make_catalog()
    whole = plan_statement("COPY u TO STDOUT", catalog)
    assert whole == CopyToPlan(select("SELECT * FROM u"))
    some = plan_statement("COPY u (y, a) TO STDOUT (FORMAT csv)", catalog)
    assert isinstance(some, CopyToPlan) and some.format == "csv"
    assert isinstance(some.plan, SelectPlan) and some.plan.desc.names == ("y", "a")
    assert isinstance(some.plan.expr, Project)
    sub = plan_statement("COPY (SUBSCRIBE u) TO STDOUT WITH (FORMAT binary)", catalog)
    assert isinstance(sub, CopyToPlan) and sub.format == "binary"
    assert sub.plan == SubscribePlan(
        Get(GlobalId.user(2), U_DESC),
        from_id=GlobalId.user(2),
        depends_on=frozenset({GlobalId.user(2)}),
    )


def test_copy_errors() -> None:
    assert 'format "json"' in fails(
        "COPY (SELECT 1) TO STDOUT (FORMAT json)", InvalidParameter, "22023", 35
    )
    fails("COPY (SELECT 1) TO STDOUT (HEADER)", UnsupportedFeature, "0A000", 28)
    fails("COPY (SELECT 1) TO STDOUT (FORMAT csv, FORMAT csv)", InvalidParameter, "22023", 40)
    fails("COPY (DELETE FROM u) TO STDOUT", UnsupportedFeature, "0A000", 7)
    fails("COPY u (nope) TO STDOUT", SqlError, "42703", 9)
    fails("COPY nope TO STDOUT", UnknownObject, "42P01", 6)


def test_explain_timestamp() -> None:
    plan = plan_statement("EXPLAIN TIMESTAMP FOR SELECT a FROM t AS OF 7", make_catalog())
    assert plan == ExplainTimestampPlan(select("SELECT a FROM t AS OF 7"), "text")
    plan = plan_statement("EXPLAIN TIMESTAMP AS JSON FOR SELECT * FROM u", make_catalog())
    assert isinstance(plan, ExplainTimestampPlan) and plan.format == "json"
    fails("EXPLAIN TIMESTAMP FOR SUBSCRIBE t", UnsupportedFeature, "0A000", 23)
