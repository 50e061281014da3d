"""A PostgreSQL source's ingestion: a consistent snapshot, then logical
replication (pgoutput) into one collection per upstream table.

Why this shape (Materialize's PostgreSQL source): the replication slot is
created with an exported snapshot, the tables are read in that snapshot, and
streaming starts at the slot's consistent point, so the snapshot and the
stream meet exactly. Every batch of whole upstream transactions is one
atomic append to all the subsources (`compare_and_append_all`) at one
timestamp, and the same compare-and-set moves the source's progress record
(the end LSN of the last transaction taken in). The slot is told that LSN
is flushed only after that append is durable. A restart reads the record
and starts replication there; transactions that end at or before it are
skipped, so nothing is taken in twice or missed.

The progress record (consensus key `storage/postgres-source/<id>`) is a JSON
object: `lsn` (None until the snapshot landed) and `errors` (subsource id ->
message) for subsources that can no longer be maintained (an upstream
schema change, TRUNCATE, a value the column cannot hold); those stop
advancing and the adapter answers reads of them with the error, the others
keep going.

Updates and deletes carry the whole old row only with REPLICA IDENTITY FULL,
which the adapter requires of every table (Materialize does too).
"""

from __future__ import annotations

import io
import json
import logging
import re
import select
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator_lib.persist import errors as persist_errors
from coordinator_lib.persist.consensus import Consensus
from coordinator_lib.persist.shard import Append, Shard, compare_and_append_all
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.update import Row, Update

log = logging.getLogger(__name__)

PROGRESS_PREFIX = "storage/postgres-source/"
# How often an idle source advances its subsources' uppers (reads wait for them).
ADVANCE_INTERVAL_S = 0.1
# Changes are gathered at least this long, then appended once the stream has
# nothing more buffered (the source caught up) ...
FLUSH_INTERVAL_S = 0.05
# ... or once the oldest is this old or there are MAX_PENDING of them: behind
# a busy upstream, batches grow, so each append (a Parquet part per
# subsource and a compare-and-set, and the views' step after it) carries more.
MAX_BATCH_AGE_S = 0.5
MAX_PENDING = 50_000
RETRY_INTERVAL_S = 1.0

S = ScalarType
# Upstream type OIDs (pg_type) and the column types they become.
PG_TYPES: dict[int, ScalarType] = {
    16: S.BOOLEAN,
    21: S.SMALLINT,
    23: S.INTEGER,
    20: S.BIGINT,
    700: S.REAL,
    701: S.DOUBLE,
    1700: S.NUMERIC,
    25: S.TEXT,
    1043: S.TEXT,  # varchar
    1042: S.BPCHAR,
    17: S.BYTEA,
    1082: S.DATE,
    1114: S.TIMESTAMP,
    1184: S.TIMESTAMPTZ,
    3802: S.JSONB,
}

Decoder = Callable[[str], Any]

# An upstream table's columns (name, type OID) as the snapshot sees them.
_COLUMNS = (
    "SELECT a.attname, a.atttypid::int FROM pg_attribute a"
    " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped"
    " ORDER BY a.attnum"
)


class SubsourceError(Exception):
    """A change a subsource cannot take in: it stops, with this message."""


@dataclass(frozen=True)
class UpstreamColumn:
    name: str
    type: ScalarType
    decode: Decoder


@dataclass(frozen=True)
class UpstreamTable:
    """One published table and the subsource collection `id` it feeds."""

    schema: str
    name: str
    id: GlobalId
    columns: tuple[UpstreamColumn, ...]

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def decode(self, texts: Sequence[str | None]) -> Row:
        try:
            return tuple(
                None if text is None else column.decode(text)
                for column, text in zip(self.columns, texts, strict=True)
            )
        except Exception as error:
            raise SubsourceError(
                f"table {self.qualified}: a value cannot be ingested: {error}"
            ) from None


@dataclass(frozen=True)
class PostgresIngestionSpec:
    source_id: GlobalId
    conninfo: dict[str, Any] = field(repr=False)  # host, port, user, password, dbname, sslmode
    publication: str = ""
    slot: str = ""
    tables: tuple[UpstreamTable, ...] = ()


