"""Materialize's own sqllogictest files (`test/sqllogictest/*.slt` of
MaterializeInc/materialize) through Tidemark's pgwire door, as a client sees
them: values are the server's text (booleans as true/false, NULL, `(empty)`).
The run measures how much of Materialize's SQL Tidemark answers as
Materialize does; docs/slt.md has the files chosen and what is left.

Materialize's dialect of the format, beyond SQLite's (`coordinator_lib.sqllogictest`):
- `mode cockroach` (a row per line, values split by spaces) or `mode standard`
  (a value per line); either layout is accepted for a result.
- `statement error <regex>` / `query error <regex>`: the error's message must
  match; `statement count N`: N rows affected.
- `query <types> [nosort|rowsort|valuesort] [colnames] [multiline]`: with
  colnames the first expected line is the column names; multiline results
  are one text value read up to a line `EOF`.
- `simple` (raw protocol transcripts), `copy` and `reset-server` are not run
  (counted as skipped).

    python -m coordinator_lib.slt_materialize [--verbose] FILES...
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.pq import ExecStatus

BOOL_OID = 16
HASH_LINE = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")
NOT_RUN = ("simple", "copy", "reset-server")
OTHER_DATABASES = frozenset({"mysql", "sqlite", "mssql", "oracle", "cockroachdb"})


@dataclass(frozen=True)
class Record:
    """One record: `kind` is statement, query or skip; `error` the expected
    error's pattern (None: success expected)."""

    line: int
    kind: str
    sql: str
    error: str | None = None
    count: int | None = None
    types: str = ""
    sort: str = "nosort"
    colnames: bool = False
    multiline: bool = False
    expected: tuple[str, ...] = ()


def parse(text: str) -> list[Record]:
    lines = text.splitlines()
    records: list[Record] = []
    i, n = 0, len(lines)
    while i < n:
        words = lines[i].split()
        if not words or words[0].startswith("#"):
            i += 1
            continue
        start = i + 1
        skip = False
        while words and words[0] in ("skipif", "onlyif"):
            db = words[1] if len(words) > 1 else ""
            skip = skip or (words[0] == "onlyif" and db in OTHER_DATABASES | {"postgresql"})
            i += 1
            words = lines[i].split() if i < n else []
        head_line = lines[i] if i < n else ""
        i += 1
        head = words[0] if words else ""
        if head in ("mode", "hash-threshold") or head == "halt":
            if head == "halt" and not skip:
                break
            continue
        body: list[str] = []
        while i < n and lines[i].strip() and (lines[i].strip() != "----" or head == "statement"):
            if lines[i].strip() != "----":  # a statement's `----` lines are not SQL
                body.append(lines[i])
            i += 1
        sql = "\n".join(body)
        expected: list[str] = []
        multiline = head == "query" and "multiline" in ",".join(words).split(",")
        if i < n and lines[i].strip() == "----":
            i += 1
            if multiline:
                while i < n and lines[i] != "EOF":
                    expected.append(lines[i])
                    i += 1
                i += 1
            else:
                while i < n and lines[i].strip():
                    expected.append(lines[i].strip())
                    i += 1
        while i < n and lines[i].strip():  # what is left of a record not run
            i += 1
        if skip or head in NOT_RUN or head not in ("statement", "query"):
            records.append(Record(start, "skip", sql))
            continue
        rest = [w for word in words[1:] for w in word.split(",") if w]
        if rest[:1] == ["error"]:
            pattern = head_line.strip().split(None, 2)[2] if len(words) > 2 else ""
            records.append(Record(start, head, sql, error=pattern))
        elif head == "statement":
            count = int(rest[1]) if rest[:1] == ["count"] and len(rest) > 1 else None
            records.append(Record(start, head, sql, count=count))
        else:
            sort = next((w for w in rest if w in ("nosort", "rowsort", "valuesort")), "nosort")
            types = rest[0] if rest and rest[0] not in ("colnames", "multiline", sort) else ""
            records.append(
                Record(
                    start,
                    head,
                    sql,
                    types=types,
                    sort=sort,
                    colnames="colnames" in rest,
                    multiline=multiline,
                    expected=tuple(expected),
                )
            )
    return records


