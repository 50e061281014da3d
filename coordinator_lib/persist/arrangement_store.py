"""Arrangements: a dataflow's operator state, indexed by key, on disk.

A stateful operator (a join input by its join key, a Reduce's input by its
group key) keeps its input *arranged*: for each key, the rows with their
multiplicities, consolidated at the dataflow's state upper. A step reads
only the keys its delta touches (`Arrangement.read`) and lands the state's
changes with `DataflowState.apply`, a compare-and-set on the state's upper
covering every arrangement of the dataflow in one transaction, so a writer
that lost a race or was fenced changes nothing.

Why SQLite (WAL), one file per environment and host (`<blob root>/_arrangements/`):
point reads of a few thousand keys per step are B-tree lookups on the
primary key (arrangement, key hash, row hash), bulk writes at hydration are
one transaction (or, from Spark, chunks written to a staged state and one
transaction that swaps it in: `Staging`), and `BEGIN IMMEDIATE` serializes the writers of several
processes (`tidemark serve`, workers, Dagster runs) the way SQLite consensus
does. SQLite ships with Python (no new dependency), its page cache is
bounded per connection (`CACHE_KIB`), and a reader never blocks a writer.
LMDB and RocksDB (rocksdict) read faster but allow one writer process
(RocksDB) or need a fixed map size (LMDB) and add a native dependency.

State is kept at one time only, its upper: a step reads the state at
`lower - 1` = upper - 1 and no reader needs older times, so the since
follows the upper and compaction is the consolidation `apply` does
(a row whose multiplicity reaches 0 is deleted). An arrangement by time
(`pending`) holds only what is due at or after the upper: `apply` deletes
what the step that moved the upper past it has taken. `synchronous=NORMAL`:
a commit survives SIGKILL; a power loss may lose the last commits, which
leaves the state behind its output and is caught up like a crash
(compute/arranged.py).

Keys and row identities are compared as Python compares them (1 == 1.0 ==
Decimal('1.00')): both are stored as a 16-byte hash of a canonical form.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import math
import pickle
import secrets
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.persist.connection_pool import ConnectionPool
from coordinator_lib.persist.sqlite_temp import keep_temp_in_memory
from coordinator_lib.repr.nan import one_nan

Key = tuple[Any, ...]
Row = tuple[Any, ...]
# (key, row, diff): a change of the multiplicity of `row` under `key`.
KeyedUpdate = tuple[Key, Row, int]
# (time, row, diff): a change of `row` due at `time` (an arrangement by time).
TimedUpdate = tuple[int, Row, int]
# (key, ord, row, diff): a change of `row` under `key`, `ord` its place there.
OrderedUpdate = tuple[Key, bytes, Row, int]


def _row(blob: bytes) -> Any:
    """A stored row as the operators keep it: every float NaN the one object
    `math.nan` (repr/nan.py). Unpickling makes a new NaN object per value,
    and rows holding two NaN objects are two rows to a Counter and compare
    unequal: a window's peers split and its retractions missed their rows.
    A pickled float is opcode BINFLOAT (b"G") and 8 bytes big-endian; a
    NaN's first byte is 0x7f or 0xff (sign and the exponent's high bits),
    so only those rows are rebuilt (the check costs about a quarter of
    the unpickling; rebuilding every row holding a float cost twice it)."""
    value = pickle.loads(blob)
    if (b"G\x7f" in blob or b"G\xff" in blob) and type(value) is tuple:
        value = tuple(one_nan(v) for v in value)
    return value


# SQLite's page cache of each connection (KiB), on the process's heap: the
# state itself stays on disk and in the OS's page cache. At 16 MiB, each of
# up to 4 idle connections filled as the demo's state grew (issue 18's soak:
# a heap that kept growing for an hour); 1 MiB holds a B-tree's interior
# pages for a state of hundreds of MB, and keyed reads and applies over a
# 34 MB state took the same time (144-166 ms a step against 145-227 ms,
# noise on a loaded machine).
CACHE_KIB = 1024
BUSY_TIMEOUT_S = 30.0
# Rows due at or past this time are never due (no upper reaches it) and
# SQLite's integers stop here.
_NEVER = 2**63 - 1
# SQLite's default limit of bound parameters per statement is 32766.
_CHUNK = 900

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS frontier (
        dataflow TEXT PRIMARY KEY,
        upper INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS arrangement (
        id INTEGER PRIMARY KEY,
        dataflow TEXT NOT NULL,
        operator TEXT NOT NULL,
        UNIQUE (dataflow, operator)
    )""",
    """CREATE TABLE IF NOT EXISTS arranged (
        arrangement INTEGER NOT NULL,
        key BLOB NOT NULL,
        rid BLOB NOT NULL,
        row BLOB NOT NULL,
        diff INTEGER NOT NULL,
        PRIMARY KEY (arrangement, key, rid)
    ) WITHOUT ROWID""",
    # Rows arranged by time (a temporal filter's future insertions and
    # retractions): a step reads the range [lower, upper) of each.
    """CREATE TABLE IF NOT EXISTS pending (
        arrangement INTEGER NOT NULL,
        time INTEGER NOT NULL,
        rid BLOB NOT NULL,
        row BLOB NOT NULL,
        diff INTEGER NOT NULL,
        PRIMARY KEY (arrangement, time, rid)
    ) WITHOUT ROWID""",
    # Rows arranged by key and, within a key, by an order (`ord`, bytes whose
    # order follows the operator's: compute/order_bytes.py): a step reads a
    # touched group's first rows (TopK's, MIN/MAX's) instead of all of them.
    """CREATE TABLE IF NOT EXISTS ordered (
        arrangement INTEGER NOT NULL,
        key BLOB NOT NULL,
        ord BLOB NOT NULL,
        rid BLOB NOT NULL,
        row BLOB NOT NULL,
        diff INTEGER NOT NULL,
        PRIMARY KEY (arrangement, key, ord, rid)
    ) WITHOUT ROWID""",
)