_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_COPY_ESCAPE = re.compile(r"\\(.)")


def copy_fields(line: str) -> list[str | None]:
    """The fields of one line of COPY's text format (`\\N` is NULL)."""
    return [
        None
        if field == "\\N"
        else _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), field)
        for field in line.split("\t")
    ]


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def progress_key(source_id: GlobalId) -> str:
    return f"{PROGRESS_PREFIX}{source_id}"


def read_progress(consensus: Consensus, source_id: GlobalId) -> dict[str, Any]:
    head = consensus.head(progress_key(source_id))
    if head is None:
        return {"lsn": None, "errors": {}}
    data: dict[str, Any] = json.loads(head.data)
    return data


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def drop_slot(conninfo: dict[str, Any], slot: str) -> bool:
    """Drop the replication slot (ending the session that streams from it,
    if any); False if there was none."""
    import psycopg

    with psycopg.connect(**conninfo, autocommit=True, connect_timeout=10) as conn:
        for _ in range(50):
            row = conn.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                return False
            if row[0] is not None:
                conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                time.sleep(0.1)
                continue
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return True
            except psycopg.errors.ObjectInUse:
                time.sleep(0.1)
    raise RuntimeError(f"replication slot {slot} stays active")


# --- pgoutput (protocol version 1) ---------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> str:
        self.at += 1
        return chr(self.data[self.at - 1])

    def int8(self) -> int:
        self.at += 1
        return self.data[self.at - 1]

    def int16(self) -> int:
        value: int = struct.unpack_from("!h", self.data, self.at)[0]
        self.at += 2
        return value

    def int32(self) -> int:
        value: int = struct.unpack_from("!i", self.data, self.at)[0]
        self.at += 4
        return value

    def int64(self) -> int:
        value: int = struct.unpack_from("!q", self.data, self.at)[0]
        self.at += 8
        return value

    def string(self) -> str:
        end = self.data.index(0, self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def tuple_data(self) -> list[str | bool | None]:
        """Column values as text; None for NULL, False for an unchanged TOAST value."""
        values: list[str | bool | None] = []
        for _ in range(self.int16()):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(False)
            else:
                length = self.int32()
                values.append(self.data[self.at : self.at + length].decode())
                self.at += length
        return values


@dataclass
class _Relation:
    namespace: str
    name: str
    columns: list[tuple[str, int]]


@dataclass
class _Transaction:
    changes: dict[GlobalId, list[tuple[Row, int]]] = field(default_factory=dict)
    errors: dict[GlobalId, str] = field(default_factory=dict)


class PostgresIngestion:
    """Runs one source in a thread: snapshot once, then stream for ever
    (reconnecting after errors) until `stop()`."""

    def __init__(
        self,
        spec: PostgresIngestionSpec,
        consensus: Consensus,
        shards: Callable[[GlobalId], Shard],
        clock: Callable[[], int],
        on_uppers: Callable[[list[tuple[GlobalId, Frontier]]], None] = lambda _: None,
        closing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.spec = spec
        self.consensus = consensus
        self.shards = shards
        self.clock = clock
        self.on_uppers = on_uppers
        self.closing = closing  # the owning process is shutting down
        self.by_name = {(t.schema, t.name): t for t in spec.tables}
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"postgres-source-{spec.source_id}", daemon=True
        )
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _stopping(self) -> bool:
        return self._stop.is_set() or self.closing()

    def upper(self) -> int | None:
        """The least upper of the subsources still maintained (the source's
        checkpoint as a scheduler task); None before the snapshot landed."""
        progress = read_progress(self.consensus, self.spec.source_id)
        if progress["lsn"] is None:
            return None
        times = [self.shards(t.id).upper().time for t in self._active(progress)]
        return min((t for t in times if t is not None), default=None)

    def _run(self) -> None:
        while not self._stopping():
            try:
                self._session()
            except Exception as error:  # upstream gone, slot busy, lost race: retry
                if self._stopping():
                    return
                self.last_error = str(error)
                log.warning("postgres source %s: %s (retrying)", self.spec.source_id, error)
                self._stop.wait(RETRY_INTERVAL_S)

    # ---------------------------------------------------------------- session
    def _session(self) -> None:
        import psycopg2
        import psycopg2.extras

        conn = psycopg2.connect(
            **self.spec.conninfo,
            connection_factory=psycopg2.extras.LogicalReplicationConnection,
            connect_timeout=10,
        )
        try:
            cur = conn.cursor()
            progress = read_progress(self.consensus, self.spec.source_id)
            if progress.get("dropped"):  # DROP SOURCE: no new slot, no snapshot
                self._stop.set()
                return
            if progress["lsn"] is None:
                progress = self._snapshot(cur)
            self._stream(conn, cur, progress)
        finally:
            conn.close()

    def _active(self, progress: dict[str, Any]) -> list[UpstreamTable]:
        return [t for t in self.spec.tables if str(t.id) not in progress["errors"]]

    def _snapshot(self, cur: Any) -> dict[str, Any]:
        """Create the slot with an exported snapshot, read every table in it
        and land the rows with the slot's consistent point, in one append."""
        import psycopg2

        slot = self.spec.slot
        drop_slot(self.spec.conninfo, slot)  # a snapshot that never landed
        cur.execute(f"CREATE_REPLICATION_SLOT {quote_ident(slot)} LOGICAL pgoutput EXPORT_SNAPSHOT")
        _, consistent_point, snapshot, _ = cur.fetchone()
        changes: dict[GlobalId, list[tuple[Row, int]]] = {}
        with psycopg2.connect(**self.spec.conninfo, connect_timeout=10) as reader:
            with reader.cursor() as rcur:
                rcur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                rcur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot,))
                errors: dict[str, str] = {}
                for table in self.spec.tables:
                    rcur.execute(_COLUMNS, (table.schema, table.name))
                    problem = _schema_problem(table, [(n, oid) for n, oid in rcur.fetchall()])
                    if problem is not None:  # changed since CREATE SOURCE
                        errors[str(table.id)] = problem
                        continue
                    # COPY prints every value with its type's output function,
                    # as pgoutput does (`::text` would trim a char(n)'s padding).
                    columns = ", ".join(quote_ident(c.name) for c in table.columns)
                    copied = io.StringIO()
                    rcur.copy_expert(f"COPY {table.qualified} ({columns}) TO STDOUT", copied)
                    rows = changes.setdefault(table.id, [])
                    try:
                        for line in copied.getvalue().split("\n")[:-1]:
                            rows.append((table.decode(copy_fields(line)), 1))
                    except SubsourceError as error:
                        errors[str(table.id)] = str(error)
                        changes.pop(table.id)
            reader.rollback()
        reader.close()
        progress = {"lsn": parse_lsn(consistent_point), "errors": errors}
        self._append(changes, progress, expected_lsn=None, at_upper=True)
        log.info("postgres source %s: snapshot taken", self.spec.source_id)
        return progress

    def _stream(self, conn: Any, cur: Any, progress: dict[str, Any]) -> None:
        cur.start_replication(
            slot_name=self.spec.slot,
            decode=False,
            start_lsn=progress["lsn"],
            options={"proto_version": "1", "publication_names": self.spec.publication},
        )
        relations: dict[int, _Relation] = {}
        txn: _Transaction | None = None
        txn_end = 0
        pending: dict[GlobalId, list[tuple[Row, int]]] = {}
        pending_errors: dict[GlobalId, str] = {}
        pending_lsn = progress["lsn"]
        pending_count = 0
        first_pending = last_flush = time.monotonic()
        while not self._stopping():
            message = cur.read_message()
            if message is None:
                select.select([conn], [], [], FLUSH_INTERVAL_S)
            else:
                data = message.payload
                kind = chr(data[0])
                reader = _Reader(data)
                reader.at = 1
                if kind == "B":
                    reader.int64()  # final LSN
                    txn, txn_end = _Transaction(), 0
                elif kind == "R":
                    relid = reader.int32()
                    namespace, name = reader.string(), reader.string()
                    reader.int8()  # replica identity
                    columns = []
                    for _ in range(reader.int16()):
                        reader.int8()
                        column = reader.string()
                        columns.append((column, reader.int32()))
                        reader.int32()
                    relations[relid] = _Relation(namespace, name, columns)
                    table = self.by_name.get((namespace, name))
                    if table is not None and txn is not None:
                        problem = _schema_problem(table, columns)
                        if problem is not None:
                            txn.errors[table.id] = problem
                elif kind in "IUDT" and txn is not None:
                    self._change(kind, reader, relations, txn, progress)
                elif kind == "C":
                    reader.int8()
                    reader.int64()  # commit LSN
                    txn_end = reader.int64()
                    if txn is not None and txn_end > progress["lsn"]:
                        for id, rows in txn.changes.items():
                            if str(id) not in progress["errors"] and id not in pending_errors:
                                pending.setdefault(id, []).extend(rows)
                                pending_count += len(rows)
                        pending_errors.update(txn.errors)
                        if pending_lsn == progress["lsn"]:
                            first_pending = time.monotonic()
                        pending_lsn = txn_end
                    txn = None
            now = time.monotonic()
            if pending_lsn != progress["lsn"]:
                age = now - first_pending
                caught_up = message is None
                flush = (
                    (caught_up and age >= FLUSH_INTERVAL_S)
                    or age >= MAX_BATCH_AGE_S
                    or pending_count >= MAX_PENDING
                )
            else:
                flush = now - last_flush >= ADVANCE_INTERVAL_S  # only the uppers move
            if txn is None and flush:
                new = {
                    "lsn": pending_lsn,
                    "errors": {
                        **progress["errors"],
                        **{str(k): v for k, v in pending_errors.items()},
                    },
                }
                for id in pending_errors:
                    pending.pop(id, None)
                self._append(pending, new, expected_lsn=progress["lsn"])
                if pending_errors:
                    for id, problem in pending_errors.items():
                        log.error(
                            "postgres source %s: subsource %s: %s", self.spec.source_id, id, problem
                        )
                progress = new
                cur.send_feedback(flush_lsn=progress["lsn"], reply=True)
                pending, pending_errors, pending_count = {}, {}, 0
                last_flush = now

    def _change(
        self,
        kind: str,
        reader: _Reader,
        relations: dict[int, _Relation],
        txn: _Transaction,
        progress: dict[str, Any],
    ) -> None:
        if kind == "T":
            count = reader.int32()
            reader.int8()
            for _ in range(count):
                relation = relations.get(reader.int32())
                table = relation and self.by_name.get((relation.namespace, relation.name))
                if table:
                    txn.errors[table.id] = (
                        f"table {table.qualified} was truncated upstream, which is not supported"
                    )
            return
        relation = relations.get(reader.int32())
        table = relation and self.by_name.get((relation.namespace, relation.name))
        if not table or table.id in txn.errors or str(table.id) in progress["errors"]:
            return
        rows = txn.changes.setdefault(table.id, [])
        try:
            if kind == "I":
                reader.byte()  # 'N'
                rows.append((table.decode(_texts(reader.tuple_data())), 1))
                return
            marker = reader.byte()
            old = reader.tuple_data() if marker in "KO" else None
            if kind == "D":
                if old is None or marker != "O":
                    raise SubsourceError(f"table {table.qualified} lacks REPLICA IDENTITY FULL")
                rows.append((table.decode(_texts(old)), -1))
                return
            if old is None:
                raise SubsourceError(f"table {table.qualified} lacks REPLICA IDENTITY FULL")
            if marker != "O":
                raise SubsourceError(f"table {table.qualified} lacks REPLICA IDENTITY FULL")
            reader.byte()  # 'N'
            new = reader.tuple_data()
            merged = [o if n is False else n for o, n in zip(old, new, strict=True)]
            rows.append((table.decode(_texts(old)), -1))
            rows.append((table.decode(_texts(merged)), 1))
        except SubsourceError as error:
            txn.errors[table.id] = str(error)

    # ----------------------------------------------------------------- append
    def _append(
        self,
        changes: dict[GlobalId, list[tuple[Row, int]]],
        progress: dict[str, Any],
        expected_lsn: int | None,
        at_upper: bool = False,
    ) -> None:
        """All active subsources to one new time (with `changes` there) and
        the progress record, in one compare-and-set. The snapshot goes
        `at_upper`: at the subsources' first time, so no read sees them
        empty before it. The record must still
        hold `expected_lsn`: another process that took the slot over since
        makes this one stop (its stream is stale) instead of writing twice."""
        active = self._active(progress)
        ids = [t.id for t in active]
        key = progress_key(self.spec.source_id)
        encoded = json.dumps(progress).encode()

        def change(current: bytes | None) -> bytes:
            record = {} if current is None else json.loads(current)
            found = record.get("lsn")
            if found != expected_lsn or record.get("dropped"):
                raise persist_errors.PersistError(
                    f"progress moved to {found} under this stream (expected {expected_lsn})"
                )
            return encoded

        if not ids:  # every subsource errored: only the record moves
            self._record_only(key, change)
            return
        shards = {id: self.shards(id) for id in ids}
        while True:
            uppers = {id: shard.upper() for id, shard in shards.items()}
            if any(u.time is None for u in uppers.values()):
                raise persist_errors.PersistError("a subsource was dropped")
            times = [u.time for u in uppers.values() if u.time is not None]
            time_ = max(times) if at_upper else max([self.clock(), *times])
            appends = [
                Append(
                    shard,
                    shard.encode([Update(row, time_, diff) for row, diff in changes.get(id, ())]),
                    uppers[id],
                    Frontier.at(time_ + 1),
                )
                for id, shard in shards.items()
            ]
            try:
                compare_and_append_all(appends, [(key, change)])
            except persist_errors.UpperMismatch:
                continue  # another process sealed a subsource: take a later time
            self.on_uppers([(id, Frontier.at(time_ + 1)) for id in ids])
            self.last_error = None  # streaming again
            return

    def _record_only(self, key: str, change: Callable[[bytes | None], bytes]) -> None:
        from coordinator_lib.persist.consensus import VersionedData

        head = self.consensus.head(key)
        data = change(None if head is None else head.data)
        seqno = 1 if head is None else head.seqno + 1
        expected = None if head is None else head.seqno
        if not self.consensus.compare_and_set(key, expected, VersionedData(seqno, data)):
            raise persist_errors.PersistError("progress record changed under this stream")


