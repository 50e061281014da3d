"""A sqllogictest runner: SQLite's `.test` corpus through the SQL front door.

The files measure how much ordinary SQL the engine answers correctly, so the
runner reports per-file passed / failed / skipped counts and groups failures
into classes (SQLSTATE plus the message's first words, or "wrong result") so
the gaps can be listed and worked on. Format: /work/shared/slt/README.md.

    python -m coordinator_lib.sqllogictest [--fail-fast] [--verbose] FILES...
"""

from __future__ import annotations

import argparse
import decimal
import hashlib
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENGINE = "tidemark"
# `skipif X` skips for these names: we speak PostgreSQL's dialect.
SKIP_NAMES = frozenset({ENGINE, "postgresql"})
# `onlyif X` runs only for these.
ONLY_NAMES = frozenset({ENGINE})

HASH_LINE = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")


# ------------------------------------------------------------------ records
@dataclass(frozen=True)
class Statement:
    """`statement ok|error`: only success or failure is checked."""

    line: int
    sql: str
    expect_error: bool
    conditions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Query:
    """`query <types> [sort] [label]` with its expected values (or hash)."""

    line: int
    sql: str
    types: str
    sort: str
    label: str | None
    expected: tuple[str, ...]
    conditions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HashThreshold:
    line: int
    threshold: int


@dataclass(frozen=True)
class Halt:
    line: int
    conditions: tuple[tuple[str, str], ...] = ()


Record = Statement | Query | HashThreshold | Halt


def _strip_comment(line: str) -> str:
    """Control lines may carry a trailing `# remark` (not SQL lines)."""
    return line.split("#", 1)[0].strip()


def parse(text: str) -> list[Record]:
    """Records of a .test file, each with the 1-based line it starts on."""
    lines = text.splitlines()
    records: list[Record] = []
    i = 0
    n = len(lines)
    while i < n:
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        start = i + 1
        conditions: list[tuple[str, str]] = []
        while i < n:
            words = _strip_comment(lines[i]).split()
            if len(words) >= 2 and words[0] in ("skipif", "onlyif"):
                conditions.append((words[0], words[1]))
                i += 1
            else:
                break
        if i >= n:
            break
        words = _strip_comment(lines[i]).split()
        head = lines[i]
        i += 1
        if not words:
            continue
        kind = words[0]
        if kind == "halt":
            records.append(Halt(start, tuple(conditions)))
            continue
        if kind == "hash-threshold":
            records.append(HashThreshold(start, int(words[1])))
            continue
        body: list[str] = []
        while i < n and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        sql = "\n".join(body)
        if kind == "statement":
            mode = words[1] if len(words) > 1 else "ok"
            if mode not in ("ok", "error"):
                raise ValueError(f"line {start}: unknown statement mode {mode!r}")
            records.append(Statement(start, sql, mode == "error", tuple(conditions)))
        elif kind == "query":
            if len(words) < 2:
                raise ValueError(f"line {start}: query without types: {head!r}")
            sort = words[2] if len(words) > 2 else "nosort"
            if sort not in ("nosort", "rowsort", "valuesort"):
                raise ValueError(f"line {start}: unknown sort mode {sort!r}")
            label = words[3] if len(words) > 3 else None
            expected: list[str] = []
            if i < n and lines[i].strip() == "----":
                i += 1
                while i < n and lines[i].strip():
                    expected.append(lines[i].strip())
                    i += 1
            records.append(
                Query(start, sql, words[1], sort, label, tuple(expected), tuple(conditions))
            )
        else:
            raise ValueError(f"line {start}: unknown record {head!r}")
        # Skip whatever else is left of this record up to the blank line.
        while i < n and lines[i].strip():
            i += 1
    return records


def should_skip(conditions: Iterable[tuple[str, str]]) -> bool:
    """`onlyif` another database or `skipif` us: the record is not ours."""
    for kind, db in conditions:
        if kind == "onlyif" and db not in ONLY_NAMES:
            return True
        if kind == "skipif" and db in SKIP_NAMES:
            return True
    return False