# The size of each arrangement (entries, total multiplicity, encoded bytes),
# kept by triggers on every write of its rows, so reading a view's state size
# (mz_internal, each Dagster materialization) costs one row per operator,
# not a scan of the state.
_SIZE_TABLE = """CREATE TABLE arrangement_size (
    arrangement INTEGER PRIMARY KEY,
    rows INTEGER NOT NULL,
    updates INTEGER NOT NULL,
    bytes INTEGER NOT NULL
)"""
_STATE_TABLES = ("arranged", "pending", "ordered")


def _size_triggers() -> list[str]:
    def change(table: str, event: str, rows: str, updates: str, bytes_: str) -> str:
        ref = "old" if event == "DELETE" else "new"
        on = "UPDATE OF diff ON" if event == "UPDATE" else f"{event} ON"
        return (
            f"CREATE TRIGGER IF NOT EXISTS {table}_size_{event.lower()} AFTER {on} {table}"
            f" BEGIN UPDATE arrangement_size SET rows = rows + {rows},"
            f" updates = updates + {updates}, bytes = bytes + {bytes_}"
            f" WHERE arrangement = {ref}.arrangement; END"
        )

    triggers = [
        "CREATE TRIGGER IF NOT EXISTS arrangement_size_create AFTER INSERT ON arrangement"
        " BEGIN INSERT INTO arrangement_size VALUES (new.id, 0, 0, 0); END",
        "CREATE TRIGGER IF NOT EXISTS arrangement_size_drop AFTER DELETE ON arrangement"
        " BEGIN DELETE FROM arrangement_size WHERE arrangement = old.id; END",
    ]
    for table in _STATE_TABLES:
        triggers += [
            change(table, "INSERT", "1", "new.diff", "length(new.row) + 32"),
            change(table, "UPDATE", "0", "new.diff - old.diff", "0"),
            change(table, "DELETE", "-1", "-old.diff", "-(length(old.row) + 32)"),
        ]
    return triggers


