"""Child-process bodies for the race and crash suites.

`race_worker` runs under multiprocessing (spawn); the crash writer runs as
`python -m tests.persist.workers crash-writer ...` so the parent can SIGKILL
it at any instruction.
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
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update

RACE_DESC = RelationDesc.of(
    ("writer", "bigint", False), ("round", "bigint", False), ("i", "bigint")
)
RACE_ROWS = 3

CRASH_DESC = RelationDesc.of(("tag", "bigint", False), ("i", "bigint", False))
CRASH_ROWS = 4  # rows per batch; every batch's rows share one tag
CRASH_WRITER_LEASE_MS = 500


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


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] != "crash-writer":
        sys.exit("usage: python -m tests.persist.workers crash-writer URL BLOB SHARD ACKFILE")
    crash_writer(*sys.argv[2:])
