"""COPY ... FROM STDIN through real clients (psycopg's `cursor.copy`, psql's
`\\copy`), held to a real PostgreSQL 15 loading the same bytes: the rows,
and for bad data the SQLSTATE and the CONTEXT line ("COPY t, line 2,
column c: ..."). A failed or cancelled COPY writes nothing."""

from __future__ import annotations

import datetime as dt
import io
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg8000.native
import psycopg
import pytest

from coordinator_lib.server import copy_arrow
from coordinator_lib.server.copy_in import BinaryDecoder, CsvDecoder, TextDecoder
from coordinator_lib.server.environment import Environment
from tests.load.conftest import dsn

pytestmark = pytest.mark.timeout(120)

TABLE = "CREATE TABLE t (a int NOT NULL, b text, c double precision, d date)"

CASES = [
    (
        "COPY t FROM STDIN",
        "1\tx\\ty\t1.5\t2024-01-02\n2\t\\N\t\\N\t\\N\n3\t\\\\\\101\\x42\t-0\t2020-02-29\n",
    ),
    ("COPY t FROM STDIN", "1\ta\t1\t2024-01-01\r\n2\tb\t2\t2024-01-02\r\n\\.\r\n"),
    ("COPY t (b, a) FROM STDIN WITH (DELIMITER '|', NULL 'nil')", "x|1\nnil|2\n"),
    (
        "COPY t FROM STDIN WITH (FORMAT csv, HEADER)",
        'a,b,c,d\n1,"q,""x""",2.5,2024-02-03\n2,,,\n3,"",1e3,2020-01-01\n4,"multi\nline",,\n',
    ),
    (
        "COPY t FROM STDIN WITH (FORMAT csv, DELIMITER ';', NULL 'NA', QUOTE '''', ESCAPE '\\')",
        "1;'a;b';NA;NA\n2;'it\\'s';3;2021-03-04\n3;NA;NA;NA\n",
    ),
    ("COPY t FROM STDIN csv header", "a,b,c,d\n7,seven,7.5,2007-07-07\n"),
]

BAD = [
    ("COPY t FROM STDIN", "1\tx\t1\t2024-01-01\n2\ty\tnope\t2024-01-01\n"),
    ("COPY t FROM STDIN", "1\tx\t1\t2024-01-01\n2\ty\n"),
    ("COPY t FROM STDIN", "1\tx\t1\t2024-01-01\textra\n"),
    ("COPY t FROM STDIN", "99999999999\tx\t1\t2024-01-01\n"),
    ("COPY t FROM STDIN", "1\tx\t1\tyesterday-ish\n"),
    ("COPY t FROM STDIN WITH (FORMAT csv)", "1,a,1,2024-01-01\n,b,2,2024-01-02\n"),
    ("COPY t FROM STDIN WITH (FORMAT csv)", '1,"never closed,1,2024-01-01\n'),
]


@pytest.fixture
def both(environment: Environment, postgres_consensus_url: str) -> Iterator[list[Any]]:
    """A connection to Tidemark and one to a fresh PostgreSQL database, each
    with table t."""
    with (
        psycopg.connect(dsn(environment), autocommit=True) as tidemark,
        psycopg.connect(postgres_consensus_url, autocommit=True) as postgres,
    ):
        for conn in (tidemark, postgres):
            conn.execute(TABLE)
        yield [tidemark, postgres]


def copy_in(conn: psycopg.Connection, statement: str, data: str, pieces: int = 3) -> int:
    """Send `data` in `pieces` CopyData messages cut at arbitrary bytes."""
    raw = data.encode()
    cuts = sorted(random.Random(len(raw)).sample(range(len(raw) + 1), min(pieces, len(raw))))
    with conn.cursor() as cur:
        with cur.copy(statement) as copy:
            start = 0
            for cut in [*cuts, len(raw)]:
                copy.write(raw[start:cut])
                start = cut
        return cur.rowcount


