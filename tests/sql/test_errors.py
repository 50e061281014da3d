"""Every error names the problem, carries PostgreSQL's SQLSTATE and, where the
statement text says where, a 1-based position that str(error) shows."""

from __future__ import annotations

import pytest

from coordinator_lib.sql import InMemoryCatalog, plan_statement
from coordinator_lib.sql.errors import (
    AmbiguousColumn,
    AmbiguousFunction,
    CannotCoerce,
    DependentObjects,
    DuplicateAlias,
    DuplicateColumn,
    DuplicateObject,
    GroupingError,
    InvalidColumnReference,
    InvalidDatetimeFormat,
    InvalidParameter,
    InvalidTextRepresentation,
    NotNullViolation,
    NumericValueOutOfRange,
    ParseError,
    ReservedName,
    SqlError,
    TypeMismatch,
    UndefinedFunction,
    UndefinedOperator,
    UnknownColumn,
    UnknownObject,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.ordered import WindowingError
from tests.sql.support import make_catalog

# (sql, error class, SQLSTATE, position, words the message must contain)
CASES = [
    ("SELECT nope FROM t", UnknownColumn, "42703", 8, ['"nope"']),
    ("SELECT t.nope FROM t", UnknownColumn, "42703", 8, ['column "t.nope" does not exist']),
    ("SELECT a FROM t WHERE b = nope", UnknownColumn, "42703", 27, ['"nope"']),
    ("SELECT a FROM nope", UnknownObject, "42P01", 15, ["nope"]),
    ("SELECT x.a FROM t", UnknownObject, "42P01", 8, ['"x"']),
    ("SELECT a FROM t, u", AmbiguousColumn, "42702", 8, ['"a"']),
    # Materialize's wording where it differs from PostgreSQL's (the SQLSTATE is the same)
    ("SELECT b + 1 FROM t", UndefinedOperator, "42883", 10, ["no overload for text + integer"]),
    ("SELECT a FROM t WHERE b > 1", UndefinedOperator, "42883", 25, ["text > integer"]),
    (
        "SELECT g || g FROM t",
        UndefinedOperator,
        "42883",
        10,
        ["does not exist: boolean || boolean"],
    ),
    ("SELECT a FROM t JOIN u ON row_number() OVER () > 1", WindowingError, "42P20", 27, ["in ON"]),
    (
        "(SELECT a FROM t) UNION (SELECT a FROM t) ORDER BY sum(a)",
        GroupingError,
        "42803",
        52,
        [
            "aggregate functions are not allowed in ORDER BY clause of a set expression"
            " (function pg_catalog.sum)"
        ],
    ),
    (
        "(SELECT a FROM t) UNION (SELECT a FROM t) ORDER BY lag(a) OVER ()",
        WindowingError,
        "42P20",
        52,
        [
            "window functions are not allowed in ORDER BY clause of a set expression"
            " (function pg_catalog.lag)"
        ],
    ),
    ("SELECT 1 AS a, a FROM t ORDER BY a", AmbiguousColumn, "42702", 34, ['reference "a" is']),
    ("SELECT a FROM t WHERE a", TypeMismatch, "42804", 23, ["WHERE", "integer"]),
    ("SELECT CASE WHEN g THEN 1 ELSE b END FROM t", TypeMismatch, "42804", 32, ["CASE"]),
    ("SELECT d::integer FROM t", CannotCoerce, "42846", 8, ["date", "integer"]),
    ("SELECT foo(a) FROM t", UndefinedFunction, "42883", 8, ["foo(integer)"]),
    ("SELECT sum(b) FROM t", UndefinedFunction, "42883", 12, ["sum(text)"]),
    ("SELECT b FROM t GROUP BY a", GroupingError, "42803", 8, ['"t.b"', "GROUP BY"]),
    ("SELECT (SELECT)", ParseError, "42601", 8, ["return 1 column, got 0 columns"]),
    ("SELECT 1 < ALL (SELECT a, x FROM u)", ParseError, "42601", 8, ["2 columns available"]),
    (
        "SELECT (SELECT count(t.a)) FROM t",
        UnsupportedFeature,
        "0A000",
        16,
        ["aggregate functions that refer exclusively to outer columns"],
    ),
    ("SELECT count() FROM t", WrongObjectType, "42809", 8, ["count(*) must be used"]),
    ("SELECT abs(a) FILTER (WHERE a > 1) FROM t", WrongObjectType, "42809", 8, ["abs is not an"]),
    (
        "SELECT count(*) FILTER (WHERE count(1) > 5) FROM t GROUP BY a",
        GroupingError,
        "42803",
        31,
        ["aggregate functions are not allowed in FILTER"],
    ),
    ("SELECT a FROM t ORDER BY 2", InvalidColumnReference, "42P10", 26, ["out of range (1 - 1)"]),
    ("SELECT row_number() FROM t", WrongObjectType, "42809", 8, ["requires an OVER clause"]),
    ("SELECT lag(a) FROM t", WrongObjectType, "42809", 8, ["window function lag requires"]),
    (
        "SELECT a FROM t WHERE count(*) > 1",
        GroupingError,
        "42803",
        23,
        ["aggregate functions are not allowed in WHERE clause"],
    ),
    (
        "SELECT avg(NULL)",
        AmbiguousFunction,
        "42725",
        8,
        ["avg(unknown) is not unique", "unable to determine which implementation to use"],
    ),
    ("SELECT sum('1')", AmbiguousFunction, "42725", 12, ["sum(unknown) is not unique"]),
    ("SELECT sum(count(*)) FROM t", GroupingError, "42803", 12, ["nested"]),
    ("SELECT a FROM t SEMI JOIN u ON t.a = u.a", UnsupportedFeature, "0A000", 27, ["SEMI"]),
    ("SELECT a FROM t LEFT JOIN u", ParseError, "42601", 27, ["ON or USING"]),
    ("SELECT a FROM t WHERE a IN (SELECT a, x FROM u)", ParseError, "42601", 23, ["columns"]),
    ("SELECT (SELECT a, x FROM u) FROM t", ParseError, "42601", 8, ["1 column, got 2"]),
    ("CREATE TABLE t (x int)", DuplicateObject, "42P07", 14, ["materialize.public.t"]),
    ("CREATE TABLE n (x int, x int)", DuplicateColumn, "42701", 24, ['"x"']),
    ("SELECT * FROM t AS q, u AS q", DuplicateAlias, "42712", 23, ['"q"']),
    ("DROP VIEW t", WrongObjectType, "42809", 11, ["table", "view"]),
    ("SELECT a FROM t ORDER BY 9", InvalidColumnReference, "42P10", 26, ["9"]),
    ("SELECT a FROM t WHERE a = 'one'", InvalidTextRepresentation, "22P02", 27, ['"one"']),
    ("SELECT a FROM t WHERE d > 'soon'", InvalidDatetimeFormat, "22007", 27, ['"soon"']),
    ("SELECT '99999'::smallint", NumericValueOutOfRange, "22003", 8, ["smallint"]),
    ("INSERT INTO t (b) VALUES ('x')", NotNullViolation, "23502", 13, ['"a"']),
    ("SELECT 1 AS __diff", ReservedName, "42939", 8, ["__diff"]),
    ("SELECT a FROM t LIMIT -1", InvalidParameter, "22023", 23, ["LIMIT"]),
    ("SELECT a FROM WHERE", ParseError, "42601", 15, ["syntax error"]),
    ("SELECT 1 UNION SELECT 1, 2", ParseError, "42601", 23, ["same number of columns"]),
]


@pytest.mark.parametrize(
    ("sql", "error", "code", "position", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_error(sql: str, error: type, code: str, position: int, words: list[str]) -> None:
    with pytest.raises(error) as info:
        plan_statement(sql, make_catalog())
    err = info.value
    assert isinstance(err, SqlError)
    assert err.code == code
    assert err.position == position
    assert f"at or near position {position}" in str(err)
    for word in words:
        assert word in err.message


def test_position_points_at_the_column_in_its_statement() -> None:
    sql = "SELECT a FROM t WHERE nope > 1"
    with pytest.raises(UnknownColumn) as info:
        plan_statement(sql, make_catalog())
    position = info.value.position
    assert position is not None and sql[position - 1 :].startswith("nope")


def test_ambiguous_column_names_the_candidates() -> None:
    with pytest.raises(AmbiguousColumn) as info:
        plan_statement("SELECT a FROM t, u", make_catalog())
    assert "t.a" in (info.value.detail or "") and "u.a" in (info.value.detail or "")


def test_dependent_objects_comes_from_the_catalog() -> None:
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE VIEW v AS SELECT a FROM t", catalog))
    with pytest.raises(DependentObjects) as info:
        catalog.apply(plan_statement("DROP TABLE t", catalog))
    assert info.value.code == "2BP01" and "v" in info.value.message


def test_unknown_object_from_catalog_gets_a_position() -> None:
    with pytest.raises(UnknownObject) as info:
        plan_statement("SELECT 1 FROM s.nope", InMemoryCatalog())
    assert info.value.position == 15 and "s.nope" in info.value.message


def test_type_mismatch_alias() -> None:
    from coordinator_lib.sql.errors import DatatypeMismatch

    assert DatatypeMismatch is TypeMismatch
    assert issubclass(UndefinedOperator, TypeMismatch)
    assert issubclass(CannotCoerce, TypeMismatch)


def test_unsupported_statement() -> None:
    with pytest.raises(UnsupportedFeature) as info:
        plan_statement("SHOW SUBSOURCES", make_catalog())
    assert "SHOW SUBSOURCES" in info.value.message
    with pytest.raises(ParseError, match="exactly one"):
        plan_statement("SELECT 1; SELECT 2", make_catalog())
