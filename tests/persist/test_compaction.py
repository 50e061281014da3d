"""Compaction, garbage collection and finalization (invariants 4 and 5).

Compaction must leave every snapshot at t >= since as it was, merge batches
and delete the replaced blobs; a reader racing a compactor always gets the
right answer; GC removes only orphans of writers that are gone; finalize
deletes a shard only once since and upper are both empty.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.persist import PersistClient, Shard, ShardFinalized
from coordinator_lib.persist import shard as shard_module
from coordinator_lib.persist.batch import updates_to_table, write_batch_table
from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from tests.persist.support import DESC, blob_files, canonical, model_snapshot, new_shard_id

ROWS = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]))


@pytest.fixture(autouse=True)
def blob_batches_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests follow batches' blob directories through compaction and
    GC: every batch gets one (small ones are otherwise carried in the state,
    tests/persist/test_inline_batches.py)."""
    monkeypatch.setattr(shard_module, "INLINE_TOTAL_BYTES", 0)


@pytest.fixture
def client(consensus_url: str, tmp_path: Path) -> Iterator[PersistClient]:
    client = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    yield client
    client.close()


def append_all(shard: Shard, batches: list[list[Update]], start: int = 0) -> list[Update]:
    """Append each batch at [u, u + width) where width covers its times."""
    written: list[Update] = []
    upper = start
    for batch in batches:
        width = max((u.time for u in batch), default=0) + 1
        shifted = [Update(u.row, upper + u.time, u.diff) for u in batch]
        shard.compare_and_append(shifted, Frontier(upper), Frontier(upper + width))
        written += shifted
        upper += width
    return written


def named_keys(shard: Shard) -> set[str]:
    return {b.key for b in shard.state().batches}


batches_st = st.lists(
    st.lists(st.builds(Update, ROWS, st.integers(0, 2), st.integers(-2, 2)), max_size=5),
    min_size=1,
    max_size=8,
)

FIXTURE_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FIXTURE_SETTINGS
@given(batches=batches_st, since_pick=st.floats(0, 1), target_rows=st.integers(1, 40))
def test_compaction_preserves_snapshots(
    client: PersistClient, batches: list[list[Update]], since_pick: float, target_rows: int
) -> None:
    """Snapshots at every t in [since, upper) are unchanged by compaction;
    batches merge and the replaced blobs are gone."""
    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, batches)
    upper = shard.upper().time
    assert upper is not None
    since = int(since_pick * (upper - 1))
    assert shard.downgrade_critical_since("c", Frontier(since)) == Frontier(since)
    before = {t: canonical(shard.snapshot(t)) for t in range(since, upper)}
    for t, got in before.items():
        assert got == model_snapshot(written, t)
    stats_before = shard.statistics()
    keys_before = named_keys(shard)

    replaced = shard.compact(target_rows=target_rows)

    stats_after = shard.statistics()
    keys_after = named_keys(shard)
    assert {t: canonical(shard.snapshot(t)) for t in range(since, upper)} == before
    assert stats_after.batches == stats_before.batches - replaced + len(keys_after - keys_before)
    assert stats_after.rows <= stats_before.rows
    if target_rows >= stats_before.rows and stats_before.batches > 1:
        assert stats_after.batches <= 1  # one run: everything merged
    # Only named batches are left in blob storage: replaced ones were deleted.
    assert set(client.blob.list_batches(shard.shard_id)) == keys_after
    # Nothing before since survives: every stored time is >= since.
    times = [u.time for u in shard.updates_between(0, Frontier.empty())]
    assert all(t >= since for t in times)
    # Compacting again (merged batches may now fit one run) converges and
    # still changes no snapshot.
    for _ in range(stats_before.batches + 1):
        if shard.compact(target_rows=target_rows) == 0:
            break
    else:
        pytest.fail("compaction did not converge")
    assert {t: canonical(shard.snapshot(t)) for t in range(since, upper)} == before


def test_compaction_merges_many_batches(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((i % 3, "x"), 0, 1)] for i in range(12)])
    shard.downgrade_critical_since("c", Frontier(6))
    old_keys = named_keys(shard)
    assert shard.statistics().batches == 12
    assert shard.compact() == 12
    stats = shard.statistics()
    assert stats.batches == 1
    assert stats.rows == 3 + 5  # three rows consolidated at 6, then one per later time
    for key in old_keys:
        assert not client.blob.batch_path(shard.shard_id, key).exists()
    for t in range(6, 12):
        assert canonical(shard.snapshot(t)) == model_snapshot(written, t)


