"""Kill a replica mid-step (SIGKILL, many times), start another: the view is
exact at every time and the steps resume from the output's durable upper,
with no duplicated or missing updates (docs/architecture.md, invariants 3 and 7)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.repr import Update
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    StorageController,
    table_description,
)
from tests.compute.harness import as_multiset
from tests.compute.test_controller import DESC, VIEW, T, _expected, _sum_by_k

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _start_worker(data_dir: Path, ready: Path) -> subprocess.Popen:
    ready.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.compute.replica_worker", str(data_dir), str(ready)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, "replica worker died during start-up"
        assert time.monotonic() < deadline, "replica worker did not start"
        time.sleep(0.1)
    return process


def test_killed_replica_resumes_exactly(tmp_path: Path, spark: SparkSession) -> None:
    rng = random.Random(7)
    data_dir = tmp_path / "env"
    storage = StorageController.open(str(data_dir))
    expr = _sum_by_k()
    storage.create_collections(
        [(T, table_description(DESC)), (VIEW, CollectionDescription(expr.desc, DataSource.other()))]
    )
    rows: list[tuple[int, int]] = []
    t = 0
    kills = 0
    worker = _start_worker(data_dir, tmp_path / "ready")
    try:
        for _ in range(3):
            before = storage.collection_frontiers(VIEW)[1].time or 0
            for _ in range(8):
                row = (rng.randrange(4), rng.randrange(100))
                storage.append([(T, [Update(row, t, 1)], t + 1)])
                rows.append(row)
                t += 1
            # Let the replica land at least one step, then kill it at a random
            # moment: often in the middle of the next one.
            deadline = time.monotonic() + 120
            while (storage.collection_frontiers(VIEW)[1].time or 0) <= before:
                assert time.monotonic() < deadline, "replica made no progress"
                time.sleep(0.05)
            storage.append([(T, [Update((9, 1), t, 1)], t + 1)])
            rows.append((9, 1))
            t += 1
            time.sleep(rng.uniform(0, 1.5))
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            kills += 1
            worker = _start_worker(data_dir, tmp_path / "ready")
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    # Work the survivor must do itself (the last worker may have caught up).
    for _ in range(3):
        row = (rng.randrange(4), rng.randrange(100))
        storage.append([(T, [Update(row, t, 1)], t + 1)])
        rows.append(row)
        t += 1
    # Another replica (this process) picks up where the output's upper is.
    view_upper = storage.collection_frontiers(VIEW)[1].time
    assert view_upper is not None
    compute = ComputeController(storage, spark)
    compute.create_instance("default")
    compute.add_replica("default", "survivor")
    compute.create_dataflow(
        "default", DataflowDescription(VIEW, expr, max(view_upper - 1, 0), sink_id=VIEW)
    )
    while storage.collection_frontiers(VIEW)[1].time != t:
        compute.process()
    assert kills == 3
    assert view_upper > 1, "the killed replicas never landed a step"
    first = compute.dataflow("default", VIEW).steps[0]
    assert first.lower == view_upper, "the survivor recomputed instead of resuming"
    for at in range(t):
        got = as_multiset(storage.snapshot(VIEW, at))
        assert got == _expected(rows[: at + 1]), f"view wrong at time {at}"
    storage.close()
