"""A handle on one shard: writes through compare_and_append, reads at a time,
listens for changes, holds reads, compacts and collects garbage.

The rules (docs/architecture.md, invariants 1-5):
- `compare_and_append(updates, expected_upper, new_upper)` lands only if the
  upper is `expected_upper` and every time lies in [expected_upper, new_upper);
  otherwise nothing changes. The batch is durable before the state names it.
- A read at `as_of` needs since <= as_of < upper.
- `since` is the least hold of all readers and never passes a live hold.
"""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_lib.persist import batch as batch_io
from coordinator_lib.persist.arrangement_store import ArrangementStore
from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.persist.consensus import ConsensusError
from coordinator_lib.persist.errors import (
    InvalidUpdates,
    LeaseExpired,
    ReadBeforeSince,
    ReadBeyondUpper,
    SchemaMismatch,
    ShardFinalized,
    UpperMismatch,
)
from coordinator_lib.persist.machine import Machine, RecordChange, Transition, apply_all
from coordinator_lib.persist.read_scope import SEQNO_HOLD_LEASE_MS, current_scope
from coordinator_lib.persist.state import (
    BatchMeta,
    CriticalReaderState,
    LeasedReaderState,
    RetiredBatch,
    SeqnoHold,
    ShardState,
    WriterState,
)
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, RelationDesc, column_pylist
from coordinator_lib.repr.update import Row, Update

DEFAULT_LEASE_MS = 60_000
# Inline batches (Materialize's persist inline writes): a batch of at most
# INLINE_BATCH_BYTES (Arrow) is carried in the state itself, so the
# consensus compare-and-set that names it is the one write and fsync of its
# commit; it gets a blob file only when a reader that opens files needs one
# (`batch_dir`). While the live inline batches of a shard hold
# INLINE_TOTAL_BYTES, writes go to blob again, until compaction merges the
# inline ones into a durable batch.
INLINE_BATCH_BYTES = 16 * 1024
INLINE_TOTAL_BYTES = 128 * 1024
# How many times a read retries when a batch it planned to read was replaced
# by compaction (and deleted) between fetching the state and reading it.
READ_RETRIES = 20


@dataclass(frozen=True)
class ShardStatistics:
    rows: int
    bytes: int
    batches: int


@dataclass(frozen=True)
class ListenEvent:
    """Either a batch of updates (times in (as_of, progress)) or progress: all
    updates at times before `progress` have been emitted."""

    updates: tuple[Update, ...] = ()
    progress: Frontier | None = None


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:16]}"


# Rows a streamed snapshot turns into Python at a time (SnapshotRows).
SNAPSHOT_BATCH_ROWS = 4096


class SnapshotRows:
    """A consolidated snapshot's `(row, diff)` pairs over its Arrow table,
    converted `SNAPSHOT_BATCH_ROWS` at a time as they are iterated, and
    again on each iteration: whoever reads them whole holds them whole, a
    one-off query that streams them holds a batch (issue 18: a peek's
    inputs held as Python lists made the soak's heap peaks grow with the
    tables, and glibc's arenas stayed fragmented after them)."""

    def __init__(self, table: pa.Table, names: Sequence[str]) -> None:
        self.table = table
        self.names = tuple(names)

    def __len__(self) -> int:
        return self.table.num_rows

    def __iter__(self) -> Iterator[tuple[Row, int]]:
        for batch in self.table.to_batches(max_chunksize=SNAPSHOT_BATCH_ROWS):
            diffs = batch.column(DIFF_COLUMN).to_pylist()
            if not self.names:
                yield from (((), d) for d in diffs)
                continue
            columns = [column_pylist(batch.column(n)) for n in self.names]
            yield from zip(zip(*columns, strict=True), diffs, strict=True)
            # Dropped before the next batch is converted: one batch held, not two.
            del diffs, columns