def _texts(values: list[str | bool | None]) -> list[str | None]:
    texts: list[str | None] = []
    for value in values:
        if value is False or value is True:
            raise SubsourceError("an unchanged TOAST value arrived without the old row")
        texts.append(value)
    return texts


def _schema_problem(table: UpstreamTable, columns: list[tuple[str, int]]) -> str | None:
    """Why the upstream table's columns no longer match the subsource's."""
    now = [(name, PG_TYPES.get(oid)) for name, oid in columns]
    expected = [(c.name, c.type) for c in table.columns]
    if now == expected:
        return None
    shown = ", ".join(f"{n} {t.value if t else 'unsupported'}" for n, t in now)
    return (
        f"incompatible schema change: upstream table {table.qualified} now has columns "
        f"({shown}); drop and create the source again"
    )


def mark_dropped(consensus: Consensus, source_id: GlobalId) -> None:
    """DROP SOURCE: the progress record becomes a tombstone, so an ingestion
    still running elsewhere (a worker not yet told) stops instead of taking
    a new snapshot into a new slot."""
    from coordinator_lib.persist.consensus import VersionedData

    key = progress_key(source_id)
    data = json.dumps({"lsn": None, "errors": {}, "dropped": True}).encode()
    while True:
        head = consensus.head(key)
        expected = None if head is None else head.seqno
        seqno = 1 if head is None else head.seqno + 1
        if consensus.compare_and_set(key, expected, VersionedData(seqno, data)):
            return


__all__ = [
    "PG_TYPES",
    "PROGRESS_PREFIX",
    "PostgresIngestion",
    "PostgresIngestionSpec",
    "UpstreamColumn",
    "UpstreamTable",
    "drop_slot",
    "lsn_text",
    "mark_dropped",
    "parse_lsn",
    "progress_key",
    "read_progress",
]