# --------------------------------------------------------------- formatting
def _as_int(value: Any) -> int:
    """SQLite's sqlite3_column_int64: reals truncate, text by leading digits."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        try:
            return int(value)
        except (ValueError, OverflowError, decimal.InvalidOperation):
            return 0
    match = re.match(r"\s*[-+]?\d+", str(value))
    return int(match.group()) if match else 0


def _as_float(value: Any) -> float:
    if isinstance(value, (int, float, decimal.Decimal)):
        return float(value)
    match = re.match(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", str(value))
    return float(match.group()) if match else 0.0


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    return str(value)


def format_value(value: Any, type_char: str) -> str:
    """One result value as sqllogictest prints it (NULL, (empty), %d, %.3f)."""
    if value is None:
        return "NULL"
    if type_char == "I":
        return str(_as_int(value))
    if type_char == "R":
        return f"{_as_float(value):.3f}"
    text = _as_text(value)
    if text == "":
        return "(empty)"
    # Like the reference runner: unprintable characters become '@'.
    return "".join(c if " " <= c <= "~" else "@" for c in text)


def format_rows(rows: Sequence[Sequence[Any]], types: str) -> list[list[str]]:
    """Rows of formatted values; a row wider than `types` is formatted as text."""
    out = []
    for row in rows:
        out.append(
            [format_value(v, types[j] if j < len(types) else "T") for j, v in enumerate(row)]
        )
    return out


def sort_values(rows: list[list[str]], mode: str) -> list[str]:
    """Flatten rows after applying the record's sort mode (string order)."""
    if mode == "rowsort":
        rows = sorted(rows)
    values = [v for row in rows for v in row]
    if mode == "valuesort":
        values.sort()
    return values


