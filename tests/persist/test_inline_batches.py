"""Inline batches: a small append is carried in the shard's state, so its
commit is one consensus write (one fsync) and no blob file; readers that
open files themselves get one written from the state's copy; compaction
turns inline batches into a durable blob batch; the inline bytes of a
shard are bounded."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coordinator_lib.persist import PersistClient
from coordinator_lib.persist import shard as shard_module
from coordinator_lib.persist.state import ShardState
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from tests.persist.support import DESC, blob_files, canonical, new_shard_id


@pytest.fixture
def client(consensus_url: str, tmp_path: Path) -> Iterator[PersistClient]:
    client = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    yield client
    client.close()


def test_small_append_lands_in_the_state_alone(
    client: PersistClient, consensus_url: str, tmp_path: Path
) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((1, "a"), 0, 1)], Frontier(0), Frontier(1))
    shard.compare_and_append([Update((2, None), 1, 1)], Frontier(1), Frontier(2))
    assert blob_files(tmp_path / "blob", shard.shard_id) == {}  # no blob write, no fsync
    [first, second] = shard.state().batches
    assert first.inline is not None and second.inline is not None
    # Another process sees the rows from the state alone.
    other = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    try:
        reader = other.open_shard(shard.shard_id, DESC)
        assert canonical(reader.snapshot(1)) == [((1, "a"), 1), ((2, None), 1)]
    finally:
        other.close()


def test_reader_of_files_gets_the_inline_batch_as_a_file(client: PersistClient) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((7, "x"), 0, 1)], Frontier(0), Frontier(1))
    _, [directory] = shard.batch_dirs_at(0)
    [file] = Path(directory).glob("*.parquet")
    assert pq.read_table(file).select(["k", "v", "__diff"]).to_pylist() == [
        {"k": 7, "v": "x", "__diff": 1}
    ]
    file.unlink()  # what a crash before its rename leaves
    _, [again] = shard.batch_dirs_at(0)
    assert pq.read_table(Path(again) / file.name).column("k").to_pylist() == [7]


def test_compaction_makes_inline_batches_durable(client: PersistClient, tmp_path: Path) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    for t in range(3):
        shard.compare_and_append([Update((t, "v"), t, 1)], Frontier(t), Frontier(t + 1))
    assert shard.compact() == 3
    [merged] = shard.state().batches
    assert merged.inline is None
    assert blob_files(tmp_path / "blob", shard.shard_id)  # a durable blob batch
    assert canonical(shard.snapshot(2)) == [((0, "v"), 1), ((1, "v"), 1), ((2, "v"), 1)]


def test_inline_bytes_of_a_shard_are_bounded(
    client: PersistClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((0, "a"), 0, 1)], Frontier(0), Frontier(1))
    one = len(shard.state().batches[0].inline or "")
    monkeypatch.setattr(shard_module, "INLINE_TOTAL_BYTES", 3 * one)
    for t in range(1, 6):
        shard.compare_and_append([Update((t, "a"), t, 1)], Frontier(t), Frontier(t + 1))
    inline = [b.inline is not None for b in shard.state().batches]
    assert inline == [True, True, True, False, False, False]
    assert canonical(shard.snapshot(5)) == [((t, "a"), 1) for t in range(6)]


def test_flushing_a_backlog_of_inline_batches_keeps_small_writes_inline(
    client: PersistClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((0, "a"), 0, 1)], Frontier(0), Frontier(1))
    one = len(shard.state().batches[0].inline or "")
    monkeypatch.setattr(shard_module, "INLINE_TOTAL_BYTES", 3 * one)
    for t in range(1, 3):
        shard.compare_and_append([Update((t, "a"), t, 1)], Frontier(t), Frontier(t + 1))
    assert shard.inline_backlog
    assert shard.flush_inline() == 3
    [durable] = shard.state().batches
    assert durable.inline is None
    shard.compare_and_append([Update((3, "a"), 3, 1)], Frontier(3), Frontier(4))
    assert shard.state().batches[-1].inline is not None  # room again
    assert canonical(shard.snapshot(3)) == [((t, "a"), 1) for t in range(4)]


def test_a_commit_reads_no_state_it_wrote_last(
    client: PersistClient, consensus_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upper's check and the compare-and-set use the state this process
    wrote last: a commit makes no consensus read; a write from elsewhere in
    between makes it re-read, not fail."""
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((0, "a"), 0, 1)], Frontier(0), Frontier(1))
    reads: list[str] = []
    real_head = client.consensus.head

    def counted(key: str) -> object:
        reads.append(key)
        return real_head(key)

    monkeypatch.setattr(client.consensus, "head", counted)
    shard.compare_and_append([Update((1, "a"), 1, 1)], Frontier(1), Frontier(2))
    assert reads == []
    other = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    try:
        elsewhere = other.open_shard(shard.shard_id, DESC)
        elsewhere.compare_and_append([Update((2, "b"), 2, 1)], Frontier(2), Frontier(3))
    finally:
        other.close()
    shard.compare_and_append([Update((3, "a"), 3, 1)], Frontier(3), Frontier(4))
    assert canonical(shard.snapshot(3)) == [
        ((0, "a"), 1),
        ((1, "a"), 1),
        ((2, "b"), 1),
        ((3, "a"), 1),
    ]