def _create_sizes(conn: sqlite3.Connection) -> None:
    """Create the size table and its triggers, counting the state already
    there (a store written before sizes were kept) in the same transaction."""
    exists = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'arrangement_size'"
    if conn.execute(exists).fetchone() is not None:
        return
    conn.execute("BEGIN IMMEDIATE")
    if conn.execute(exists).fetchone() is None:
        rows = " UNION ALL ".join(
            f"SELECT arrangement, row, diff FROM {table}" for table in _STATE_TABLES
        )
        conn.execute(_SIZE_TABLE)
        conn.execute(
            "INSERT INTO arrangement_size SELECT a.id, count(r.arrangement),"
            " coalesce(sum(r.diff), 0), coalesce(sum(length(r.row) + 32), 0)"
            f" FROM arrangement a LEFT JOIN ({rows}) r ON r.arrangement = a.id GROUP BY a.id"
        )
        for trigger in _size_triggers():
            conn.execute(trigger)
    conn.execute("COMMIT")


# Types whose repr already names their value up to equality.
_PLAIN = frozenset({str, int, bool, type(None), bytes})


def _canonical(value: Any) -> Any:
    """A form equal values share (Python's ==), whose repr is deterministic:
    an integral number is its int, another number its normalized Decimal."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            return ("f", repr(value))
        if isinstance(value, Decimal) and not value.is_finite():
            return ("f", repr(float(value)))
        if value == int(value):
            return int(value)
        return ("n", str(Decimal(value).normalize()))
    if isinstance(value, tuple | list):
        return ("l", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("d", tuple(sorted((repr(_canonical(k)), _canonical(v)) for k, v in value.items())))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def identity(value: tuple[Any, ...]) -> bytes:
    """16 bytes naming `value` (a key or a row) up to Python equality."""
    if _PLAIN.issuperset(map(type, value)):  # the test in C: a step names every key it reads
        text = repr(value)
    else:
        text = repr(tuple(_canonical(v) for v in value))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@dataclass(frozen=True)
class ArrangementStats:
    rows: int  # distinct (key, row) entries
    updates: int  # sum of multiplicities
    bytes: int  # encoded rows


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA journal_mode=WAL").fetchone()
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    keep_temp_in_memory(conn)
    for statement in _SCHEMA:
        conn.execute(statement)
    _create_sizes(conn)
    return conn


class ArrangementStore:
    """Every arrangement of an environment on this host: one SQLite file."""

    _open: dict[Path, ArrangementStore] = {}
    _open_lock = threading.Lock()

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._pool: ConnectionPool[sqlite3.Connection] = ConnectionPool(
            lambda: _connect(self.path), lambda c: c.close(), max_idle=4
        )
        with self._conn() as conn:
            conn.execute("SELECT 1").fetchone()

    @staticmethod
    def path_for(blob: BlobStore) -> Path:
        return blob.root / "_arrangements" / "arrangements.db"

    @staticmethod
    def for_blob(blob: BlobStore) -> ArrangementStore:
        """The store beside an environment's blob root (one per process)."""
        path = ArrangementStore.path_for(blob)
        with ArrangementStore._open_lock:
            store = ArrangementStore._open.get(path)
            if store is None:
                store = ArrangementStore._open[path] = ArrangementStore(path)
            return store

    @contextlib.contextmanager
    def _conn(self) -> Any:
        conn = self._pool.acquire()
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        finally:
            self._pool.release(conn, healthy=not conn.in_transaction)

    def state(self, dataflow: str) -> DataflowState:
        return DataflowState(self, dataflow)

    def drop_output(self, shard_id: str) -> None:
        """Forget the state of every dataflow that wrote shard `shard_id`
        (its data is being deleted), and any hydration's staged state left
        by a process that died before its swap."""
        with self._conn() as conn:
            staged = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT dataflow FROM arrangement WHERE dataflow LIKE ? ESCAPE '\\'",
                    (shard_id.replace("%", "\\%").replace("_", "\\_") + "/%",),
                )
            ]
        for name in {*self.dataflows(), *staged}:
            if name.startswith(f"{shard_id}/"):
                self.state(name).drop()

    def dataflows(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute("SELECT dataflow FROM frontier ORDER BY dataflow")]

    def _id(
        self, conn: sqlite3.Connection, dataflow: str, operator: str, create: bool
    ) -> int | None:
        # Not cached: a Spark hydration's swap (`Staging.swap`) gives the
        # dataflow's operators the ids it staged under, in any process.
        row = conn.execute(
            "SELECT id FROM arrangement WHERE dataflow = ? AND operator = ?", (dataflow, operator)
        ).fetchone()
        if row is None:
            if not create:
                return None
            return int(
                conn.execute(
                    "INSERT INTO arrangement (dataflow, operator) VALUES (?, ?) RETURNING id",
                    (dataflow, operator),
                ).fetchone()[0]
            )
        return int(row[0])

    def close(self) -> None:
        self._pool.close()


