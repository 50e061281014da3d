"""Writers SIGKILLed at random moments (invariant 3: an acknowledged write
is durable; a crash at any point leaves no partial batch visible; GC then
removes the killed writers' orphans and nothing else), and racing
transaction writers killed together: a transaction's appends to two tables
land in both or in neither (issue 18)."""

from __future__ import annotations

import os
import random
import select
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from coordinator_lib.persist import PersistClient
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from coordinator_lib.storage.controller import StorageController, table_description
from tests.persist.support import new_shard_id
from tests.persist.workers import (
    CRASH_DESC,
    CRASH_ROWS,
    CRASH_WRITER_LEASE_MS,
    TX_TABLES,
)

KILLS = 12  # per backend; each kill lands at a random point of a write
TX_KILLS = 5  # per backend; each kills every transaction writer at once
TX_WRITERS = 3
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def start_writer(args: list[str], log: Path) -> subprocess.Popen:
    """`python -m tests.persist.workers <args>`, its stderr to `log`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "tests.persist.workers", *args]
    with open(log, "ab") as err:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=REPO)


def kill(proc: subprocess.Popen, log: Path) -> None:
    """SIGKILL a writer that must still have been running."""
    if proc.poll() is not None:
        pytest.fail(f"writer died on its own ({proc.returncode}):\n{log.read_text()[-3000:]}")
    proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()


def wait_ready(proc: subprocess.Popen, log: Path) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else b""
    if line.strip() != b"ready":
        proc.kill()
        proc.wait()
        pytest.fail(f"writer did not start: {line!r}\n{log.read_text()[-3000:]}")


def read_acks(ack: Path) -> list[int]:
    """Complete lines only (a kill may cut the last one short)."""
    text = ack.read_text() if ack.exists() else ""
    return [int(line) for line in text.split("\n")[:-1]]


def test_sigkilled_writer_loses_nothing_acknowledged(consensus_url: str, tmp_path: Path) -> None:
    blob_root = tmp_path / "blob"
    ack = tmp_path / "acks.txt"
    log = tmp_path / "writer.log"
    shard_id = new_shard_id("crash")
    client = PersistClient.open(consensus_url=consensus_url, blob_root=blob_root)
    shard = client.open_shard(shard_id, CRASH_DESC)
    rng = random.Random(0xC0FFEE)

    uppers = []
    for _ in range(KILLS):
        args = ["crash-writer", consensus_url, str(blob_root), shard_id, str(ack)]
        proc = start_writer(args, log)
        wait_ready(proc, log)
        time.sleep(rng.uniform(0, 0.2))
        kill(proc, log)
        uppers.append(shard.upper().time)
    assert uppers == sorted(uppers), "the upper went backwards across restarts"

    acked = read_acks(ack)
    assert len(acked) == len(set(acked)), "a batch was acknowledged twice"
    state = shard.state()
    upper = state.upper
    assert upper is not None and upper > 0, "nothing landed at all"

    rows = shard.snapshot(upper - 1)
    assert all(diff == 1 for _, diff in rows), "a row is duplicated or retracted"
    per_tag = Counter(tag for (tag, _i), _ in rows)
    # Nothing partial: each visible tag has all its rows, each once.
    assert {tag: n for tag, n in per_tag.items() if n != CRASH_ROWS} == {}
    assert sorted(r for r, _ in rows) == sorted((t, i) for t in per_tag for i in range(CRASH_ROWS))
    # Every acknowledged batch is there.
    assert set(acked) <= set(per_tag), f"lost acknowledged batches {set(acked) - set(per_tag)}"
    # The upper is exactly what landed: batch u advanced the upper to u + 1.
    assert set(per_tag) == set(range(upper))
    assert len(state.batches) == upper
    assert all((b.lower, b.upper) == (i, i + 1) for i, b in enumerate(state.batches))
    # At most one landed batch per kill went unacknowledged.
    assert len(set(per_tag) - set(acked)) <= KILLS

    # Killed writers may have left batch directories no state names.
    named = {b.key for b in state.batches}
    orphans = set(client.blob.list_batches(shard_id)) - named
    writer_ids = {key.split("-", 1)[0] for key in named | orphans}
    assert writer_ids, "batch keys carry their writer id"
    time.sleep(3 * CRASH_WRITER_LEASE_MS / 1000)  # every killed writer's lease runs out
    deleted = shard.collect_garbage()
    assert set(deleted) == orphans
    # Inline batches (small ones, carried in the state) have no directory.
    assert set(client.blob.list_batches(shard_id)) == {
        b.key for b in state.batches if b.inline is None
    }
    assert sorted(shard.snapshot(upper - 1)) == sorted(rows)

    # A new writer resumes from the durable upper.
    shard.compare_and_append([Update((upper, 0), upper, 1)], Frontier(upper), Frontier(upper + 1))
    assert shard.upper() == Frontier(upper + 1)
    print(
        f"{KILLS} kills: {upper} batches landed, {len(acked)} acknowledged,"
        f" {len(orphans)} orphan batch dirs collected"
    )
    client.close()


def test_sigkilled_transactions_land_in_every_table_or_none(
    consensus_url: str, tmp_path: Path
) -> None:
    """TX_WRITERS processes commit two-table transactions as fast as they
    can, racing each other, and are all SIGKILLed at a random moment, again
    and again. Afterwards each table holds exactly the same transactions,
    each whole, and every acknowledged one."""
    blob_root = tmp_path / "blob"
    ack = tmp_path / "acks.txt"
    log = tmp_path / "writers.log"
    rng = random.Random(0x7A11)
    args = ["transaction-writer", consensus_url, str(blob_root), str(ack)]
    for _ in range(TX_KILLS):
        procs = [start_writer(args, log) for _ in range(TX_WRITERS)]
        for proc in procs:
            wait_ready(proc, log)
        time.sleep(rng.uniform(0, 0.3))
        for proc in procs:
            kill(proc, log)

    controller = StorageController.open(consensus_url=consensus_url, blob_root=str(blob_root))
    controller.create_collections([(id, table_description(CRASH_DESC)) for id in TX_TABLES])
    uppers = [controller.collection_frontiers(id)[1] for id in TX_TABLES]
    assert uppers[0] == uppers[1], f"the tables' uppers parted: {uppers}"
    upper = uppers[0].time
    assert upper is not None and upper > 0, "nothing landed at all"
    tags = []
    for id in TX_TABLES:
        rows = controller.snapshot(id, upper - 1)
        assert all(diff == 1 for _, diff in rows), f"{id}: a row is duplicated or retracted"
        per_tag = Counter(tag for (tag, _i), _ in rows)
        assert {tag: n for tag, n in per_tag.items() if n != CRASH_ROWS} == {}, id
        tags.append(set(per_tag))
    only_first, only_second = tags[0] - tags[1], tags[1] - tags[0]
    assert (only_first, only_second) == (set(), set()), "a transaction landed in one table only"
    acked = read_acks(ack)
    assert len(acked) == len(set(acked)), "a transaction was acknowledged twice"
    assert set(acked) <= tags[0], f"lost acknowledged transactions {set(acked) - tags[0]}"
    print(
        f"{TX_KILLS} kills of {TX_WRITERS} writers: {len(tags[0])} transactions landed,"
        f" {len(acked)} acknowledged"
    )
    controller.close()