class Shard:
    """One shard's handle. Cheap to create; holds a writer id for its appends."""

    def __init__(
        self,
        machine: Machine,
        blob: BlobStore,
        desc: RelationDesc,
        writer_lease_ms: int = DEFAULT_LEASE_MS,
    ) -> None:
        self.machine = machine
        self.blob = blob
        self.desc = desc
        self.shard_id = machine.shard_id
        self.writer_id = new_id("w")
        self.writer_lease_ms = writer_lease_ms
        self._writer_registered = False
        # Base64 bytes of inline batches in the last state this handle wrote.
        self._inline_bytes = 0

    # ------------------------------------------------------------------ open
    @staticmethod
    def open(
        machine: Machine, blob: BlobStore, desc: RelationDesc, initial_since: int = 0
    ) -> Shard:
        """Create the shard if it is new, else check its schema matches."""
        initial = ShardState(
            shard_id=machine.shard_id, desc=desc, since=initial_since, upper=initial_since
        )
        state = machine.create_if_missing(initial)
        if state.desc != desc:
            raise SchemaMismatch(
                f"shard {machine.shard_id} was created with columns {list(state.desc.names)}"
                f" and types {[t.scalar_type.value for t in state.desc.types]}; opened with"
                f" {list(desc.names)} / {[t.scalar_type.value for t in desc.types]}"
            )
        return Shard(machine, blob, desc)

    # ------------------------------------------------------------- frontiers
    def state(self) -> ShardState:
        return self.machine.state()

    def upper(self) -> Frontier:
        return self.machine.current_state().upper_frontier

    def since(self) -> Frontier:
        return self.machine.current_state().since_frontier

    def statistics(self) -> ShardStatistics:
        state = self.machine.current_state()
        return ShardStatistics(
            rows=sum(b.rows for b in state.batches),
            bytes=sum(b.bytes for b in state.batches),
            batches=len(state.batches),
        )

    # ----------------------------------------------------------------- write
    def _register_writer(self) -> None:
        def register(state: ShardState, now: int) -> tuple[bool, None]:
            state.expire_leases(now)
            state.writers[self.writer_id] = WriterState(now, self.writer_lease_ms)
            return True, None

        self.machine.apply(register)
        self._writer_registered = True

    def validate_updates(
        self, updates: Sequence[Update], expected_upper: Frontier, new_upper: Frontier
    ) -> None:
        """Check an append's bounds and that every update's time lies in them
        (`encode` checks the rows)."""
        if expected_upper.is_empty:
            raise InvalidUpdates(
                f"shard {self.shard_id}: the upper is closed; nothing can be written"
            )
        if new_upper <= expected_upper:
            raise InvalidUpdates(
                f"shard {self.shard_id}: new upper {new_upper!r} must be after"
                f" expected upper {expected_upper!r}"
            )
        for position, (_, t, diff) in enumerate(updates):
            if not isinstance(t, int) or not isinstance(diff, int):
                raise InvalidUpdates(f"update {position}: time and diff must be integers")
            if not _in_range(t, expected_upper, new_upper):
                raise InvalidUpdates(
                    f"shard {self.shard_id}: update {position} has time {t}, outside"
                    f" {_range_text(expected_upper, new_upper)}"
                )

    def encode(self, updates: Sequence[Update]) -> pa.Table | None:
        """Check the rows of `updates` and encode them as a batch table (None
        if there are none); `check_table` checks their times against an
        append's bounds. After both, nothing about them can fail."""
        checked: list[Update] = []
        for position, update in enumerate(updates):
            row, t, diff = update
            if not isinstance(t, int) or not isinstance(diff, int):
                raise InvalidUpdates(f"update {position}: time and diff must be integers")
            try:
                checked.append(Update(self.desc.validate_row(row, position), t, diff))
            except InvalidRow as error:
                raise InvalidUpdates(f"shard {self.shard_id}: {error}", error) from error
        if not checked:
            return None
        try:
            return batch_io.updates_to_table(checked, self.desc)
        except InvalidRow as error:
            raise InvalidUpdates(f"shard {self.shard_id}: {error}", error) from error

    def check_table(
        self, table: pa.Table | None, expected_upper: Frontier, new_upper: Frontier
    ) -> pa.Table | None:
        """Check the bounds of an append and its Arrow table in the batch
        schema (data columns, `__time`, `__diff`): the bulk path, no per-row
        Python. Returns the table cast to the schema, None if it is empty."""
        self.validate_updates([], expected_upper, new_upper)
        if table is None:
            return None
        schema = self.desc.arrow_schema(with_time_diff=True)
        try:
            table = table.select(schema.names).cast(schema)
        except (KeyError, ValueError, TypeError) as error:  # Arrow's errors subclass these
            raise InvalidUpdates(f"shard {self.shard_id}: table does not fit: {error}") from error
        self._check_table(table, expected_upper, new_upper)
        return table if table.num_rows else None

    def compare_and_append(
        self, updates: Sequence[Update], expected_upper: Frontier, new_upper: Frontier
    ) -> None:
        """Append `updates` and advance the upper from `expected_upper` to
        `new_upper`, or raise UpperMismatch (carrying the current upper) and
        change nothing. Raises InvalidUpdates for updates that could never land."""
        self.validate_updates(updates, expected_upper, new_upper)
        table = self.check_table(self.encode(updates), expected_upper, new_upper)
        compare_and_append_all([Append(self, table, expected_upper, new_upper)])

    def compare_and_append_table(
        self, table: pa.Table, expected_upper: Frontier, new_upper: Frontier
    ) -> None:
        """Like compare_and_append for an Arrow table in the batch schema."""
        checked = self.check_table(table, expected_upper, new_upper)
        compare_and_append_all([Append(self, checked, expected_upper, new_upper)])

    def _check_table(self, table: pa.Table, expected_upper: Frontier, new_upper: Frontier) -> None:
        if table.num_rows == 0:
            return
        times = table.column(TIME_COLUMN)
        low, high = pc.min(times).as_py(), pc.max(times).as_py()
        if not (
            _in_range(low, expected_upper, new_upper) and _in_range(high, expected_upper, new_upper)
        ):
            raise InvalidUpdates(
                f"shard {self.shard_id}: times [{low}, {high}] lie outside"
                f" {_range_text(expected_upper, new_upper)}"
            )
        for name, ty in zip(self.desc.names, self.desc.types, strict=True):
            if not ty.nullable and table.column(name).null_count:
                raise InvalidUpdates(f"shard {self.shard_id}: NULL in NOT NULL column {name!r}")

    def check_upper(self, expected_upper: Frontier) -> None:
        """Fail fast, before writing any blob, if the shard is finalized or its
        upper is not `expected_upper` (the commit checks again, atomically).
        The state this process knows decides a pass without a consensus
        read; a failure is decided on the current state."""
        state = self.machine.recent_state()
        if state.finalized or state.upper_frontier != expected_upper:
            state = self.state()
        if state.finalized:
            raise ShardFinalized(f"shard {self.shard_id} is finalized; nothing can be written")
        if state.upper_frontier != expected_upper:
            raise UpperMismatch(self.shard_id, expected_upper, state.upper_frontier)

    def _write_batch(
        self, table: pa.Table, expected_upper: Frontier, new_upper: Frontier
    ) -> BatchMeta:
        """Write `table` as a new blob batch under this (registered) writer;
        nothing names it yet."""
        if not self._writer_registered:
            self._register_writer()
        key = f"{self.writer_id}-{uuid.uuid4().hex}"
        inline = None
        if table.nbytes <= INLINE_BATCH_BYTES:
            data = batch_io.inline_bytes(table)
            encoded = base64.b64encode(data).decode()
            if self._inline_bytes + len(encoded) <= INLINE_TOTAL_BYTES:
                inline, size = encoded, len(data)
        if inline is None:
            size = batch_io.write_batch_table(table, self.blob.batch_path(self.shard_id, key))
        return BatchMeta(
            key=key,
            lower=expected_upper.time,  # type: ignore[arg-type]
            upper=new_upper.time,
            since=0,
            rows=table.num_rows,
            bytes=size,
            inline=inline,
        )

    def add_written_batch(
        self, key: str, rows: int, size: int, expected_upper: Frontier, new_upper: Frontier
    ) -> None:
        """Name a batch some other engine (Spark) already wrote under
        `blob.batch_path(shard_id, key)`; the key must start with this
        handle's writer id (see `reserve_batch_key`)."""
        meta = BatchMeta(key, expected_upper.time, new_upper.time, 0, rows, size)  # type: ignore[arg-type]
        try:
            self.machine.apply(self._commit(meta, expected_upper, new_upper))
        except BaseException:
            self.blob.delete_batch(self.shard_id, key)
            raise

    def reserve_batch_key(self) -> str:
        """A fresh batch key under this writer, protected from GC while the
        writer's lease is live."""
        self._register_writer()
        return f"{self.writer_id}-{uuid.uuid4().hex}"

    def _commit(
        self, meta: BatchMeta | None, expected_upper: Frontier, new_upper: Frontier
    ) -> Transition[None]:
        """The transition that names `meta` (if any) and moves the upper."""

        def commit(state: ShardState, now: int) -> tuple[bool, None]:
            if state.upper_frontier != expected_upper:
                raise UpperMismatch(self.shard_id, expected_upper, state.upper_frontier)
            if meta is not None:
                writer = state.writers.get(self.writer_id)
                if writer is None or writer.expired(now):
                    raise LeaseExpired(f"writer {self.writer_id} lease expired")
                writer.heartbeat_ms = now
                since = state.since if state.since is not None else 0
                state.batches.append(dataclasses.replace(meta, since=since))
            state.upper = new_upper.time
            state.expire_leases(now)
            self._inline_bytes = sum(len(b.inline) for b in state.batches if b.inline)
            return True, None

        return commit

    # ------------------------------------------------------------------ read
    def check_readable(self, state: ShardState, as_of: int) -> None:
        if not state.since_frontier.less_equal(as_of):
            raise ReadBeforeSince(self.shard_id, as_of, state.since_frontier)
        if state.upper_frontier.less_equal(as_of):
            raise ReadBeyondUpper(self.shard_id, as_of, state.upper_frontier)

    def plan_read(self) -> ShardState:
        """The state a deferred read (a lazy Spark job) plans from, with a seqno
        hold keeping every blob it names until the read is done: released
        when the enclosing `read_scope.held_reads()` ends, or lapsing after
        its lease when there is none."""
        scope = current_scope()
        if scope is not None and scope.holds_shard(self.shard_id):
            return self.state()  # the scope's older hold protects this state too
        hold_id = new_id("h")
        lease_ms = SEQNO_HOLD_LEASE_MS if scope is None else scope.lease_ms

        def hold(state: ShardState, now: int) -> tuple[bool, ShardState]:
            state.expire_leases(now)
            # `state.seqno` is the state read here; the batches this
            # transition returns are that state's.
            state.seqno_holds[hold_id] = SeqnoHold(state.seqno, now, lease_ms)
            return True, ShardState.from_bytes(state.to_bytes())

        planned = self.machine.apply(hold)
        if scope is not None:
            scope.add(self, hold_id)
        return planned

    def heartbeat_seqno_hold(self, hold_id: str) -> None:
        def heartbeat(state: ShardState, now: int) -> tuple[bool, None]:
            hold = state.seqno_holds.get(hold_id)
            if hold is None or hold.expired(now):
                raise LeaseExpired(f"seqno hold {hold_id} of shard {self.shard_id} lapsed")
            hold.heartbeat_ms = now
            return True, None

        self.machine.apply(heartbeat)

    def release_seqno_hold(self, hold_id: str) -> None:
        def release(state: ShardState, now: int) -> tuple[bool, None]:
            return state.seqno_holds.pop(hold_id, None) is not None, None

        self.machine.apply(release, allow_finalized=True)

    def batch_dirs_at(self, as_of: int) -> tuple[ShardState, list[str]]:
        """The state and the batch directories a read at `as_of` needs, held
        (`plan_read`) so they outlive compaction until the read is done."""
        state = self.plan_read()
        self.check_readable(state, as_of)
        dirs = [self.batch_dir(b) for b in state.batches if b.lower <= as_of]
        return state, dirs

    def batch_dir(self, meta: BatchMeta) -> str:
        """The directory of `meta`'s files, for a reader that opens them
        itself (Spark); an inline batch's file is written from the state's
        copy if it is not there yet."""
        path = self.blob.batch_path(self.shard_id, meta.key)
        if meta.inline is not None:
            batch_io.materialize_batch(self._inline_table(meta.inline), path)
        return str(path)

    def _inline_table(self, inline: str) -> pa.Table:
        table = batch_io.read_inline(base64.b64decode(inline))
        schema = self.desc.arrow_schema(with_time_diff=True)
        # Written from a table of this schema, as a rule: a cast of a table
        # already of it still costs pyarrow's Python dispatch, which was a
        # third of flushing inline batches into a blob.
        return table if table.schema.equals(schema) else table.cast(schema)

    def _read_batches(self, batches: Sequence[BatchMeta]) -> pa.Table:
        tables = []
        for b in batches:
            if b.inline is not None:
                tables.append(self._inline_table(b.inline))
                continue
            files = self.blob.batch_files(self.shard_id, b.key)
            table = batch_io.read_batch_table(files, self.desc)
            if table.num_rows != b.rows:
                # Deleted (compaction, GC) while we listed or read its files:
                # an emptied directory must not read as an empty batch.
                raise FileNotFoundError(f"batch {b.key} of shard {self.shard_id} is incomplete")
            tables.append(table)
        if not tables:
            return self.desc.arrow_schema(with_time_diff=True).empty_table()
        return pa.concat_tables(tables)

    def snapshot_table(self, as_of: int) -> pa.Table:
        """The consolidated contents at `as_of`: data columns plus `__diff`."""
        for _ in range(READ_RETRIES):
            state = self.state()
            self.check_readable(state, as_of)
            try:
                raw = self._read_batches([b for b in state.batches if b.lower <= as_of])
            except FileNotFoundError:
                continue  # compacted under us: the new state names the merged batch
            return batch_io.consolidate_table(raw, self.desc, as_of)
        raise RuntimeError(f"shard {self.shard_id}: batches kept disappearing while reading")

    def snapshot(self, as_of: int) -> list[tuple[Row, int]]:
        """The consolidated contents at `as_of` as (row, diff) pairs."""
        return list(self.snapshot_rows(as_of))

    def snapshot_rows(self, as_of: int) -> SnapshotRows:
        """`snapshot`'s pairs, read now (the files, into Arrow) but made
        Python rows a batch at a time as they are iterated (a one-off query's
        input: rows as Python tuples take several times their Arrow size)."""
        return SnapshotRows(self.snapshot_table(as_of), self.desc.names)

    def updates_between(self, lower: int, upper: Frontier) -> list[Update]:
        """Every update with time in [lower, upper), consolidated per (row, time).
        Exact as long as `lower` is at or after the shard's since."""
        for _ in range(READ_RETRIES):
            state = self.state()
            chosen = [b for b in state.batches if _overlaps(b, lower, upper)]
            try:
                raw = self._read_batches(chosen)
            except FileNotFoundError:
                continue
            times = raw.column(TIME_COLUMN)
            mask = pc.greater_equal(times, lower)
            if not upper.is_empty:
                mask = pc.and_(mask, pc.less(times, upper.time))
            table = batch_io.consolidate_table(raw.filter(mask), self.desc, None)
            return batch_io.table_to_updates(table, self.desc)
        raise RuntimeError(f"shard {self.shard_id}: batches kept disappearing while reading")

    # --------------------------------------------------------------- readers
    def open_leased_reader(
        self, reader_id: str | None = None, lease_ms: int = DEFAULT_LEASE_MS
    ) -> LeasedReader:
        """Register a reader holding the shard's current since."""
        rid = reader_id or new_id("r")

        def register(state: ShardState, now: int) -> tuple[bool, Frontier]:
            state.expire_leases(now)
            existing = state.leased_readers.get(rid)
            since = existing.since if existing else state.since
            state.leased_readers[rid] = LeasedReaderState(since, now, lease_ms)
            return True, Frontier(since)

        since = self.machine.apply(register)
        return LeasedReader(self, rid, since, lease_ms)

    def downgrade_critical_since(self, reader_id: str, new_since: Frontier) -> Frontier:
        """Register (at the shard's since) or advance a critical reader's hold;
        returns the shard's since afterwards. A hold never moves backwards."""

        def downgrade(state: ShardState, now: int) -> tuple[bool, Frontier]:
            since_before = state.since
            state.expire_leases(now)
            reader = state.critical_readers.get(reader_id)
            registered = reader is None
            if reader is None:
                reader = CriticalReaderState(state.since)
                state.critical_readers[reader_id] = reader
            held_before = reader.since
            reader.since = max(Frontier(reader.since), new_since).time
            state.recompute_since()
            # A hold that did not move writes nothing: every step of every
            # view downgrades its holds, and most steps leave them where they are.
            changed = registered or reader.since != held_before or state.since != since_before
            return changed, state.since_frontier

        return self.machine.apply(downgrade)

    def expire_critical_reader(self, reader_id: str) -> None:
        def expire(state: ShardState, now: int) -> tuple[bool, None]:
            if reader_id not in state.critical_readers:
                return False, None
            del state.critical_readers[reader_id]
            state.recompute_since()
            return True, None

        self.machine.apply(expire, allow_finalized=True)

    def listen(self, as_of: int, poll_interval_s: float = 0.05) -> Listen:
        """Updates at times after `as_of`, as the upper advances. Holds a
        leased read at `as_of` (needs since <= as_of)."""
        reader = self.open_leased_reader()
        try:
            if not reader.since.less_equal(as_of):
                raise ReadBeforeSince(self.shard_id, as_of, reader.since)
        except ReadBeforeSince:
            reader.expire()
            raise
        return Listen(self, reader, as_of, poll_interval_s)

    # ------------------------------------------------------------ compaction
    def compact(self, target_rows: int = 1_000_000, max_batches: int = 1) -> int:
        """Merge runs of adjacent batches (up to `target_rows` each) and
        advance their times below since to since, consolidating. Returns how
        many batches were replaced. Snapshots at times >= since are unchanged."""
        state = self.state()
        since = state.since
        if since is None:
            return 0
        runs: list[list[BatchMeta]] = []
        run: list[BatchMeta] = []
        run_rows = 0
        for meta in sorted(state.batches, key=lambda b: b.lower):
            if run and run_rows + meta.rows > target_rows:
                runs.append(run)
                run, run_rows = [], 0
            run.append(meta)
            run_rows += meta.rows
        if run:
            runs.append(run)
        replaced = 0
        for run in runs:
            worth_it = len(run) > max_batches or any(
                b.since < since and b.lower < since for b in run
            )
            if worth_it:
                replaced += self._compact_run(run, since)
        return replaced

    @property
    def inline_backlog(self) -> bool:
        """Whether this handle's last commit left the shard's inline batches
        at half their bound or more (time to `flush_inline`)."""
        return 2 * self._inline_bytes >= INLINE_TOTAL_BYTES

    def flush_inline(self) -> int:
        """Merge each run of adjacent inline batches into one durable blob
        batch (compaction restricted to them: cheap, and it keeps the state
        small so small writes stay inline). Returns the batches replaced."""
        state = self.state()
        if state.since is None:
            return 0
        runs: list[list[BatchMeta]] = [[]]
        for meta in sorted(state.batches, key=lambda b: b.lower):
            if meta.inline is not None:
                runs[-1].append(meta)
            elif runs[-1]:
                runs.append([])
        replaced = sum(self._compact_run(run, state.since) for run in runs if len(run) > 1)
        self._inline_bytes = 0  # until the next commit counts them again
        return replaced

    def _compact_run(self, run: list[BatchMeta], since: int) -> int:
        try:
            raw = self._read_batches(run)
        except FileNotFoundError:
            return 0  # someone else compacted these
        times = raw.column(TIME_COLUMN)
        advanced = pc.max_element_wise(times, pa.scalar(since, pa.int64()))
        raw = raw.set_column(raw.schema.get_field_index(TIME_COLUMN), TIME_COLUMN, advanced)
        merged = batch_io.consolidate_table(raw, self.desc, None)
        merged = merged.select(self.desc.arrow_schema(with_time_diff=True).names)
        keys = [b.key for b in run]
        new_meta: BatchMeta | None = None
        if merged.num_rows:
            if not self._writer_registered:
                self._register_writer()
            key = f"{self.writer_id}-{uuid.uuid4().hex}"
            size = batch_io.write_batch_table(merged, self.blob.batch_path(self.shard_id, key))
            new_meta = BatchMeta(key, run[0].lower, run[-1].upper, since, merged.num_rows, size)

        def replace(state: ShardState, now: int) -> tuple[bool, bool]:
            present = [b.key for b in state.batches]
            if not all(k in present for k in keys):
                return False, False
            if new_meta is not None:
                writer = state.writers.get(self.writer_id)
                if writer is None or writer.expired(now):
                    return False, False
                writer.heartbeat_ms = now
            first = present.index(keys[0])
            state.batches = [b for b in state.batches if b.key not in keys]
            if new_meta is not None:
                state.batches.insert(first, new_meta)
            # The state written now (seqno + 1) is the first without them.
            state.retired += [RetiredBatch(k, state.seqno + 1) for k in keys]
            return True, True

        landed = False
        try:
            landed = self.machine.apply(replace)
        finally:  # lost, or raised (the shard finalized meanwhile by a DROP)
            if new_meta is not None and not landed:
                self.blob.delete_batch(self.shard_id, new_meta.key)
        if not landed:
            return 0
        self.delete_retired()
        return len(run)

    def delete_retired(self) -> list[str]:
        """Delete the blobs of replaced batches that no seqno hold protects
        any more (all of them when nobody holds one). Returns their keys."""

        def forget(state: ShardState, now: int) -> tuple[bool, list[str]]:
            keys = state.deletable_retired(now)
            if not keys:
                return False, []
            state.retired = [r for r in state.retired if r.key not in keys]
            state.expire_leases(now)
            return True, keys

        # Forgotten first, deleted after: a crash in between leaves an orphan
        # that `collect_garbage` takes once its writer's lease is gone.
        keys = self.machine.apply(forget, allow_finalized=True)
        for key in keys:
            self.blob.delete_batch(self.shard_id, key)
        return keys

    # -------------------------------------------------------- gc / finalize
    def collect_garbage(self) -> list[str]:
        """Delete replaced batches no seqno hold protects (`delete_retired`)
        and blob batches no state names whose writer is gone (crashed
        writers' orphans, leftovers of compaction). Returns the deleted keys."""
        # Take the time, then list, then read the state: a batch listed here
        # was written after its writer registered, so the (later) state names
        # it or shows its writer, and a writer already expired at `now` cannot
        # have named a batch since (its commit would fail on the lease).
        deleted = self.delete_retired()
        now = int(time.time() * 1000)
        listed = self.blob.list_batches(self.shard_id)
        state = self.state()
        named = {b.key for b in state.batches} | {r.key for r in state.retired}
        live_writers = {wid for wid, w in state.writers.items() if not w.expired(now)}
        for key in listed:
            if key in named:
                continue
            writer_id = key.split("-", 1)[0]
            if writer_id in live_writers:
                continue  # may be about to be named by a compare_and_append
            self.blob.delete_batch(self.shard_id, key)
            deleted.append(key)
        return deleted

    def expire_lapsed_leases(self) -> bool:
        """Drop readers and writers whose leases ran out; True if any were.
        Other transitions expire leases too, but a shard nobody writes would
        otherwise keep a dead process's read hold (and its since) forever."""

        def expire(state: ShardState, now: int) -> tuple[bool, bool]:
            lapsed = any(r.expired(now) for r in state.leased_readers.values()) or any(
                w.expired(now) for w in state.writers.values()
            )
            if state.finalized or not lapsed:
                return False, False
            state.expire_leases(now)
            return True, True

        return self.machine.apply(expire, allow_finalized=True)

    def finalize(self) -> bool:
        """Once since and upper are both empty, delete the shard's data and mark
        it finalized. Returns False (doing nothing) if it is still readable
        or writable."""

        def finalize(state: ShardState, now: int) -> tuple[bool, bool]:
            if state.finalized:
                return False, True
            if state.since is not None or state.upper is not None:
                return False, False
            state.batches = []
            state.finalized = True
            return True, True

        self.expire_lapsed_leases()
        done = self.machine.apply(finalize, allow_finalized=True)
        if done:
            self.machine.forget()
            self.blob.delete_shard(self.shard_id)
            # The arranged state of the view that wrote it goes with it.
            if ArrangementStore.path_for(self.blob).exists():
                ArrangementStore.for_blob(self.blob).drop_output(self.shard_id)
        return done