# --------------------------------------------------------------------- running
@dataclass
class FileResult:
    path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[tuple[int, str, str, str]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        ran = self.passed + self.failed
        return 100.0 * self.passed / ran if ran else 100.0


def _text(value: bytes | None, oid: int) -> str:
    if value is None:
        return "NULL"
    text = value.decode()
    if oid == BOOL_OID:
        return {"t": "true", "f": "false"}.get(text, text)
    return text if text else "(empty)"


def _matches(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return pattern in message


def _classify(record: Record, sqlstate: str, message: str) -> str:
    words = re.sub(r"\"[^\"]*\"|'[^']*'", "?", message).split()[:5]
    return f"{sqlstate} {' '.join(words)}"


def run_record(conn: psycopg.Connection, record: Record) -> tuple[str, str] | None:
    """None when the record passes, else (failure class, detail)."""
    try:
        cursor = conn.execute(record.sql)
    except psycopg.Error as error:
        message = error.diag.message_primary or str(error)
        sqlstate = error.sqlstate or "?"
        if record.error is not None:  # Materialize's runner shows tokio-postgres's text
            if _matches(record.error, f"db error: ERROR: {message}"):
                return None
            return "error message differs", f"expected /{record.error}/, got {message}"
        return _classify(record, sqlstate, message), message
    if record.error is not None:
        return "expected an error, succeeded", f"expected /{record.error}/"
    if record.kind == "statement":
        if record.count is not None and cursor.rowcount != record.count:
            return "wrong row count", f"expected {record.count}, got {cursor.rowcount}"
        return None
    result = cursor.pgresult
    if result is None or result.status != ExecStatus.TUPLES_OK:
        return "query returned no rows", ""
    oids = [result.ftype(c) for c in range(result.nfields)]
    rows = [
        [_text(result.get_value(r, c), oids[c]) for c in range(result.nfields)]
        for r in range(result.ntuples)
    ]
    expected = list(record.expected)
    if record.colnames:
        names = [(result.fname(c) or b"").decode() for c in range(result.nfields)]
        if not expected or expected[0].split() != names:
            return "wrong column names", f"expected {expected[:1]}, got {names}"
        expected = expected[1:]
    if record.multiline:
        got = "\n".join(v for row in rows for v in row).rstrip("\n")
        if got == "\n".join(expected).rstrip("\n"):
            return None
        klass = "EXPLAIN text differs" if _is_explain(record.sql) else "wrong result"
        return klass, f"expected:\n{chr(10).join(expected)}\ngot:\n{got}"
    if _same(rows, expected, record.sort):
        return None
    klass = "EXPLAIN text differs" if _is_explain(record.sql) else "wrong result"
    shown = [" ".join(r) for r in rows]
    return klass, f"expected: {expected}\ngot: {shown}"


def _is_explain(sql: str) -> bool:
    return sql.lstrip().upper().startswith("EXPLAIN")


def _same(rows: list[list[str]], expected: list[str], sort: str) -> bool:
    """Expected as a row per line or a value per line (or a hash line)."""
    values = [v for row in rows for v in row]
    if sort == "valuesort":
        values = sorted(values)
    elif sort == "rowsort":
        values = [v for row in sorted(rows) for v in row]
    if len(expected) == 1 and (match := HASH_LINE.match(expected[0])):
        digest = hashlib.md5("".join(v + "\n" for v in values).encode()).hexdigest()
        return int(match.group(1)) == len(values) and match.group(2) == digest
    if values == expected or (sort == "valuesort" and values == sorted(expected)):
        return True
    got = [" ".join(" ".join(row).split()) for row in rows]
    want = [" ".join(line.split()) for line in expected]
    if sort in ("rowsort", "valuesort"):
        return sorted(got) == sorted(want) or sorted(values) == sorted(expected)
    return got == want


def run_file(path: Path, dsn: str) -> FileResult:
    result = FileResult(str(path))
    records = parse(path.read_text(encoding="utf-8"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for record in records:
            if record.kind == "skip":
                result.skipped += 1
                continue
            if conn.info.transaction_status != 0:  # a record left a failed transaction
                conn.rollback()
            outcome = run_record(conn, record)
            if outcome is None:
                result.passed += 1
            else:
                result.failed += 1
                result.failures.append((record.line, record.sql, *outcome))
    return result


def run_isolated(path: Path) -> FileResult:
    """One fresh environment per file (pgwire on an ephemeral port)."""
    from coordinator_lib.adapter.coordinator import Config
    from coordinator_lib.server.environment import Environment

    with tempfile.TemporaryDirectory(prefix="slt-mz-") as tmp:
        config = Config(data_dir=tmp, maintenance_interval_ms=20, advance_interval_ms=200)
        env = Environment(config, pgwire_port=0, http_port=0)
        env.start()
        try:
            port = env.pgwire.port
            dsn = f"host=127.0.0.1 port={port} user=materialize dbname=materialize"
            return run_file(path, dsn)
        finally:
            env.stop()


def _files(paths: Sequence[str]) -> Iterator[Path]:
    for p in paths:
        path = Path(p)
        yield from sorted(path.glob("*.slt")) if path.is_dir() else [path]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator_lib.slt_materialize")
    parser.add_argument("files", nargs="+", help=".slt files or directories")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every failure")
    parser.add_argument("--top", type=int, default=30, help="failure classes to list")
    args = parser.parse_args(argv)
    classes: Counter[str] = Counter()
    examples: dict[str, tuple[str, int, str]] = {}
    passed = failed = 0
    for path in _files(args.files):
        result = run_isolated(path)
        print(
            f"{path.name}: {result.passed} passed / {result.failed} failed / "
            f"{result.skipped} not run ({result.rate:.1f}%)",
            flush=True,
        )
        for line, sql, klass, detail in result.failures:
            classes[klass] += 1
            examples.setdefault(klass, (path.name, line, " ".join(sql.split())[:100]))
            if args.verbose:
                print(f"  {path.name}:{line}: [{klass}] {' '.join(sql.split())[:200]}")
                print("    " + detail.replace("\n", "\n    ")[:2000])
        passed += result.passed
        failed += result.failed
    rate = 100.0 * passed / (passed + failed) if passed + failed else 100.0
    print(f"TOTAL: {passed} passed / {failed} failed ({rate:.1f}%)")
    for klass, count in classes.most_common(args.top):
        name, line, sql = examples[klass]
        print(f"  {count:5d}  {klass}\n         e.g. {name}:{line}: {sql}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