def contents(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT a, b, c, d FROM t ORDER BY a, b").fetchall()


@pytest.mark.parametrize(("statement", "data"), CASES)
def test_copy_from_matches_postgres(both: list[Any], statement: str, data: str) -> None:
    counts = [copy_in(conn, statement, data) for conn in both]
    assert counts[0] == counts[1]
    assert contents(both[0]) == contents(both[1])


@pytest.mark.parametrize(("statement", "data"), BAD)
def test_bad_data_fails_like_postgres_and_writes_nothing(
    both: list[Any], statement: str, data: str
) -> None:
    errors = []
    for conn in both:
        copy_in(conn, "COPY t FROM STDIN", "100\tbefore\t0\t2000-01-01\n")
        with pytest.raises(psycopg.Error) as failed:
            copy_in(conn, statement, data)
        errors.append(failed.value)
        assert contents(conn) == [(100, "before", 0.0, dt.date(2000, 1, 1))]
    ours, theirs = errors
    assert ours.sqlstate == theirs.sqlstate, (str(ours), str(theirs))
    assert ours.diag.context is not None and theirs.diag.context is not None
    # PostgreSQL's CONTEXT names the table, the line and (for a value) the column
    assert ours.diag.context.split(":")[0] == theirs.diag.context.split(":")[0]
    # the connection goes on
    assert both[0].execute("SELECT 1").fetchone() == (1,)


def test_binary_copy_and_copy_to(both: list[Any]) -> None:
    rows = [(1, "one", 1.5, None), (2, None, None, dt.date(2024, 5, 6))]
    for conn in both:
        with conn.cursor() as cur, cur.copy("COPY t FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["int4", "text", "float8", "date"])
            for row in rows:
                copy.write_row(row)
    assert contents(both[0]) == contents(both[1]) == rows
    for conn in both:
        conn.execute("CREATE VIEW v AS SELECT a, b FROM t")
    outs = []
    for conn in both:
        with (
            conn.cursor() as cur,
            cur.copy("COPY (SELECT * FROM v ORDER BY a) TO STDOUT (FORMAT csv)") as copy,
        ):
            outs.append(b"".join(bytes(chunk) for chunk in copy))
    assert outs[0] == outs[1] == b"1,one\n2,\n"


def test_copy_fail_and_rollback_write_nothing(environment: Environment) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute(TABLE)
        cur = conn.cursor()
        with pytest.raises(RuntimeError), cur.copy("COPY t FROM STDIN") as copy:
            copy.write("1\tx\t1\t2024-01-01\n")
            raise RuntimeError("the client gives up")  # psycopg sends CopyFail
        conn.execute("BEGIN")
        copy_in(conn, "COPY t FROM STDIN", "2\ty\t2\t2024-01-02\n")
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("BEGIN")
        copy_in(conn, "COPY t FROM STDIN", "3\tz\t3\t2024-01-03\n")
        conn.execute("COMMIT")
        assert contents(conn) == [(3, "z", 3.0, dt.date(2024, 1, 3))]


def test_psql_backslash_copy(environment: Environment, tmp_path: Path) -> None:
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute(TABLE)
    csv = tmp_path / "rows.csv"
    csv.write_text("a,b,c,d\n" + "".join(f"{i},name {i},{i / 2},2024-01-01\n" for i in range(1000)))
    text = tmp_path / "rows.txt"
    text.write_text("5000\ttab\\there\t\\N\t\\N\n")
    result = subprocess.run(
        [
            "/usr/bin/psql",
            dsn(environment),
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            f"\\copy t from '{csv}' with (format csv, header)",
            "-c",
            f"\\copy t from '{text}'",
            "-c",
            "SELECT count(*), sum(a), max(b) FROM t",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "COPY 1000",
        "COPY 1",
        f"1001|{sum(range(1000)) + 5000}|tab\there",
    ]


@pytest.mark.parametrize("size", [1, 2, 7, 64])
def test_decoders_give_the_same_records_for_any_chunking(size: int) -> None:
    text = "1\ta\\tb\t\\N\n2\t\\\\\tx\n\\.\nignored\n"
    csv = 'a,b\n1,"x\n""y"""\n2,\n'
    binary = (
        b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
        + b"\x00\x02" + b"\x00\x00\x00\x04\x00\x00\x00\x07" + b"\xff\xff\xff\xff"
        + b"\xff\xff"
    )  # fmt: skip

    def run(make: Any, data: bytes) -> list[Any]:
        decoder = make()
        records = []
        for start in range(0, len(data), size):
            records += decoder.feed(data[start : start + size])
        return records + decoder.finish()

    assert run(lambda: TextDecoder("t", "\t", "\\N", False), text.encode()) == [
        (1, ["1", "a\tb", None]),
        (2, ["2", "\\", "x"]),
    ]
    assert run(lambda: CsvDecoder("t", ",", "", '"', '"', True), csv.encode()) == [
        (2, ["1", 'x\n"y"']),
        (4, ["2", None]),
    ]
    assert run(lambda: BinaryDecoder("t", [23, 25]), binary) == [(1, ["7", None])]


def test_pg8000_copy_over_the_extended_protocol(environment: Environment) -> None:
    """pg8000 sends COPY with Parse/Bind/Execute and Sync before the data."""
    with psycopg.connect(dsn(environment), autocommit=True) as conn:
        conn.execute(TABLE)
    con = pg8000.native.Connection(
        "materialize", host="127.0.0.1", port=environment.pgwire.port, database="materialize"
    )
    try:
        con.run("COPY t FROM STDIN WITH (FORMAT csv)", stream=io.StringIO("1,a,,\n2,b,0.5,\n"))
        assert con.row_count == 2
        assert con.run("SELECT a, b, c FROM t ORDER BY a") == [[1, "a", None], [2, "b", 0.5]]
    finally:
        con.close()


def _generated(csv: bool, count: int, bad: str | None = None) -> str:
    """`count` rows for t that mix what the columnar fast path reads with
    what only the Python decoder reads (quotes, escapes, a multi-line field,
    Infinity, a zero with an exponent); line 701 holds `bad` if given."""
    lines = []
    for i in range(count):
        b = f"name {i}"
        if i % 37 == 5:
            b = '"q,""x""\nnext"' if csv else "tab\\there"
        c = ("Infinity", "-0", "0e5", "1e-5", "2.5")[i % 5] if i % 11 == 3 else f"{i / 4}"
        d = f"20{i % 30:02d}-0{i % 9 + 1}-1{i % 10}" if i % 13 else ("" if csv else "\\N")
        row = f"{i},{b},{c},{d}" if csv else f"{i}\t{b}\t{c}\t{d}"
        lines.append(row)
    if bad is not None:
        lines[700] = bad
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("csv", [True, False], ids=["csv", "text"])
def test_columnar_pieces_match_postgres(
    both: list[Any], csv: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces of a few hundred bytes, so the fast path and the Python
    decoder take turns across piece and CopyData boundaries."""
    monkeypatch.setattr(copy_arrow, "PIECE_BYTES", 300)
    statement = "COPY t FROM STDIN WITH (FORMAT csv)" if csv else "COPY t FROM STDIN"
    data = _generated(csv, 2000)
    counts = [copy_in(conn, statement, data, pieces=40) for conn in both]
    assert counts[0] == counts[1] == 2000
    assert contents(both[0]) == contents(both[1])


@pytest.mark.parametrize(
    "bad",
    [",x,1,2024-01-01", "700,x,1e400,2024-01-01", "99999999999,x,1,2024-01-01", "7,x,1"],
    ids=["not-null", "double-overflow", "int-overflow", "missing-column"],
)
def test_columnar_bad_value_fails_like_postgres(
    both: list[Any], bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad value in a piece the fast path read: PostgreSQL's SQLSTATE and
    CONTEXT line (the line counted across pieces), nothing written."""
    monkeypatch.setattr(copy_arrow, "PIECE_BYTES", 300)
    data = _generated(True, 1000, bad)
    errors = []
    for conn in both:
        with pytest.raises(psycopg.Error) as failed:
            copy_in(conn, "COPY t FROM STDIN WITH (FORMAT csv)", data, pieces=25)
        errors.append(failed.value)
        assert contents(conn) == []
    ours, theirs = errors
    assert ours.sqlstate == theirs.sqlstate, (str(ours), str(theirs))
    assert ours.diag.context is not None and theirs.diag.context is not None
    assert ours.diag.context.split(":")[0] == theirs.diag.context.split(":")[0]
