"""The sqllogictest runner: parser, formatting, sort modes and hashing on
inline texts, then one small file through a real coordinator."""

from __future__ import annotations

import decimal
import hashlib
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.sqllogictest import (
    Halt,
    HashThreshold,
    Query,
    Statement,
    classify_error,
    compare,
    format_value,
    hash_values,
    parse,
    render,
    run_file,
    run_records,
    should_skip,
    sort_values,
)

SAMPLE = """\
# a comment
hash-threshold 8

statement ok
CREATE TABLE t1(a INTEGER,
  b INTEGER)

statement error
SELECT * FROM nowhere

skipif mysql # a remark
onlyif tidemark
query IT rowsort label-1
SELECT a, b
FROM t1
----
1
x
2
(empty)

query R nosort
SELECT 1.5
----
3 values hashing to 0123456789abcdef0123456789abcdef

onlyif sqlite
halt
"""


def test_parse_records_with_lines() -> None:
    records = parse(SAMPLE)
    assert [type(r) for r in records] == [HashThreshold, Statement, Statement, Query, Query, Halt]
    threshold, create, error, query, hashed, halt = records
    assert threshold == HashThreshold(2, 8)
    assert create.line == 4 and not create.expect_error
    assert create.sql == "CREATE TABLE t1(a INTEGER,\n  b INTEGER)"
    assert error.line == 8 and error.expect_error
    assert isinstance(query, Query)
    assert query.line == 11
    assert (query.types, query.sort, query.label) == ("IT", "rowsort", "label-1")
    assert query.sql == "SELECT a, b\nFROM t1"
    assert query.expected == ("1", "x", "2", "(empty)")
    assert query.conditions == (("skipif", "mysql"), ("onlyif", "tidemark"))
    assert isinstance(hashed, Query) and hashed.expected[0].startswith("3 values hashing")
    assert isinstance(halt, Halt) and halt.conditions == (("onlyif", "sqlite"),)


def test_parse_rejects_unknown_records() -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse("frobnicate\nSELECT 1\n")


def test_skip_conditions() -> None:
    assert not should_skip([])
    assert not should_skip([("skipif", "mysql"), ("onlyif", "tidemark")])
    assert should_skip([("onlyif", "sqlite")])
    assert should_skip([("skipif", "postgresql")])
    assert should_skip([("skipif", "tidemark")])


@pytest.mark.parametrize(
    ("value", "type_char", "text"),
    [
        (None, "I", "NULL"),
        (None, "T", "NULL"),
        ("", "T", "(empty)"),
        (7, "I", "7"),
        (-7.9, "I", "-7"),
        (decimal.Decimal("12.75"), "I", "12"),
        (True, "I", "1"),
        ("42abc", "I", "42"),
        (2, "R", "2.000"),
        (1.23456, "R", "1.235"),
        (decimal.Decimal("-0.5"), "R", "-0.500"),
        (5, "T", "5"),
        ("a\tb", "T", "a@b"),
    ],
)
def test_format_value(value: Any, type_char: str, text: str) -> None:
    assert format_value(value, type_char) == text


def test_sort_modes() -> None:
    rows = [["b", "1"], ["a", "2"], ["a", "10"]]
    assert sort_values(rows, "nosort") == ["b", "1", "a", "2", "a", "10"]
    assert sort_values(rows, "rowsort") == ["a", "10", "a", "2", "b", "1"]
    assert sort_values(rows, "valuesort") == ["1", "10", "2", "a", "a", "b"]


def test_hashing_and_compare() -> None:
    values = ["1", "NULL", "x"]
    digest = hashlib.md5(b"1\nNULL\nx\n").hexdigest()
    assert hash_values(values) == digest
    assert compare(values, [f"3 values hashing to {digest}"], 1)
    assert not compare(values, [f"4 values hashing to {digest}"], 1)
    assert compare(values, values, 1)
    assert not compare(values, ["1", "NULL", "y"], 1)
    # Older files put a whole row on one line.
    assert compare(["1", "2", "3", "4"], ["1 2", "3 4"], 2)
    assert render(values, 2) == [f"3 values hashing to {digest}"]
    assert render(values, 0) == values