class DataflowState:
    """The arrangements of one dataflow, all at one upper."""

    def __init__(self, store: ArrangementStore, dataflow: str) -> None:
        self.store = store
        self.dataflow = dataflow

    def upper(self) -> int | None:
        """The state's upper, None if the dataflow has no state."""
        with self.store._conn() as conn:
            row = conn.execute(
                "SELECT upper FROM frontier WHERE dataflow = ?", (self.dataflow,)
            ).fetchone()
        return None if row is None else int(row[0])

    def arrangement(self, operator: str) -> Arrangement:
        return Arrangement(self, operator)

    def staging(self) -> Staging:
        """A place to write this dataflow's whole state in chunks, each its
        own transaction, invisible to every reader until one `swap`."""
        return Staging(self, f"{self.dataflow}#staging.{secrets.token_hex(8)}")

    def apply(
        self,
        changes: Mapping[str, Iterable[KeyedUpdate]],
        expected_upper: int | None,
        new_upper: int,
        replace: bool = False,
        timed: Mapping[str, Iterable[TimedUpdate]] | None = None,
        ordered: Mapping[str, Iterable[OrderedUpdate]] | None = None,
    ) -> bool:
        """Add each operator's keyed updates (`timed` ones arranged by time,
        `ordered` ones by key then order) and move the upper from
        `expected_upper` (None: no state yet) to `new_upper`, all in one
        transaction; False, with nothing changed, if the upper is not the
        expected one. `replace` first empties the arrangements (hydration
        over a discarded state). Timed rows due before `new_upper` are
        dropped: the steps up to it took them."""
        if expected_upper is not None and new_upper < expected_upper:
            raise ValueError(f"state upper cannot go back from {expected_upper} to {new_upper}")
        consolidated = {op: _consolidate(updates, identity) for op, updates in changes.items()}
        by_time = {
            op: _consolidate(
                ((t, r, d) for t, r, d in updates if new_upper <= t < _NEVER), _time_id
            )
            for op, updates in (timed or {}).items()
        }
        with self.store._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT upper FROM frontier WHERE dataflow = ?", (self.dataflow,)
            ).fetchone()
            if (None if row is None else int(row[0])) != expected_upper:
                conn.execute("ROLLBACK")
                return False
            if replace:
                self._delete_rows(conn)
            self._write(conn, consolidated, by_time, ordered or {}, replace)
            conn.execute(
                "DELETE FROM pending WHERE arrangement IN"
                " (SELECT id FROM arrangement WHERE dataflow = ?) AND time < ?",
                (self.dataflow, new_upper),
            )
            conn.execute(
                "INSERT INTO frontier (dataflow, upper) VALUES (?, ?)"
                " ON CONFLICT (dataflow) DO UPDATE SET upper = excluded.upper",
                (self.dataflow, new_upper),
            )
            conn.execute("COMMIT")
            return True

    def _write(
        self,
        conn: sqlite3.Connection,
        consolidated: Mapping[str, dict[tuple[Any, bytes], list[Any]]],
        by_time: Mapping[str, dict[tuple[Any, bytes], list[Any]]],
        ordered: Mapping[str, Iterable[OrderedUpdate]],
        replace: bool,
    ) -> None:
        """Add consolidated changes to this dataflow's arrangements, in
        `conn`'s transaction (`replace`: every row is new)."""
        for operator, entries in consolidated.items():
            arr = self.store._id(conn, self.dataflow, operator, create=True)
            conn.executemany(
                "INSERT INTO arranged (arrangement, key, rid, row, diff)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (arrangement, key, rid)"
                " DO UPDATE SET diff = diff + excluded.diff",
                (
                    (arr, k, r, pickle.dumps(v[0], protocol=5), v[1])
                    for (k, r), v in entries.items()
                    if v[1] != 0
                ),
            )
            if replace:
                continue  # every row is new: none can have reached 0
            conn.executemany(
                "DELETE FROM arranged WHERE arrangement = ? AND key = ? AND rid = ? AND diff = 0",
                ((arr, k, r) for (k, r), v in entries.items() if v[1] != 0),
            )
        for operator, updates in ordered.items():
            arr = self.store._id(conn, self.dataflow, operator, create=True)
            assert arr is not None
            self._apply_ordered(conn, arr, updates)
        for operator, entries in by_time.items():
            arr = self.store._id(conn, self.dataflow, operator, create=True)
            conn.executemany(
                "INSERT INTO pending (arrangement, time, rid, row, diff)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (arrangement, time, rid)"
                " DO UPDATE SET diff = diff + excluded.diff",
                (
                    (arr, t, r, pickle.dumps(v[0], protocol=5), v[1])
                    for (t, r), v in entries.items()
                    if v[1] != 0
                ),
            )
            conn.executemany(
                "DELETE FROM pending WHERE arrangement = ? AND time = ? AND rid = ? AND diff = 0",
                ((arr, t, r) for (t, r), v in entries.items() if v[1] != 0),
            )

    @staticmethod
    def _apply_ordered(
        conn: sqlite3.Connection, arr: int, updates: Iterable[OrderedUpdate]
    ) -> None:
        entries: dict[tuple[bytes, bytes, bytes], list[Any]] = {}
        for key, ord, row, diff in updates:
            ident = (identity(key), ord, identity(row))
            entry = entries.get(ident)
            if entry is None:
                entries[ident] = [row, diff]
            else:
                entry[1] += diff
        changed = [(arr, k, o, r, v) for (k, o, r), v in entries.items() if v[1] != 0]
        conn.executemany(
            "INSERT INTO ordered (arrangement, key, ord, rid, row, diff)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (arrangement, key, ord, rid)"
            " DO UPDATE SET diff = diff + excluded.diff",
            ((a, k, o, r, pickle.dumps(v[0], protocol=5), v[1]) for a, k, o, r, v in changed),
        )
        conn.executemany(
            "DELETE FROM ordered"
            " WHERE arrangement = ? AND key = ? AND ord = ? AND rid = ? AND diff = 0",
            ((a, k, o, r) for a, k, o, r, _ in changed),
        )

    def _delete_rows(self, conn: sqlite3.Connection) -> None:
        for table in _STATE_TABLES:
            conn.execute(
                f"DELETE FROM {table} WHERE arrangement IN"
                " (SELECT id FROM arrangement WHERE dataflow = ?)",
                (self.dataflow,),
            )

    def drop(self) -> None:
        """Forget the dataflow's state (its view was dropped)."""
        with self.store._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            self._delete_rows(conn)
            conn.execute("DELETE FROM arrangement WHERE dataflow = ?", (self.dataflow,))
            conn.execute("DELETE FROM frontier WHERE dataflow = ?", (self.dataflow,))
            conn.execute("COMMIT")

    def stats(self) -> dict[str, ArrangementStats]:
        """Per operator: its entries, total multiplicity and encoded bytes."""
        with self.store._conn() as conn:
            rows = conn.execute(
                "SELECT a.operator, s.rows, s.updates, s.bytes"
                " FROM arrangement a JOIN arrangement_size s ON s.arrangement = a.id"
                " WHERE a.dataflow = ? AND s.rows > 0",
                (self.dataflow,),
            ).fetchall()
        return {op: ArrangementStats(int(n), int(u), int(b)) for op, n, u, b in rows}