def test_reader_racing_compactor_always_correct(client: PersistClient) -> None:
    """A thread snapshotting at fixed times while another appends and compacts
    over and over always sees the right answer (reads retry on a batch
    deleted under them)."""
    shard = client.open_shard(new_shard_id(), DESC)
    batches = [[Update((i % 4, "v"), 0, 1), Update((i % 2, None), 0, -1)] for i in range(20)]
    written = append_all(shard, batches)
    shard.downgrade_critical_since("c", Frontier(10))
    times = list(range(10, 20))
    expected = {t: model_snapshot(written, t) for t in times}
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]
    compactions = [0]

    def reader() -> None:
        other = client.open_shard(shard.shard_id, DESC)
        try:
            while not stop.is_set():
                for t in times:
                    got = canonical(other.snapshot(t))
                    assert got == expected[t], f"snapshot at {t}: {got} != {expected[t]}"
                    reads[0] += 1
        except BaseException as error:
            errors.append(error)
            stop.set()

    def compactor() -> None:
        upper = 20
        try:
            while not stop.is_set() and compactions[0] < 100:
                # Two new batches after the read times, then merge everything.
                for _ in range(2):
                    shard.compare_and_append(
                        [Update((upper % 4, "n"), upper, 1)], Frontier(upper), Frontier(upper + 1)
                    )
                    upper += 1
                compactions[0] += 1 if shard.compact() else 0
        except BaseException as error:
            errors.append(error)
        finally:
            stop.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=compactor)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[0]
    assert compactions[0] >= 60
    assert reads[0] > 0
    assert set(client.blob.list_batches(shard.shard_id)) == named_keys(shard)


def test_reader_seeing_an_emptied_batch_dir_retries(client: PersistClient) -> None:
    """A reader that lists a batch directory while compaction is deleting it
    (the files gone, the directory not yet) must retry, not read it as empty."""
    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((i, "x"), 0, 1)] for i in range(4)])
    reader = client.open_shard(shard.shard_id, DESC)
    real_blob = reader.blob
    compacted: list[int] = []

    class MidDeleteBlob:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_blob, name)

        def batch_files(self, sid: str, key: str) -> list[Path]:
            if not compacted:
                compacted.append(shard.compact())
            if not real_blob.batch_path(sid, key).exists():
                return []  # what a listing sees between unlink and rmdir
            return real_blob.batch_files(sid, key)

    reader.blob = MidDeleteBlob()  # type: ignore[assignment]
    assert canonical(reader.snapshot(3)) == model_snapshot(written, 3)
    assert compacted == [4]


# ------------------------------------------------------------------- GC
def write_orphan(blob: BlobStore, shard_id: str, writer_id: str, partial: bool = False) -> str:
    """Simulate a writer that crashed after writing a batch (or part of one)
    but before any state named it."""
    key = f"{writer_id}-{uuid.uuid4().hex}"
    path = blob.batch_path(shard_id, key)
    if partial:
        path.mkdir(parents=True)
        (path / ".part-00000.parquet.tmp").write_bytes(b"PAR1 half a file")
    else:
        write_batch_table(updates_to_table([Update((1, "orphan"), 0, 1)], DESC), path)
    return key


def test_gc_removes_orphans_of_dead_writers_only(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((1, "a"), 0, 1)], [Update((2, "b"), 0, 1)]])
    named = named_keys(shard)

    # A writer that never registered (it crashed before, or its entry was
    # expired and dropped long ago): both a full and a half-written batch.
    ghost_full = write_orphan(client.blob, shard.shard_id, "wdeadbeefdeadbeef")
    ghost_partial = write_orphan(client.blob, shard.shard_id, "wdeadbeefdeadbeef", partial=True)
    # A live writer (the shard handle's own, registered by its appends) whose
    # batch is not named yet: it may be about to land.
    live = write_orphan(client.blob, shard.shard_id, shard.writer_id)
    # A writer with a short lease that stops heart-beating after writing.
    short = client.open_shard(shard.shard_id, DESC)
    short.writer_lease_ms = 500
    written += append_all(short, [[Update((3, "c"), 0, 1)]], start=2)
    named |= named_keys(short)
    lapsing = write_orphan(client.blob, shard.shard_id, short.writer_id)

    deleted = shard.collect_garbage()
    assert sorted(deleted) == sorted([ghost_full, ghost_partial])
    assert set(client.blob.list_batches(shard.shard_id)) == named | {live, lapsing}

    time.sleep(0.7)  # the short writer's lease runs out
    assert shard.collect_garbage() == [lapsing]
    assert set(client.blob.list_batches(shard.shard_id)) == named | {live}
    # Named batches were never touched.
    assert named_keys(shard) == named
    assert canonical(shard.snapshot(2)) == model_snapshot(written, 2)


