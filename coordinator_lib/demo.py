"""`tidemark demo`: a short end-to-end tour of the storage layer.

It opens an environment, creates a table and two load generator sources,
writes and ingests for a few seconds, reads at several timestamps, shows a
read hold stopping compaction, then reopens the environment as a restarted
process would and checks nothing was lost. Each step says what it did.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from coordinator_lib.repr import GlobalId, LagWriteFrontier, RelationDesc, Update, now_ms
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    IngestionDescription,
    StorageController,
    table_description,
)
from coordinator_lib.storage.load_generator import make_generator

ACCOUNTS = GlobalId.user(1)
COUNTER = GlobalId.user(2)
BIDS = GlobalId.user(3)
ACCOUNTS_DESC = RelationDesc.of(("id", "bigint", False), ("owner", "text"), ("balance", "bigint"))


def _collections(start: int) -> list[tuple[GlobalId, CollectionDescription]]:
    counter = IngestionDescription("counter", "counter", start, tick_interval_ms=200)
    auction = IngestionDescription("auction", "bids", start, 200, options=(("seed", 7),))
    return [
        (ACCOUNTS, table_description(ACCOUNTS_DESC)),
        (
            COUNTER,
            CollectionDescription(
                make_generator("counter").outputs()["counter"], DataSource.ingestion_of(counter)
            ),
        ),
        (
            BIDS,
            CollectionDescription(
                make_generator("auction", seed=7).outputs()["bids"],
                DataSource.ingestion_of(auction),
            ),
        ),
    ]


def _say(text: str) -> None:
    print(f"tidemark demo: {text}", flush=True)


def run_storage_demo(data_dir: str, seconds: float = 3.0) -> None:
    """Run the tour in `data_dir` (wiped first)."""
    path = Path(data_dir)
    shutil.rmtree(path, ignore_errors=True)
    start = now_ms()
    storage = StorageController.open(str(path))
    storage.create_collections(_collections(start))
    storage.initialization_complete()
    _say(f"environment at {path.resolve()} (SQLite consensus, Parquet blobs)")
    _say("created table u1 'accounts', load generator sources u2 'counter' and u3 'bids'")

    t0 = now_ms()
    storage.append(
        [(ACCOUNTS, [Update((1, "ada", 100), t0, 1), Update((2, "bob", 50), t0, 1)], t0 + 1)]
    )
    t1 = now_ms() + 1
    storage.append(
        [(ACCOUNTS, [Update((2, "bob", 50), t1, -1), Update((2, "bob", 75), t1, 1)], t1 + 1)]
    )
    _say(f"appended 2 accounts at {t0}, then updated bob's balance at {t1}")
    for at in (t0, t1):
        rows = sorted(row for row, _ in storage.snapshot(ACCOUNTS, at))
        _say(f"  accounts as of {at}: {rows}")

    hold = storage.acquire_read_hold(ACCOUNTS, t0)
    storage.set_read_policy([(ACCOUNTS, LagWriteFrontier(0))])
    storage.append([(ACCOUNTS, [Update((3, "cy", 10), t1 + 5, 1)], t1 + 10)])
    since, upper = storage.collection_frontiers(ACCOUNTS)
    _say(f"read policy lag 0, but a read hold at {t0} keeps since at {since!r} (upper {upper!r})")
    hold.release()
    since, upper = storage.collection_frontiers(ACCOUNTS)
    _say(f"hold released: since advanced to {since!r}")

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        storage.process()
        storage.ready(timeout_s=0.2)
    storage.process()
    for id, name in ((COUNTER, "counter"), (BIDS, "bids")):
        since, upper = storage.collection_frontiers(id)
        assert upper.time is not None
        count = sum(diff for _, diff in storage.snapshot(id, upper.time - 1))
        _say(f"ingested {name}: {count} rows, since {since!r}, upper {upper!r}")

    report = storage.maintain()
    _say(
        f"maintenance: compacted {report.compacted_batches} batches,"
        f" collected {report.collected_blobs} orphan blobs"
    )
    counter_upper = storage.collection_frontiers(COUNTER)[1]
    storage.close()

    _say("reopening the environment as a restarted process would...")
    storage = StorageController.open(str(path))
    storage.create_collections(_collections(start))
    reopened = storage.collection_frontiers(COUNTER)[1]
    assert reopened == counter_upper, (reopened, counter_upper)
    storage.process()
    upper = storage.collection_frontiers(COUNTER)[1]
    assert upper.time is not None
    values = sorted(
        row[0] for row, diff in storage.snapshot(COUNTER, upper.time - 1) for _ in range(diff)
    )
    assert values == list(range(1, len(values) + 1)), "counter has gaps or duplicates"
    _say(
        f"counter resumed from upper {reopened!r}: {len(values)} values 1..{len(values)},"
        " no gaps, no duplicates"
    )
    stats = storage.collection_statistics(BIDS)
    _say(f"bids shard: {stats.rows} stored updates in {stats.batches} batches, {stats.bytes} bytes")
    storage.close()
    _say("done")


__all__ = ["run_storage_demo"]