class Staging:
    """A dataflow's state being built (a Spark hydration, compute/arranged.py)
    under another name: chunks of it are written as they are computed, so
    the builder holds a chunk, not the state; `swap` then makes it the
    dataflow's in one transaction that checks the upper (a builder that lost
    the race discards its chunks and changes nothing). The staged rows keep
    their arrangement ids: the swap renames the arrangements, it does not
    copy their rows. A builder that dies leaves its chunks to `drop_output`."""

    def __init__(self, target: DataflowState, name: str) -> None:
        self.target = target
        self.staged = DataflowState(target.store, name)

    def write(
        self,
        changes: Mapping[str, Iterable[KeyedUpdate]] | None = None,
        timed: Mapping[str, Iterable[TimedUpdate]] | None = None,
        ordered: Mapping[str, Iterable[OrderedUpdate]] | None = None,
    ) -> None:
        """Add a chunk of each operator's updates to the staged state."""
        consolidated = {
            op: _consolidate(updates, identity) for op, updates in (changes or {}).items()
        }
        by_time = {
            op: _consolidate(((t, r, d) for t, r, d in updates if t < _NEVER), _time_id)
            for op, updates in (timed or {}).items()
        }
        with self.target.store._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            # Upserts: a chunk's rows add to the same rows of earlier chunks;
            # rows summing to 0 are deleted at the swap.
            self.staged._write(conn, consolidated, by_time, ordered or {}, replace=True)
            conn.execute("COMMIT")

    def swap(self, expected_upper: int | None, new_upper: int) -> bool:
        """Replace the dataflow's state with the staged one and move its
        upper from `expected_upper` to `new_upper`, in one transaction;
        False (the staged state discarded, the dataflow's untouched) if the
        upper is not the expected one."""
        target, staged = self.target.dataflow, self.staged.dataflow
        with self.target.store._conn() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(
                "SELECT upper FROM frontier WHERE dataflow = ?", (target,)
            ).fetchone()
            if (None if row is None else int(row[0])) != expected_upper:
                conn.execute("ROLLBACK")
                self.discard()
                return False
            self.target._delete_rows(conn)
            conn.execute("DELETE FROM arrangement WHERE dataflow = ?", (target,))
            conn.execute("UPDATE arrangement SET dataflow = ? WHERE dataflow = ?", (target, staged))
            for table in _STATE_TABLES:
                conn.execute(
                    f"DELETE FROM {table} WHERE arrangement IN"
                    " (SELECT id FROM arrangement WHERE dataflow = ?) AND diff = 0",
                    (target,),
                )
            conn.execute(
                "DELETE FROM pending WHERE arrangement IN"
                " (SELECT id FROM arrangement WHERE dataflow = ?) AND time < ?",
                (target, new_upper),
            )
            conn.execute(
                "INSERT INTO frontier (dataflow, upper) VALUES (?, ?)"
                " ON CONFLICT (dataflow) DO UPDATE SET upper = excluded.upper",
                (target, new_upper),
            )
            conn.execute("COMMIT")
            return True

    def discard(self) -> None:
        self.staged.drop()