def test_gc_racing_a_new_writer_keeps_its_batch(
    client: PersistClient, consensus_url: str, tmp_path: Path
) -> None:
    """A writer that registers and appends while GC runs (between GC reading
    the state and listing the blobs) must not lose its batch."""
    shard_id = new_shard_id()
    client.open_shard(shard_id, DESC)
    gc_client = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    gc_shard = gc_client.open_shard(shard_id, DESC)
    real_blob = gc_shard.blob
    landed: list[str] = []

    class InterleavingBlob:
        """Lets a brand-new writer append just as GC looks at the blobs."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real_blob, name)

        def list_batches(self, sid: str) -> list[str]:
            if not landed:
                writer = client.open_shard(shard_id, DESC)
                writer.compare_and_append([Update((7, "new"), 0, 1)], Frontier(0), Frontier(1))
                landed.extend(named_keys(writer))
            return real_blob.list_batches(sid)

    gc_shard.blob = InterleavingBlob()  # type: ignore[assignment]
    try:
        gc_shard.collect_garbage()
    finally:
        gc_shard.blob = real_blob
        gc_client.close()
    assert landed
    reader = client.open_shard(shard_id, DESC)
    assert set(client.blob.list_batches(shard_id)) == set(landed)
    assert reader.snapshot(0) == [((7, "new"), 1)]


# ------------------------------------------------------------- finalize
def test_finalize_only_when_since_and_upper_empty(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    append_all(shard, [[Update((1, "a"), 0, 1)]])
    shard_dir = client.blob.root / shard.shard_id
    files = blob_files(client.blob.root, shard.shard_id)
    assert files

    assert shard.finalize() is False  # readable and writable
    shard.downgrade_critical_since("c", Frontier.empty())
    assert shard.since() == Frontier(1)  # capped at the upper
    assert shard.finalize() is False  # still writable
    assert blob_files(client.blob.root, shard.shard_id) == files
    shard.compare_and_append([Update((2, "b"), 1, 1)], Frontier(1), Frontier.empty())
    assert shard.upper() == Frontier.empty()
    assert shard.since() == Frontier.empty()

    assert shard.finalize() is True
    assert not shard_dir.exists()
    assert shard.finalize() is True  # idempotent
    with pytest.raises(ShardFinalized):
        shard.compare_and_append([Update((3, "c"), 5, 1)], Frontier(5), Frontier(6))
    with pytest.raises(ShardFinalized):
        client.open_shard(shard.shard_id, DESC).compare_and_append(
            [Update((3, "c"), 1, 1)], Frontier(1), Frontier(2)
        )
    with pytest.raises(ShardFinalized):
        shard.downgrade_critical_since("c2", Frontier(3))
    assert not shard_dir.exists()


def test_finalize_refused_while_since_held(client: PersistClient) -> None:
    """Upper closed but a reader still holds since: no finalize, data intact."""
    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((1, "a"), 0, 1)]])
    reader = shard.open_leased_reader()
    shard.compare_and_append([], Frontier(1), Frontier.empty())
    shard.downgrade_critical_since("c", Frontier.empty())
    assert shard.since() == Frontier(0)  # the leased reader holds 0
    files = blob_files(client.blob.root, shard.shard_id)
    assert shard.finalize() is False
    assert blob_files(client.blob.root, shard.shard_id) == files
    assert canonical(shard.snapshot(0)) == model_snapshot(written, 0)
    reader.expire()  # the critical reader's [] is now the least hold
    assert shard.since() == Frontier.empty()
    assert shard.finalize() is True
    assert blob_files(client.blob.root, shard.shard_id) == {}


def _read_planned(dirs: list[str]) -> list[tuple[tuple, int]]:
    """Read planned batch directories as a lazy engine would, later: straight
    from the files, without asking the state again."""
    import pyarrow.parquet as pq

    rows = []
    for directory in dirs:
        for file in sorted(Path(directory).glob("*.parquet")):
            table = pq.read_table(file)
            for k, v, _t, d in zip(*(table.column(i).to_pylist() for i in range(4)), strict=True):
                rows.append(((k, v), d))
    return rows


def test_planned_read_survives_compaction_and_gc_elsewhere(
    client: PersistClient, consensus_url: str, tmp_path: Path
) -> None:
    """A read that planned its batches (as a Spark snapshot does) reads them
    after another client compacted the shard and collected garbage; once the
    hold is released, GC deletes the replaced blobs."""
    from coordinator_lib.persist.read_scope import held_reads

    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((i, "x"), 0, 1)] for i in range(6)])
    shard.downgrade_critical_since("c", Frontier(5))
    other = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    try:
        compactor = other.open_shard(shard.shard_id, DESC)
        with held_reads():
            _, dirs = shard.batch_dirs_at(5)
            planned_keys = {Path(d).name for d in dirs}
            assert compactor.compact() == 6
            compactor.collect_garbage()
            assert not planned_keys & named_keys(shard)  # replaced in the state
            assert canonical(_read_planned(dirs)) == model_snapshot(written, 5)
        # Released: the next GC pass (any process) takes the replaced blobs.
        assert set(compactor.collect_garbage()) == planned_keys
    finally:
        other.close()
    assert set(client.blob.list_batches(shard.shard_id)) == named_keys(shard)


def test_lapsed_seqno_hold_no_longer_protects(
    client: PersistClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hold whose holder stopped heart-beating (a killed process) lapses
    with its lease; GC then deletes what it protected."""
    import coordinator_lib.persist.shard as shard_module

    shard = client.open_shard(new_shard_id(), DESC)
    append_all(shard, [[Update((i, "x"), 0, 1)] for i in range(3)])
    shard.downgrade_critical_since("c", Frontier(2))
    old_keys = named_keys(shard)
    monkeypatch.setattr(shard_module, "SEQNO_HOLD_LEASE_MS", 200)
    shard.batch_dirs_at(2)  # no scope: a hold nobody releases
    assert shard.compact() == 3
    assert old_keys <= set(client.blob.list_batches(shard.shard_id))
    time.sleep(0.3)  # the lease lapses
    assert set(shard.collect_garbage()) == old_keys
    assert set(client.blob.list_batches(shard.shard_id)) == named_keys(shard)


