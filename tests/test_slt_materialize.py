"""The runner of Materialize's sqllogictest files (coordinator_lib/slt_materialize.py)
on an inline file in Materialize's dialect of the format, through a served
Tidemark: each kind of record passes or fails as it should."""

from __future__ import annotations

from pathlib import Path

from coordinator_lib.server.environment import Environment
from coordinator_lib.slt_materialize import parse, run_file
from tests.fixtures.served import dsn

SAMPLE = """\
# a comment
mode cockroach

statement ok
CREATE TABLE t (a int, s text, b bool)

statement count 2
INSERT INTO t VALUES (1, 'x y', true), (2, '', NULL)

query ITB rowsort
SELECT * FROM t
----
2 (empty) NULL
1 x y true

mode standard

query IT colnames,rowsort
SELECT a, s FROM t
----
a s
1
x y
2
(empty)

query I valuesort
SELECT a FROM t
----
2 values hashing to 6ddb4095eb719e2a9f0a3f95677d24e0

query T multiline
SELECT 'one' || chr(10) || 'two'
----
one
two
EOF

statement error division by zero
SELECT 1 / 0

query error does not exist
SELECT nope FROM t

onlyif mysql
statement ok
SELECT this is not run

simple
SELECT 1
----
COMPLETE 0

query I
SELECT 3
----
4

statement error something else
SELECT 1 / 0

query I
SELECT 1 / 0
----
1

halt

statement ok
this is past halt
"""


def test_parse_materialize_records() -> None:
    records = parse(SAMPLE)
    kinds = [r.kind for r in records]
    assert kinds == ["statement"] * 2 + ["query"] * 4 + ["statement", "query"] + ["skip"] * 2 + [
        "query",
        "statement",
        "query",
    ]
    assert records[1].count == 2
    assert records[3].colnames and records[3].sort == "rowsort" and records[3].types == "IT"
    assert records[5].multiline and records[5].expected == ("one", "two")
    assert records[6].error == "division by zero"


def test_run_materialize_records(environment: Environment, tmp_path: Path) -> None:
    path = tmp_path / "sample.slt"
    path.write_text(SAMPLE)
    result = run_file(path, dsn(environment))
    assert (result.passed, result.failed, result.skipped) == (8, 3, 2)
    classes = [klass for _, _, klass, _ in result.failures]
    assert classes == ["wrong result", "error message differs", "22012 division by zero"]