class Arrangement:
    """One operator's input, arranged by key."""

    def __init__(self, state: DataflowState, operator: str) -> None:
        self.state = state
        self.operator = operator

    def read(self, keys: Iterable[Key]) -> dict[Key, list[tuple[Row, int]]]:
        """The rows with their multiplicities under each key (consolidated at
        the state's upper); keys without rows are absent."""
        by_id: dict[bytes, Key] = {}
        for key in keys:
            by_id.setdefault(identity(key), key)
        out: dict[Key, list[tuple[Row, int]]] = defaultdict(list)
        if not by_id:
            return out
        store = self.state.store
        with store._conn() as conn:
            arr = store._id(conn, self.state.dataflow, self.operator, create=False)
            if arr is None:
                return out
            ids: Sequence[bytes] = list(by_id)
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, blob, diff in conn.execute(
                    "SELECT key, row, diff FROM arranged"
                    f" WHERE arrangement = ? AND key IN ({marks})",
                    (arr, *chunk),
                ):
                    out[by_id[key]].append((_row(blob), int(diff)))
        return out

    def read_between(self, lower: int, upper: int) -> list[TimedUpdate]:
        """The rows arranged by time that are due in [lower, upper)."""
        store = self.state.store
        with store._conn() as conn:
            arr = store._id(conn, self.state.dataflow, self.operator, create=False)
            if arr is None:
                return []
            return [
                (int(time), _row(blob), int(diff))
                for time, blob, diff in conn.execute(
                    "SELECT time, row, diff FROM pending"
                    " WHERE arrangement = ? AND time >= ? AND time < ?",
                    (arr, lower, upper),
                )
            ]

    def read_first(self, key: Key, count: int | None) -> list[tuple[Row, int]]:
        """The rows under `key` in order, up to the first `count` (by
        multiplicity) and every row tied with the last of them in `ord`;
        all of them if `count` is None."""
        store = self.state.store
        out: list[tuple[Row, int]] = []
        with store._conn() as conn:
            arr = store._id(conn, self.state.dataflow, self.operator, create=False)
            if arr is None:
                return out
            taken, last = 0, None
            for ord, blob, diff in conn.execute(
                "SELECT ord, row, diff FROM ordered WHERE arrangement = ? AND key = ? ORDER BY ord",
                (arr, identity(key)),
            ):
                if count is not None and taken >= count and ord != last:
                    break
                out.append((_row(blob), int(diff)))
                taken, last = taken + max(int(diff), 0), ord
        return out

    def scan(self) -> list[tuple[Row, int]]:
        """Every row (tests and size checks; a step reads by key)."""
        store = self.state.store
        with store._conn() as conn:
            arr = store._id(conn, self.state.dataflow, self.operator, create=False)
            if arr is None:
                return []
            return [
                (_row(blob), int(diff))
                for blob, diff in conn.execute(
                    "SELECT row, diff FROM arranged WHERE arrangement = ?", (arr,)
                )
            ]


def _time_id(time: int) -> int:
    return time


def _consolidate(
    updates: Iterable[tuple[Any, Row, int]], name: Any
) -> dict[tuple[Any, bytes], list[Any]]:
    """(name(key or time), identity(row)) -> [row, summed diff]."""
    entries: dict[tuple[Any, bytes], list[Any]] = {}
    for key, row, diff in updates:
        ident = (name(key), identity(row))
        entry = entries.get(ident)
        if entry is None:
            entries[ident] = [row, diff]
        else:
            entry[1] += diff
    return entries


__all__ = [
    "Arrangement",
    "ArrangementStats",
    "ArrangementStore",
    "DataflowState",
    "KeyedUpdate",
    "OrderedUpdate",
    "Staging",
    "TimedUpdate",
    "identity",
]