def test_open_scope_heartbeats_its_holds_past_the_lease(client: PersistClient) -> None:
    """A read longer than the hold's lease (a slow Spark job) keeps its
    batches: the scope heart-beats the hold until the read is done."""
    from coordinator_lib.persist.read_scope import held_reads

    shard = client.open_shard(new_shard_id(), DESC)
    written = append_all(shard, [[Update((i, "x"), 0, 1)] for i in range(3)])
    shard.downgrade_critical_since("c", Frontier(2))
    with held_reads(lease_ms=300):
        _, dirs = shard.batch_dirs_at(2)
        time.sleep(0.9)  # three leases
        assert shard.compact() == 3
        shard.collect_garbage()
        assert canonical(_read_planned(dirs)) == model_snapshot(written, 2)
    assert not shard.state().seqno_holds  # released at the end of the scope


def test_a_critical_hold_that_does_not_move_writes_no_state(client: PersistClient) -> None:
    """Every step of every view downgrades its holds on its inputs, and most
    steps leave them where they were: such a downgrade must not write a new
    shard state (it cost two thirds of an in-process step before)."""
    shard = client.open_shard(new_shard_id(), DESC)
    append_all(shard, [[Update((i, "x"), 0, 1)] for i in range(10)])
    shard.downgrade_critical_since("c", Frontier(6))
    seqno = shard.machine.state().seqno
    assert shard.downgrade_critical_since("c", Frontier(6)) == Frontier(6)
    assert shard.downgrade_critical_since("c", Frontier(3)) == Frontier(6)  # never backwards
    assert shard.machine.state().seqno == seqno
    assert shard.downgrade_critical_since("c", Frontier(7)) == Frontier(7)
    assert shard.machine.state().seqno == seqno + 1


def test_a_compaction_racing_a_drop_leaves_no_batch_behind(
    client: PersistClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compaction runs outside the storage controller's lock, so a DROP can
    finalize the shard while a compactor writes its merged batch: the
    compactor's state update then raises ShardFinalized, and the batch it
    wrote must be deleted (nothing else would ever collect it)."""
    shard = client.open_shard(new_shard_id(), DESC)
    append_all(shard, [[Update((1, "a"), 0, 1)], [Update((2, "b"), 1, 1)]])
    dropping = client.open_shard(shard.shard_id, DESC)
    real_write = shard_module.batch_io.write_batch_table

    def write_after_a_drop(table: Any, path: Path) -> int:
        dropping.compare_and_append([], shard.upper(), Frontier.empty())
        dropping.downgrade_critical_since("c", Frontier.empty())
        assert dropping.finalize() is True
        return real_write(table, path)

    monkeypatch.setattr(shard_module.batch_io, "write_batch_table", write_after_a_drop)
    with pytest.raises(ShardFinalized):
        shard.compact(max_batches=1)
    assert not blob_files(client.blob.root, shard.shard_id)