@dataclass(frozen=True)
class Append:
    """One shard's part of `compare_and_append_all`: a batch table checked
    by `Shard.check_table` (None: only advance the upper)."""

    shard: Shard
    table: pa.Table | None
    expected_upper: Frontier
    new_upper: Frontier


def compare_and_append_all(appends: Sequence[Append], records: Sequence[RecordChange] = ()) -> None:
    """Append to several shards of one environment as one atomic step
    (Materialize does this with its txn-wal): every batch is written to blob
    first, then one compare-and-set of all the shards' states names them all
    and moves every upper, or none of them (UpperMismatch if any shard's
    upper is not the expected one). `records` (the timestamp oracle's) land in
    the same compare-and-set. A crash at any point leaves either all of it
    visible or only unnamed blobs, which garbage collection takes."""
    if len({a.shard.shard_id for a in appends}) != len(appends):
        raise InvalidUpdates("an atomic append names a shard more than once")
    for append in appends:
        append.shard.check_upper(append.expected_upper)
    for _attempt in range(3):
        written: list[tuple[Shard, str]] = []
        try:
            steps: list[tuple[Machine, Transition[None]]] = []
            for append in appends:
                shard, meta = append.shard, None
                if append.table is not None:
                    meta = shard._write_batch(append.table, append.expected_upper, append.new_upper)
                    written.append((shard, meta.key))
                commit = shard._commit(meta, append.expected_upper, append.new_upper)
                steps.append((shard.machine, commit))
            apply_all(steps, records=records)
            return
        except LeaseExpired:
            # A writer's lease lapsed, so GC may have taken its blob:
            # re-register and write everything again.
            for shard, key in written:
                shard.blob.delete_batch(shard.shard_id, key)
                shard._writer_registered = False
        except ConsensusError:
            raise  # unknown outcome: the states may name the blobs; if not, GC takes them
        except BaseException:
            for shard, key in written:
                shard.blob.delete_batch(shard.shard_id, key)
            raise
    raise LeaseExpired("writer leases keep expiring")