def hash_values(values: Sequence[str]) -> str:
    """md5 over the values, each followed by a newline."""
    digest = hashlib.md5()
    for value in values:
        digest.update(value.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def compare(values: Sequence[str], expected: Sequence[str], ncols: int) -> bool:
    """Expected is a hash line, one value per line, or one row per line."""
    if len(expected) == 1 and (match := HASH_LINE.match(expected[0])):
        return int(match.group(1)) == len(values) and match.group(2) == hash_values(values)
    if list(expected) == list(values):
        return True
    if ncols > 1 and len(expected) * ncols == len(values):
        rows = [" ".join(values[k : k + ncols]) for k in range(0, len(values), ncols)]
        return [" ".join(e.split()) for e in expected] == rows
    return False


def render(values: Sequence[str], threshold: int) -> list[str]:
    """What we would write into the file (hashed above the threshold)."""
    if threshold and len(values) > threshold:
        return [f"{len(values)} values hashing to {hash_values(values)}"]
    return list(values)


# ------------------------------------------------------------------- running
@dataclass(frozen=True)
class Failure:
    line: int
    sql: str
    klass: str
    detail: str


@dataclass
class FileResult:
    path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0
    halted_at: int | None = None

    @property
    def ran(self) -> int:
        return self.passed + self.failed


def classify_error(error: BaseException) -> str:
    """A failure class: SQLSTATE plus the message's first words, with
    identifiers and numbers masked so similar errors group together."""
    code = getattr(error, "code", None) or type(error).__name__
    text = str(getattr(error, "message", None) or error)
    message = text.splitlines()[0] if text else ""
    message = re.sub(r"\"[^\"]*\"|'[^']*'|`[^`]*`", "?", message)
    message = re.sub(r"\b[A-Za-z_]\w*\d\w*\b", "?", message)  # names like t1r1
    message = re.sub(r"\b\d+(\.\d+)?\b", "N", message)
    words = message.split()[:6]
    return f"{code} {' '.join(words)}".strip()


def execute(session: Any, sql: str) -> list[tuple[Any, ...]] | None:
    """Run SQL on the session; the rows of the last statement with rows."""
    rows: list[tuple[Any, ...]] | None = None
    for response in session.execute(sql):
        if response.rows is not None:
            rows = [tuple(r) for r in response.rows]
    return rows


def run_records(
    records: Sequence[Record],
    session: Any,
    path: str = "<text>",
    fail_fast: bool = False,
    on_failure: Callable[[Failure], None] | None = None,
) -> FileResult:
    """Run records in order on one session and tally the outcome; `on_failure`
    sees each failure as it happens (long files take minutes)."""
    result = FileResult(path)
    threshold = 0
    started = time.monotonic()
    for record in records:
        if isinstance(record, HashThreshold):
            threshold = record.threshold
            continue
        if should_skip(record.conditions):
            if not isinstance(record, Halt):
                result.skipped += 1
            continue
        if isinstance(record, Halt):
            result.halted_at = record.line
            break
        failure = _run_one(record, session, threshold)
        if failure is None:
            result.passed += 1
        else:
            result.failed += 1
            result.failures.append(failure)
            if on_failure is not None:
                on_failure(failure)
            if fail_fast:
                break
    result.seconds = time.monotonic() - started
    return result


def _run_one(record: Statement | Query, session: Any, threshold: int) -> Failure | None:
    line, sql = record.line, record.sql
    try:
        rows = execute(session, sql)
    except Exception as error:  # any engine failure is a result
        if isinstance(record, Statement) and record.expect_error:
            return None
        kind = "statement" if isinstance(record, Statement) else "query"
        return Failure(line, sql, classify_error(error), f"{kind} failed: {error}")
    if isinstance(record, Statement):
        if record.expect_error:
            return Failure(line, sql, "statement error succeeded", "expected an error")
        return None
    rows = rows or []
    ncols = len(record.types)
    if rows and any(len(r) != ncols for r in rows):
        return Failure(
            line, sql, "wrong column count", f"expected {ncols} columns, got {len(rows[0])}"
        )
    values = sort_values(format_rows(rows, record.types), record.sort)
    if compare(values, record.expected, ncols):
        return None
    got = render(values, threshold)
    detail = "expected:\n  " + "\n  ".join(record.expected) + "\ngot:\n  " + "\n  ".join(got)
    return Failure(line, sql, "wrong result", detail)


def run_file(
    path: str | Path,
    session: Any,
    fail_fast: bool = False,
    on_failure: Callable[[Failure], None] | None = None,
) -> FileResult:
    """Parse and run one .test file on `session` (a fresh environment's)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    return run_records(parse(text), session, str(path), fail_fast, on_failure)


# ----------------------------------------------------------------------- CLI
def _files(paths: Sequence[str]) -> Iterator[Path]:
    for p in paths:
        path = Path(p)
        if path.is_dir():
            yield from sorted(path.glob("*.test"))
            yield from sorted(path.glob("*.slt"))
        else:
            yield path


def run_isolated(
    path: Path,
    spark: Any,
    fail_fast: bool = False,
    on_failure: Callable[[Failure], None] | None = None,
) -> FileResult:
    """One fresh coordinator environment per file, so files cannot interfere."""
    from coordinator_lib.adapter.client import serve
    from coordinator_lib.adapter.coordinator import Config

    with tempfile.TemporaryDirectory(prefix="slt-") as tmp:
        handle = serve(
            Config(data_dir=tmp, maintenance_interval_ms=20, advance_interval_ms=200), spark
        )
        try:
            session = handle.client.startup("materialize", "materialize")
            try:
                return run_file(path, session, fail_fast, on_failure)
            finally:
                session.terminate()
        finally:
            handle.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coordinator_lib.sqllogictest")
    parser.add_argument("files", nargs="+", help=".test/.slt files or directories")
    parser.add_argument("--fail-fast", action="store_true", help="stop a file at its first failure")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every failure")
    parser.add_argument("--min-pass-rate", type=float, default=0.0, help="percent; exit 1 below")
    parser.add_argument("--top", type=int, default=25, help="failure classes to list")
    args = parser.parse_args(argv)

    from coordinator_lib.spark_session import get_or_create_spark

    spark = get_or_create_spark("local[2]", shuffle_partitions=2)
    classes: Counter[str] = Counter()
    examples: dict[str, Failure] = {}
    totals = FileResult("TOTAL")
    for path in _files(args.files):

        def show(failure: Failure, path: Path = path) -> None:
            sql = " ".join(failure.sql.split())
            print(f"  {path}:{failure.line}: [{failure.klass}] {sql}")
            print("    " + failure.detail.replace("\n", "\n    "), flush=True)

        result = run_isolated(path, spark, args.fail_fast, show if args.verbose else None)
        rate = 100.0 * result.passed / result.ran if result.ran else 100.0
        halted = f" (halt at line {result.halted_at})" if result.halted_at else ""
        print(
            f"{path}: {result.passed} passed / {result.failed} failed / "
            f"{result.skipped} skipped ({rate:.1f}%, {result.seconds:.0f}s){halted}",
            flush=True,
        )
        for failure in result.failures:
            classes[failure.klass] += 1
            examples.setdefault(failure.klass, failure)
        totals.passed += result.passed
        totals.failed += result.failed
        totals.skipped += result.skipped
    rate = 100.0 * totals.passed / totals.ran if totals.ran else 100.0
    print(
        f"TOTAL: {totals.passed} passed / {totals.failed} failed / {totals.skipped} skipped; "
        f"pass rate {rate:.2f}% of {totals.ran} run records"
    )
    if classes:
        print("failure classes:")
        for klass, count in classes.most_common(args.top):
            example = examples[klass]
            sql = " ".join(example.sql.split())[:100]
            print(f"  {count:6d}  {klass}\n          e.g. line {example.line}: {sql}")
    return 1 if rate < args.min_pass_rate else 0


if __name__ == "__main__":
    sys.exit(main())
