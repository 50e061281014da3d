"""Group commit of table writes (Materialize's group commit).

Writers queue their changes and wait; one of them at a time leads: it
encodes each table's rows of the whole batch as one Arrow table (a one-row
table per writer cost more than the rest of the commit; a value that cannot
be stored fails only its own writer, found by encoding each writer's rows
on its own when the batch's encoding fails), and commits everything queued
so far at one timestamp from the oracle: one append of all the tables written, atomic across them
(`StorageController.append`), empty appends that advance every other table
to the same upper, then `apply_write` so reads see it. Each writer returns
only after its batch is durable (invariant 3), with the timestamp it landed
at. A leader then hands over to the first writer still queued, so writers
arriving during a commit all go into the next one, and a writer whose batch
is done returns at once. A commit with no writes is how idle tables' uppers
advance on a timer.

UNIQUE / PRIMARY KEY constraints (`sql/constraints.py`) are enforced here, so
the check and the write are one step: the leader reads each constrained
table's key counts at its current upper (cached between commits), admits the
batch's writers in order, each against the table and the writers admitted
before it, and appends with that upper expected. A writer that would
duplicate a key gets 23505 and none of its changes are written; the others
commit. If another process appended first, the append fails on the upper
and the check runs again against the new contents.

A writer whose table was dropped (its collection gone or closed) is
rejected on its own with IdentifierMissing, and the others commit: a DROP
racing an INSERT fails only that INSERT (the coordinator names the table).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.oracle import TimestampOracle, TimestampTaken
from coordinator_lib.persist import batch as batch_io
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.update import Update
from coordinator_lib.sql.constraints import KeyCounts, UniqueConstraint, UniqueViolation
from coordinator_lib.storage import StorageController
from coordinator_lib.storage.controller import AppendCommand
from coordinator_lib.storage.errors import (
    IdentifierMissing,
    InvalidUpdate,
    InvalidUppers,
    StorageError,
)

Changes = dict[GlobalId, list[tuple[tuple[Any, ...], int]]]
# A table's unique constraints and column names (None: it has none).
Constraints = Callable[[GlobalId], tuple[tuple[UniqueConstraint, ...], tuple[str, ...]] | None]
_RETRIES = 20


class _Wake:
    """A one-shot wake-up: `wait` blocks until another thread's `set`. Each
    `set` is consumed by one `wait` (a writer is woken at most once to lead
    and once when its batch is done, after it woke to lead). A lock held
    from the start rather than an Event: no Condition to build, take and
    notify per writer, which cost about a twentieth of the server's
    GIL-holding time at 32 writers."""

    __slots__ = ("set", "wait")

    def __init__(self) -> None:
        lock = threading.Lock()
        lock.acquire()
        self.set = lock.release  # any thread may release a Lock
        self.wait = lock.acquire


@dataclass
class _Pending:
    changes: Changes
    # Batch tables encoded before (COPY's, at time 0); `changes` then name
    # their tables with no rows.
    encoded: dict[GlobalId, pa.Table]
    done: bool = False
    # Set when the batch holding this writer is done, or when it is to lead.
    wake: _Wake = field(default_factory=_Wake)
    timestamp: int | None = None
    error: BaseException | None = None


class GroupCommitter:
    def __init__(
        self,
        storage: StorageController,
        oracle: TimestampOracle,
        tables: Callable[[], list[GlobalId]],
        constraints: Constraints | None = None,
    ) -> None:
        """`tables`: the collections to advance (every installed table and
        webhook source: group commit is their only writer); `constraints`:
        each table's unique constraints."""
        self.storage = storage
        self.oracle = oracle
        self.tables = tables
        self.constraints: Constraints = constraints or (lambda id: None)
        # Key counts of constrained tables at a known upper (valid while the
        # table's upper is still that one).
        self._keys: dict[GlobalId, tuple[Frontier, KeyCounts]] = {}
        self._keys_lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._queue_lock = threading.Lock()
        self._leading = False  # a writer is committing (under _queue_lock)
        self.commits = 0

    def commit(self, changes: Changes, encoded: dict[GlobalId, pa.Table] | None = None) -> int:
        """Make `changes` durable at one timestamp with others queued at the
        same moment; returns that timestamp. A value that cannot be stored
        fails this writer alone (`encode`'s error). `encoded`: the changes
        already encoded (COPY's columnar path; its `changes` then name the
        tables with no rows, and no table has constraints)."""
        pending = _Pending(changes, encoded or {})
        with self._queue_lock:
            self._queue.append(pending)
            if not self._leading:
                self._leading = True
                pending.wake.set()
        pending.wake.wait()
        if not pending.done:
            self._lead()
        if pending.error is not None:
            raise pending.error
        assert pending.timestamp is not None
        return pending.timestamp

    def encode(self, changes: Changes) -> dict[GlobalId, pa.Table]:
        """Each table's changes checked and encoded as a batch table (at time
        0; the commit sets its timestamp), or the AdapterError of the first
        value that can never be stored (22003 for a numeric too wide)."""
        encoded: dict[GlobalId, pa.Table] = {}
        for id, rows in changes.items():
            try:
                table = self.storage.encode(id, [Update(row, 0, diff) for row, diff in rows])
            except InvalidUpdate as error:
                if error.row_error is None:
                    raise
                row_error = error.row_error
                raise AdapterError(
                    row_error.message, code=row_error.sqlstate, detail=row_error.detail
                ) from None
            if table is not None:
                encoded[id] = table
        return encoded

    def _lead(self) -> None:
        """Commit the queue (this writer is in it), then hand over."""
        try:
            with self._queue_lock:
                batch, self._queue = self._queue, []
            self._commit_batch(batch)
        finally:
            with self._queue_lock:
                if self._queue:
                    self._queue[0].wake.set()
                else:
                    self._leading = False

    def _commit_batch(self, batch: list[_Pending]) -> None:
        try:
            timestamp, rejected = self._append(batch)
        except BaseException as error:
            for pending in batch:
                pending.error = error
                pending.done = True
                pending.wake.set()
            return
        self.commits += 1
        for i, pending in enumerate(batch):
            if i in rejected:
                pending.error = rejected[i]
            else:
                pending.timestamp = timestamp
            pending.done = True
            pending.wake.set()

    def _append(self, batch: list[_Pending]) -> tuple[int, dict[int, BaseException]]:
        """Commit the admitted writers of `batch`; returns the timestamp and
        the rejected writers (by position) with their errors. The oracle's
        record changes in the append's own compare-and-set (`claim`); a
        commit with nothing to append takes its time with `write_ts`."""
        unstorable: dict[int, BaseException] = {}
        attempts = 0
        while attempts < _RETRIES:
            attempts += 1
            keys, rejected = self._admit(batch, unstorable)
            try:
                written = self._encode_admitted(batch, rejected, unstorable)
            except IdentifierMissing:
                continue  # dropped since `_admit` looked: rejected next time
            if written is None:
                attempts -= 1  # admit again without them (each time one fewer)
                continue
            written = {id: [] for id in keys} | written
            # Another process may have moved a table's upper past the
            # oracle's proposal (it advances idle tables before its own
            # `apply_write`): write at or after every upper written to. The
            # append expects the same uppers the time was chosen from: one
            # that moved meanwhile (another process's write, learned by a
            # concurrent read's `collection_frontiers`) fails the
            # compare-and-set, and the next attempt chooses again.
            uppers = self._uppers(written, keys)
            least = max((u.time for u in uppers.values() if u.time is not None), default=0)
            timestamp = max(self.oracle.propose_write_ts(), least)
            commands = [
                AppendCommand(
                    id,
                    batch_io.at_time(pa.concat_tables(parts), timestamp) if parts else [],
                    timestamp + 1,
                    uppers.get(id),
                )
                for id, parts in written.items()
            ]
            idle: list[AppendCommand] = []
            if commands:
                # The other tables advance in the same compare-and-set: one
                # consensus write a commit, however many tables there are.
                idle = self._idle_commands(timestamp + 1, skip=set(written))
                try:
                    # all tables at once, or none, with the oracle's record
                    self.storage.append(commands + idle, [self.oracle.claim(timestamp)])
                except (InvalidUppers, IdentifierMissing, TimestampTaken):
                    # Another process wrote first or took the time, or a table
                    # was dropped (its writers are rejected next time): nothing
                    # landed, try again.
                    continue
            else:
                timestamp = self.oracle.write_ts()
            with self._keys_lock:
                for id, (_, counts) in keys.items():
                    self._keys[id] = (Frontier.at(timestamp + 1), counts)
            for command in idle:
                assert isinstance(command.expected_upper, Frontier)
                self._moved(command.id, command.expected_upper, timestamp + 1)
            if not commands:
                self._advance_idle(timestamp + 1, skip=set(written))
                self.oracle.apply_write(timestamp)
            return timestamp, rejected
        raise StorageError(f"could not commit after {_RETRIES} attempts: uppers kept moving")

    def _encode_admitted(
        self,
        batch: list[_Pending],
        rejected: dict[int, BaseException],
        unstorable: dict[int, BaseException],
    ) -> dict[GlobalId, list[pa.Table]] | None:
        """The batch tables of the admitted writers, by table (a table
        written with no rows has none): each table's rows encoded together.
        If that fails, each writer's rows are encoded on their own: None if
        some cannot be stored (those writers are added to `unstorable`, to
        be admitted again without them), else those tables."""
        written: dict[GlobalId, list[pa.Table]] = {}
        rows: Changes = {}
        admitted = [(i, p) for i, p in enumerate(batch) if i not in rejected]
        for _, pending in admitted:
            for id, changes in pending.changes.items():
                written.setdefault(id, [])  # written, even if with no rows
                rows.setdefault(id, []).extend(changes)
            for id, table in pending.encoded.items():
                written[id].append(table)
        try:
            tables = [self.encode(rows)]
        except (AdapterError, InvalidUpdate):
            tables = []
            for i, pending in admitted:
                try:
                    tables.append(self.encode(pending.changes))
                except (AdapterError, InvalidUpdate) as error:
                    unstorable[i] = error
            if len(tables) < len(admitted):
                return None
        for encoded in tables:
            for id, table in encoded.items():
                written[id].append(table)
        return written

    def _uppers(
        self,
        written: dict[GlobalId, list[pa.Table]],
        keys: dict[GlobalId, tuple[Frontier, KeyCounts]],
    ) -> dict[GlobalId, Frontier]:
        """The uppers of the tables of `written` as this process last saw
        them (an append that finds one moved further fails and refreshes it);
        a dropped table has none (its writers are rejected by the append)."""
        uppers = {}
        for id in written:
            if id in keys:
                uppers[id] = keys[id][0]
                continue
            try:
                uppers[id] = self.storage.collection(id).write_frontier
            except IdentifierMissing:
                continue
        return uppers

    def _admit(
        self, batch: list[_Pending], unstorable: dict[int, BaseException]
    ) -> tuple[dict[GlobalId, tuple[Frontier, KeyCounts]], dict[int, BaseException]]:
        """Check the writers of `batch` in order against the constrained
        tables' contents at their uppers and the writers admitted before
        (never those of `unstorable`, which are rejected)."""
        keys: dict[GlobalId, tuple[Frontier, KeyCounts]] = {}
        rejected: dict[int, BaseException] = dict(unstorable)
        present: dict[GlobalId, bool] = {}
        for i, pending in enumerate(batch):
            if i in rejected:
                continue
            gone = [id for id in pending.changes if not self._present(id, present)]
            if gone:
                rejected[i] = IdentifierMissing(gone[0])
                continue
            trials = []
            try:
                for id, rows in pending.changes.items():
                    if id not in keys:
                        current = self._key_counts(id)
                        if current is None:
                            continue
                        keys[id] = current
                    trials.append((keys[id][1], keys[id][1].check(rows)))
            except UniqueViolation as violation:
                rejected[i] = AdapterError(
                    violation.message, code=violation.code, detail=violation.detail
                )
                continue
            except IdentifierMissing as missing:  # dropped since `_present` looked
                rejected[i] = missing
                continue
            for counts, trial in trials:
                counts.apply(trial)
        return keys, rejected

    def _present(self, id: GlobalId, known: dict[GlobalId, bool]) -> bool:
        """Whether `id` can still be written: not dropped, so its collection
        exists and its upper is open (memoized in `known` for one batch).
        The cached upper costs no consensus read; a table another process
        closed fails the append once, which refreshes it."""
        if id not in known:
            try:
                known[id] = not self.storage.collection(id).write_frontier.is_empty
            except IdentifierMissing:
                known[id] = False
        return known[id]

    def _key_counts(self, id: GlobalId) -> tuple[Frontier, KeyCounts] | None:
        """The key counts of `id` at its current upper (a copy to change)."""
        found = self.constraints(id)
        if found is None or not found[0]:
            return None
        constraints, names = found
        _, upper = self.storage.collection_frontiers(id)
        with self._keys_lock:
            cached = self._keys.get(id)
        if cached is not None and cached[0] == upper and cached[1].constraints == constraints:
            return upper, cached[1].copy()
        rows: list[tuple[tuple[Any, ...], int]] = []
        # Held where it is read, or the since could pass it meanwhile.
        hold, upper = self.storage.acquire_latest_read_hold(id)
        with hold:
            if upper.time is not None and upper.time > 0:
                rows = self.storage.snapshot(id, upper.time - 1)
        return upper, KeyCounts.of_rows(constraints, names, rows)

    def check(self, changes: Changes) -> None:
        """Raise 23505 if `changes` would duplicate a key of the tables' latest
        contents (a statement inside a transaction checks early; its commit
        checks again)."""
        for id, rows in changes.items():
            current = self._key_counts(id)
            if current is None:
                continue
            try:
                current[1].check(rows)
            except UniqueViolation as violation:
                raise AdapterError(
                    violation.message, code=violation.code, detail=violation.detail
                ) from None

    def _idle_commands(self, upper: int, skip: set[GlobalId]) -> list[AppendCommand]:
        """Empty appends moving every other open table behind `upper` to it,
        from the uppers this process knows (no consensus read: if another
        process moved one, the append fails, which refreshes it)."""
        commands = []
        for id in self.tables():
            if id in skip:
                continue
            try:
                current = self.storage.collection(id).write_frontier
            except IdentifierMissing:
                continue  # dropped
            if current.time is not None and current.time < upper:
                commands.append(AppendCommand(id, [], upper, current))
        return commands

    def _advance_idle(self, upper: int, skip: set[GlobalId]) -> None:
        """Advance every other table to `upper`, each on its own (the timer's
        empty commit; a race lost here is harmless: someone else advanced it)."""
        for id in self.tables():
            if id in skip:
                continue
            try:
                _, current = self.storage.collection_frontiers(id)
                if current.time is not None and current.time < upper:
                    self.storage.append([AppendCommand(id, [], upper, current)])
                    self._moved(id, current, upper)
            except (InvalidUppers, StorageError):
                continue

    def _moved(self, id: GlobalId, current: Frontier, upper: int) -> None:
        """`id`'s upper moved from `current` to `upper` with no rows: its
        cached key counts (if taken at `current`) still hold."""
        with self._keys_lock:
            cached = self._keys.get(id)
            if cached is not None and cached[0] == current:
                self._keys[id] = (Frontier.at(upper), cached[1])

    def advance(self) -> int:
        """An empty commit: every table's upper moves to a fresh time."""
        return self.commit({})