def _in_range(t: int, lower: Frontier, upper: Frontier) -> bool:
    """lower <= t < upper (an empty upper has no end)."""
    return lower.less_equal(t) and (upper.time is None or t < upper.time)


def _range_text(lower: Frontier, upper: Frontier) -> str:
    return f"[{lower.time}, {'inf' if upper.is_empty else upper.time})"


def _overlaps(meta: BatchMeta, lower: int, upper: Frontier) -> bool:
    """Does the batch's [lower, upper) meet [lower, upper)?"""
    ends_after = meta.upper is None or meta.upper > lower
    starts_before = upper.is_empty or meta.lower < upper.time  # type: ignore[operator]
    return ends_after and starts_before


class LeasedReader:
    """A read hold that lasts while its holder heart-beats; across processes
    it is the only thing that keeps the shard's since from passing it."""

    def __init__(self, shard: Shard, reader_id: str, since: Frontier, lease_ms: int) -> None:
        self.shard = shard
        self.reader_id = reader_id
        self.since = since
        self.lease_ms = lease_ms

    def _update(self, new_since: Frontier | None) -> Frontier:
        def update(state: ShardState, now: int) -> tuple[bool, Frontier]:
            reader = state.leased_readers.get(self.reader_id)
            if reader is None or reader.expired(now):
                raise LeaseExpired(
                    f"reader {self.reader_id} of shard {self.shard.shard_id}: lease expired"
                )
            reader.heartbeat_ms = now
            if new_since is not None:
                reader.since = max(Frontier(reader.since), new_since).time
            state.expire_leases(now)
            return True, Frontier(reader.since)

        self.since = self.shard.machine.apply(update)
        return self.since

    def heartbeat(self) -> None:
        self._update(None)

    def downgrade_since(self, new_since: Frontier) -> Frontier:
        """Allow compaction up to `new_since` (never backwards)."""
        return self._update(new_since)

    def expire(self) -> None:
        """Release the hold now rather than when the lease runs out."""

        def expire(state: ShardState, now: int) -> tuple[bool, None]:
            if self.reader_id not in state.leased_readers:
                return False, None
            del state.leased_readers[self.reader_id]
            state.recompute_since()
            return True, None

        self.shard.machine.apply(expire, allow_finalized=True)


