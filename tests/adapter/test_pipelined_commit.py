"""Group commit with two commits in flight (adapter/group_commit.py): the
next batch is prepared on what the commit still landing will write, while
that commit's compare-and-set (its fsync) runs, and lands only after it.

Each test holds the first commit inside the consensus compare-and-set that
carries the timestamp oracle's record (group commit's, and only its), so
the second commit's preparation provably overlaps it. No Spark, no server:
a coordinator in-process on a fresh SQLite environment."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from coordinator_lib.adapter.client import Handle, serve
from coordinator_lib.adapter.durable import update_record
from coordinator_lib.persist.consensus import ConsensusError, KeyChange
from coordinator_lib.repr.global_id import GlobalId
from tests.adapter.conftest import run_on
from tests.fixtures.serve_process import Server
from tests.fixtures.served import fast_config

WAIT_S = 30  # a bound on waits for what must happen, never a timing assertion


@pytest.fixture
def handle(tmp_path: Path) -> Iterator[Handle]:
    # No timer commits: every group commit here is one the test makes.
    handle = serve(
        fast_config(tmp_path / "env", advance_interval_ms=3_600_000, pipelined_commits=True)
    )
    try:
        yield handle
    finally:
        handle.shutdown()


class HeldCommit:
    """Holds the first group commit that writes table `id` in its
    compare-and-set (the one carrying the oracle's record and the table's
    state) until `release`; `before_release` runs while it is held, before
    it reaches SQLite. Counts those compare-and-sets."""

    def __init__(self, handle: Handle, monkeypatch: pytest.MonkeyPatch, id: GlobalId) -> None:
        coord = handle.coordinator
        self.consensus = coord.storage.persist.consensus
        keys = {coord.oracle.key, coord.storage.shard(id).machine.key}
        self.entered = threading.Event()
        self.release = threading.Event()
        self.before_release: Callable[[], None] = lambda: None
        self.commits = 0  # group commits' compare-and-sets reaching SQLite
        inner = self.consensus.compare_and_set_all

        def compare_and_set_all(changes: list[KeyChange]) -> bool:
            if keys <= {change.key for change in changes}:
                if not self.entered.is_set():
                    self.entered.set()
                    assert self.release.wait(WAIT_S)
                    self.before_release()
                self.commits += 1
            return inner(changes)

        monkeypatch.setattr(self.consensus, "compare_and_set_all", compare_and_set_all)


def _table(handle: Handle, name: str) -> GlobalId:
    return next(i.id for i in handle.coordinator.catalog.items() if i.name.item == name)


def _writer(handle: Handle, id: GlobalId, value: int, outcomes: dict[int, Any]) -> threading.Thread:
    def write() -> None:
        try:
            outcomes[value] = handle.coordinator.commit_writes({id: [((value,), 1)]})
        except BaseException as error:
            outcomes[value] = error

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def _second_prepared(
    handle: Handle, held: HeldCommit, monkeypatch: pytest.MonkeyPatch
) -> threading.Event:
    """Set when a writer's rows are encoded for a commit while the first
    commit is held in its compare-and-set (the second commit's preparation)."""
    storage = handle.coordinator.storage
    prepared = threading.Event()
    inner = storage.encode

    def encode(id: GlobalId, updates: Any) -> Any:
        if held.entered.is_set() and not held.release.is_set():
            prepared.set()
        return inner(id, updates)

    monkeypatch.setattr(storage, "encode", encode)
    return prepared


def test_the_next_commit_is_prepared_while_one_lands_and_acknowledged_after_it(
    handle: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the first commit's compare-and-set is held, a second writer's
    commit is prepared on what the first will write, but it neither writes
    nor returns before the first has landed. Then both land, the second at
    a later timestamp, the table's upper past both. (On c9b7e70 the second
    writer only queues behind the first: nothing prepares it.)"""
    sql = run_on(handle.client.startup("materialize", "materialize"))
    sql("CREATE TABLE t (a int)")
    id = _table(handle, "t")
    held = HeldCommit(handle, monkeypatch, id)
    prepared = _second_prepared(handle, held, monkeypatch)
    outcomes: dict[int, Any] = {}
    first = _writer(handle, id, 1, outcomes)
    assert held.entered.wait(WAIT_S)
    second = _writer(handle, id, 2, outcomes)
    assert prepared.wait(WAIT_S), "the second commit was not prepared while the first landed"
    # Prepared, but its compare-and-set expects the first's: it waits.
    assert second.is_alive() and 2 not in outcomes
    assert held.commits == 0
    held.release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert isinstance(outcomes[1], int) and isinstance(outcomes[2], int), outcomes
    assert outcomes[1] < outcomes[2]
    assert handle.coordinator.group_commit.pipelined == 1
    _, upper = handle.coordinator.storage.collection_frontiers(id)
    assert upper.time == outcomes[2] + 1
    assert sorted(sql("SELECT a FROM t")) == [(1,), (2,)]
    assert sql(f"SELECT a FROM t AS OF {outcomes[1]}") == [(1,)]


def test_a_first_commit_that_loses_its_compare_and_set_takes_the_next_with_it_intact(
    handle: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit's compare-and-set loses (another write to its shard
    lands while it is held): the second, prepared on what the first was to
    write, must not land as prepared. Both commits still land, each writer's
    row exactly once, at increasing timestamps, and the other write stays."""
    sql = run_on(handle.client.startup("materialize", "materialize"))
    sql("CREATE TABLE t (a int)")
    id = _table(handle, "t")
    shard = handle.coordinator.storage.shard(id)
    held = HeldCommit(handle, monkeypatch, id)
    prepared = _second_prepared(handle, held, monkeypatch)
    seqnos: list[int] = []

    def another_write() -> None:  # a state change that keeps the upper (as a lease heartbeat)
        def touch(state: Any, now: int) -> tuple[bool, None]:
            seqnos.append(state.seqno)
            return True, None

        shard.machine.apply(touch)

    held.before_release = another_write
    outcomes: dict[int, Any] = {}
    first = _writer(handle, id, 1, outcomes)
    assert held.entered.wait(WAIT_S)
    second = _writer(handle, id, 2, outcomes)
    assert prepared.wait(WAIT_S)
    held.release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert isinstance(outcomes[1], int) and isinstance(outcomes[2], int), outcomes
    assert outcomes[1] < outcomes[2]
    assert handle.coordinator.group_commit.pipelined == 1
    # The other write landed between: the shard's seqno passed it, and the
    # two commits each moved it once more (neither wrote over the other).
    assert len(seqnos) == 1
    assert shard.machine.fetch().seqno >= seqnos[0] + 3  # type: ignore[union-attr]
    assert sorted(sql("SELECT a FROM t")) == [(1,), (2,)]
    assert sql(f"SELECT a FROM t AS OF {outcomes[1]}") == [(1,)]
    _, upper = handle.coordinator.storage.collection_frontiers(id)
    assert upper.time == outcomes[2] + 1


def test_a_commit_that_fails_fails_only_its_writers_with_the_next_in_flight(
    handle: Handle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit's compare-and-set fails outright (the backend
    raises; nothing of it lands) after other writes moved the table's state
    and the oracle's record on by one each, so both stand at the seqnos the
    second commit, prepared on the first, expects. Its writer gets the
    error and its row is nowhere; the second must not land what it
    prepared (that state holds the first's row, unacknowledged) but lands
    on its own, at a later time (all or nothing per commit, issue 18).
    Fails if the second's compare-and-set is made as prepared regardless
    (row 1 appears)."""
    sql = run_on(handle.client.startup("materialize", "materialize"))
    sql("CREATE TABLE t (a int)")
    id = _table(handle, "t")
    coord = handle.coordinator
    shard = coord.storage.shard(id)
    held = HeldCommit(handle, monkeypatch, id)
    prepared = _second_prepared(handle, held, monkeypatch)

    def fail() -> None:
        shard.machine.apply(lambda state, now: (True, None))  # seqno + 1, upper kept
        update_record(held.consensus, coord.oracle.key, lambda record: record or {})
        raise ConsensusError("the disk went away")

    held.before_release = fail
    outcomes: dict[int, Any] = {}
    first = _writer(handle, id, 1, outcomes)
    assert held.entered.wait(WAIT_S)
    second = _writer(handle, id, 2, outcomes)
    assert prepared.wait(WAIT_S)
    held.release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert isinstance(outcomes[1], ConsensusError), outcomes
    assert isinstance(outcomes[2], int), outcomes
    assert sql("SELECT a FROM t") == [(2,)]
    _, upper = coord.storage.collection_frontiers(id)
    assert upper.time == outcomes[2] + 1


CRASH_CLIENTS = 8


@pytest.mark.slow
def test_sigkilled_pipelined_server_keeps_every_acknowledged_insert(tmp_path: Path) -> None:
    """`tidemark serve --pipelined-commits` with 8 clients inserting one row
    a statement (so commits are prepared on ones still landing) is SIGKILLed
    mid-write; after a restart every acknowledged row is there, once (the
    crash helpers of test_atomic_writes, one kill)."""
    data, log = tmp_path / "env", tmp_path / "serve.log"
    server = Server(data, log, "--pipelined-commits")
    server.sql("CREATE TABLE acked (id bigint)")
    acked: set[int] = set()
    lock = threading.Lock()

    def client(number: int) -> None:
        try:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                for seq in itertools.count():
                    id = number * 1_000_000 + seq
                    conn.execute("INSERT INTO acked VALUES (%s)", (id,))
                    with lock:
                        acked.add(id)
        except psycopg.OperationalError:
            return  # the server died under us: the last outcome is unknown

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CRASH_CLIENTS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill()
    for thread in threads:
        thread.join(60)
    assert len(acked) >= 200, "too few inserts acknowledged before the kill"
    server = Server(data, log, "--pipelined-commits")
    try:
        ids = [id for (id,) in server.sql("SELECT id FROM acked")]
    finally:
        server.stop()
    assert len(ids) == len(set(ids)), "a row landed twice"
    assert acked <= set(ids), f"acknowledged but lost: {sorted(acked - set(ids))[:5]}"