def test_the_state_a_commit_keeps_is_the_state_it_stored(
    client: PersistClient, consensus_url: str, tmp_path: Path
) -> None:
    """A commit starts from the state this process last wrote (kept
    decoded, each batch's JSON made once): it must be exactly what another
    process reads, through appends, a since moved by compaction, and a
    flush of inline batches."""
    shard = client.open_shard(new_shard_id(), DESC)
    for t in range(4):
        shard.compare_and_append([Update((t, "v"), t, 1)], Frontier(t), Frontier(t + 1))
    assert shard.flush_inline() == 4
    for t in range(4, 6):
        shard.compare_and_append([Update((t, "w"), t, 1)], Frontier(t), Frontier(t + 1))
    other = PersistClient.open(consensus_url=consensus_url, blob_root=tmp_path / "blob")
    try:
        stored = other.open_shard(shard.shard_id, DESC).machine.fetch()
    finally:
        other.close()
    kept = shard.machine.recent_state()
    assert stored is not None
    assert kept.to_bytes() == stored.to_bytes()
    assert [(b.key, b.since, b.inline) for b in kept.batches] == [
        (b.key, b.since, b.inline) for b in stored.batches
    ]


def test_a_batch_changed_in_a_copy_is_stored_changed(client: PersistClient) -> None:
    """A batch's JSON is made once per value of its fields: a copy whose
    batch moved (compaction's since) stores the new value."""
    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((1, "a"), 0, 1)], Frontier(0), Frontier(1))
    state = shard.state()
    before = ShardState.from_bytes(state.to_bytes())
    state.batches[0] = dataclasses.replace(state.batches[0], since=7)
    after = ShardState.from_bytes(state.to_bytes())
    assert (before.batches[0].since, after.batches[0].since) == (0, 7)
    assert after.batches[0].inline == before.batches[0].inline
    assert json.loads(state.to_bytes())["batches"] == [vars(b) for b in state.batches]


def test_stored_states_keep_no_replaced_batch_alive(client: PersistClient) -> None:
    """Each commit writes its state's batches as JSON, made once per live
    batch: what compaction replaced is forgotten, so memory follows the
    shard's live batches, not the commits made (issue 18's soak: dead inline
    batches' base64, kept until 4,096 had piled up, grew the server's heap
    by about 2.5 MB a minute)."""
    import base64
    import os
    import tracemalloc

    from coordinator_lib.persist.state import BatchMeta

    shard = client.open_shard(new_shard_id(), DESC)
    shard.compare_and_append([Update((0, "a"), 0, 1)], Frontier(0), Frontier(1))
    state = shard.state()
    live, commits, inline_bytes = 8, 600, 8192

    def batch(n: int) -> BatchMeta:
        inline = base64.b64encode(os.urandom(inline_bytes)).decode()
        return BatchMeta(f"b{n}", n, n + 1, n, 1, inline_bytes, inline)

    tracemalloc.start()
    try:
        state.batches = [batch(n) for n in range(live)]
        state.to_bytes()
        before = tracemalloc.get_traced_memory()[0]
        for n in range(live, commits):
            state.batches = [*state.batches[1:], batch(n)]  # one replaced, one added
            state.to_bytes()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The live batches and their JSON are the same size whatever the count of
    # commits; every replaced batch kept would be about 22 KB (11 MB here).
    assert held < 1_000_000, f"{commits} commits kept {held / 1e6:.1f} MB"