class Listen:
    """Iterates ListenEvents after `as_of`; downgrades its hold as it goes."""

    def __init__(
        self, shard: Shard, reader: LeasedReader, as_of: int, poll_interval_s: float
    ) -> None:
        self.shard = shard
        self.reader = reader
        self.as_of = as_of
        self.poll_interval_s = poll_interval_s
        self.frontier = as_of + 1  # everything before this has been emitted
        self.done = False

    def poll(self) -> list[ListenEvent]:
        """Non-blocking: the events since the last poll (possibly none)."""
        if self.done:
            return []
        upper = self.shard.upper()
        if upper.time is not None and upper.time <= self.frontier:
            return []
        updates = self.shard.updates_between(self.frontier, upper)
        events = [ListenEvent(updates=tuple(updates))] if updates else []
        events.append(ListenEvent(progress=upper))
        if upper.time is None:
            self.done = True
            self.reader.expire()
        else:
            self.frontier = upper.time
            self.reader.downgrade_since(Frontier.at(upper.time - 1))
        return events

    def __iter__(self) -> Iterator[ListenEvent]:
        return self.events()

    def events(self, timeout_s: float | None = None) -> Iterator[ListenEvent]:
        """Blocks for new events; stops at the empty upper or after timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.done:
            events = self.poll()
            yield from events
            if deadline is not None and time.monotonic() > deadline:
                return
            if not events:
                time.sleep(self.poll_interval_s)

    def close(self) -> None:
        self.reader.expire()