def test_classify_error_masks_names_and_numbers() -> None:
    class Fake(Exception):
        code = "42P01"
        message = 'unknown catalog item "t9" at 15'

    assert classify_error(Fake()) == "42P01 unknown catalog item ? at N"
    assert classify_error(RuntimeError("boom")) == "RuntimeError boom"
    assert classify_error(RuntimeError("CREATE TRIGGER t1r1 ... no")) == (
        "RuntimeError CREATE TRIGGER ? ... no"
    )


class FakeSession:
    """Answers from a dict so the runner's bookkeeping runs without Spark."""

    def __init__(self, answers: dict[str, list[tuple[Any, ...]] | Exception]) -> None:
        self.answers = answers

    def execute(self, sql: str) -> Any:
        answer = self.answers.get(sql, [])
        if isinstance(answer, Exception):
            raise answer

        class Response:
            rows = answer

        yield Response()


def test_run_records_counts_and_halt() -> None:
    text = """\
statement ok
CREATE TABLE t(a int)

statement error
BAD

query I nosort
SELECT 1
----
1

query I nosort
SELECT 2
----
3

onlyif sqlite
query I nosort
SELECT 3
----
3

halt

query I nosort
SELECT 4
----
4
"""
    session = FakeSession({"BAD": RuntimeError("nope"), "SELECT 1": [(1,)], "SELECT 2": [(2,)]})
    result = run_records(parse(text), session)
    assert (result.passed, result.failed, result.skipped) == (3, 1, 1)
    assert result.halted_at == 23
    (failure,) = result.failures
    assert failure.line == 12 and failure.klass == "wrong result"
    assert "expected:\n  3\ngot:\n  2" in failure.detail


E2E = """\
statement ok
CREATE TABLE t1(a INTEGER, b TEXT)

statement ok
INSERT INTO t1 VALUES (1, 'x'), (2, ''), (3, NULL)

statement error
SELECT * FROM missing_table

query IT rowsort
SELECT a, b FROM t1
----
1
x
2
(empty)
3
NULL

query I nosort
SELECT a FROM t1 ORDER BY a DESC
----
3 values hashing to {hash}

query I valuesort
SELECT a * 10 FROM t1
----
10
20
31

skipif tidemark
query I nosort
SELECT 1
----
2
"""


@pytest.mark.spark
def test_end_to_end_through_coordinator(tmp_path: Path, spark: Any) -> None:
    from coordinator_lib.adapter.client import serve
    from coordinator_lib.adapter.coordinator import Config

    path = tmp_path / "tiny.test"
    path.write_text(E2E.format(hash=hash_values(["3", "2", "1"])))
    config = Config(
        data_dir=str(tmp_path / "env"), maintenance_interval_ms=20, advance_interval_ms=200
    )
    handle = serve(config, spark)
    try:
        session = handle.client.startup("materialize", "materialize")
        try:
            result = run_file(path, session)
        finally:
            session.terminate()
    finally:
        handle.shutdown()
    assert (result.passed, result.failed, result.skipped) == (5, 1, 1), result.failures
    (failure,) = result.failures
    assert failure.klass == "wrong result"
    assert "31" in failure.detail and "30" in failure.detail


SLT_CORPUS = Path(__file__).parent / "slt"
MIN_PASS_RATE = 95.0


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1500)  # about 2 min idle, 9 min with the cores shared (docs/slt.md)
def test_corpus_pass_rate_is_at_least_95_percent(spark: Any) -> None:
    """The issue's target, pinned: the whole corpus in tests/slt (docs/slt.md)
    through the coordinator, one fresh environment per file, passes at
    least 95% of the records it runs."""
    from coordinator_lib.sqllogictest import run_isolated

    assert SLT_CORPUS.is_dir(), f"no sqllogictest corpus at {SLT_CORPUS}"
    files = sorted(SLT_CORPUS.glob("*.test")) + sorted((SLT_CORPUS / "evidence").glob("*.test"))
    assert files, f"{SLT_CORPUS} holds no .test files"
    passed = ran = 0
    lines = []
    for path in files:
        result = run_isolated(path, spark)
        passed += result.passed
        ran += result.ran
        lines.append(f"{path.name}: {result.passed}/{result.ran} ({result.seconds:.0f}s)")
    rate = 100.0 * passed / ran
    assert rate >= MIN_PASS_RATE, f"pass rate {rate:.2f}% < {MIN_PASS_RATE}%: " + "; ".join(lines)
