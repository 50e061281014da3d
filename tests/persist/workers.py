"""Child-process bodies for the race and crash suites.

`race_worker` runs under multiprocessing (spawn); the crash writers run as
`python -m tests.persist.workers crash-writer|transaction-writer ...` so the
parent can SIGKILL them at any instruction.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from coordinator_lib.persist import PersistClient, UpperMismatch
from coordinator_lib.persist import batch as batch_io
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update
from coordinator_lib.storage.controller import AppendCommand, StorageController, table_description
from coordinator_lib.storage.errors import InvalidUppers

RACE_DESC = RelationDesc.of(
    ("writer", "bigint", False), ("round", "bigint", False), ("i", "bigint")
)
RACE_ROWS = 3

CRASH_DESC = RelationDesc.of(("tag", "bigint", False), ("i", "bigint", False))
CRASH_ROWS = 4  # rows per batch; every batch's rows share one tag
CRASH_WRITER_LEASE_MS = 500
# The two tables every transaction writes (`transaction_writer`).
TX_TABLES = (GlobalId.user(1), GlobalId.user(2))


def race_worker(
    consensus_url: str, blob_root: str, shard_id: str, rounds: int, barrier: Any, results: Any
) -> None:
    """Each round: read the upper (both racers see the same one), then both
    try to append a batch tagged with this pid at [u, u + 1)."""
    pid = os.getpid()
    try:
        client = PersistClient.open(consensus_url=consensus_url, blob_root=blob_root)
        shard = client.open_shard(shard_id, RACE_DESC)
        outcomes: list[tuple[int, int, str]] = []
        for rnd in range(rounds):
            barrier.wait(timeout=60)
            upper = shard.upper()
            assert upper.time is not None
            u = upper.time
            barrier.wait(timeout=60)  # nobody appends before both have read it
            batch = [Update((pid, rnd, i), u, 1) for i in range(RACE_ROWS)]
            try:
                shard.compare_and_append(batch, Frontier(u), Frontier(u + 1))
                outcomes.append((rnd, u, "won"))
            except UpperMismatch as error:
                # The loser learns the real upper: the winner's new one.
                assert error.current == Frontier(u + 1), error
                outcomes.append((rnd, u, "lost"))
            barrier.wait(timeout=60)
        client.close()
        results.put((pid, outcomes, None))
    except BaseException:
        results.put((pid, [], traceback.format_exc()))
        barrier.abort()


def crash_writer(consensus_url: str, blob_root: str, shard_id: str, ack_path: str) -> None:
    """Append batches forever from the shard's upper on; after each
    compare_and_append returns, append the batch's tag to `ack_path` and
    fsync it. Prints `ready` once the shard is open."""
    client = PersistClient.open(consensus_url=consensus_url, blob_root=blob_root)
    shard = client.open_shard(shard_id, CRASH_DESC)
    shard.writer_lease_ms = CRASH_WRITER_LEASE_MS
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # Pay pyarrow's first-use cost (about 0.4 s) outside the shard, so the
    # parent's kills land among appends rather than always in the first one.
    with tempfile.TemporaryDirectory() as scratch:
        warm = batch_io.updates_to_table([Update((0, 0), 0, 1)], CRASH_DESC)
        batch_io.write_batch_table(warm, Path(scratch) / "warm-up")
    print("ready", flush=True)
    while True:
        upper = shard.upper()
        assert upper.time is not None
        tag = upper.time  # one batch per time: the tag says which
        batch = [Update((tag, i), tag, 1) for i in range(CRASH_ROWS)]
        shard.compare_and_append(batch, upper, Frontier(tag + 1))
        os.write(fd, f"{tag}\n".encode())
        os.fsync(fd)


def transaction_writer(consensus_url: str, blob_root: str, ack_path: str) -> None:
    """Commit transactions forever, each one append to both TX_TABLES (as
    group commit appends a transaction's tables): CRASH_ROWS rows tagged
    with the transaction's time in each, at the later of the two uppers.
    Several of these race; a loser retries at the new uppers. After each
    commit, append its tag to `ack_path` and fsync it. Prints `ready`."""
    controller = StorageController.open(consensus_url=consensus_url, blob_root=blob_root)
    controller.create_collections([(id, table_description(CRASH_DESC)) for id in TX_TABLES])
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    with tempfile.TemporaryDirectory() as scratch:  # pyarrow's first use, as above
        warm = batch_io.updates_to_table([Update((0, 0), 0, 1)], CRASH_DESC)
        batch_io.write_batch_table(warm, Path(scratch) / "warm-up")
    print("ready", flush=True)
    while True:
        uppers = [controller.collection_frontiers(id)[1] for id in TX_TABLES]
        tag = max(upper.time for upper in uppers if upper.time is not None)
        rows = [Update((tag, i), tag, 1) for i in range(CRASH_ROWS)]
        commands = [
            AppendCommand(id, rows, tag + 1, upper)
            for id, upper in zip(TX_TABLES, uppers, strict=True)
        ]
        try:
            controller.append(commands)
        except InvalidUppers:
            continue  # another writer committed first
        os.write(fd, f"{tag}\n".encode())
        os.fsync(fd)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "crash-writer":
        crash_writer(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "transaction-writer":
        transaction_writer(*sys.argv[2:])
    else:
        sys.exit(
            "usage: python -m tests.persist.workers crash-writer URL BLOB SHARD ACKFILE\n"
            "       python -m tests.persist.workers transaction-writer URL BLOB ACKFILE"
        )
