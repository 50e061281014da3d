"""Two `tidemark serve --workers 2` processes on one environment: the first
owns the scheduler and runs the workers; SIGKILL it and the second takes
over (a higher owner revision), starts its own workers (the first's exit
with their parent), and the views carry on exactly; the persisted global
checkpoint never goes back."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from coordinator_lib.persist.consensus import open_consensus
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from tests.scheduler.workers import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


class Serve:
    def __init__(self, data_dir: Path, log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, "-m", "coordinator_lib.cli", "serve", "--data-dir", str(data_dir),
             "--pgwire-port", "0", "--http-port", "0", "--workers", "2",
             "--lease-ttl-ms", "2000"],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip

        def port() -> int | None:
            assert self.process.poll() is None, self.log.read_text()
            found = re.search(r"HTTP on http://127\.0\.0\.1:(\d+)", self.log.read_text())
            return int(found.group(1)) if found else None

        try:
            self.url = f"http://127.0.0.1:{wait_for('serve to start', port, timeout=120)}"
        except BaseException:
            self.process.kill()  # its workers follow it (--parent-pid)
            self.process.wait()
            raise

    def sql(self, query: str) -> list[Any]:
        results = requests.post(f"{self.url}/api/sql", json={"query": query}, timeout=60).json()
        assert all("error" not in r for r in results["results"]), results
        return results["results"]

    def tasks(self) -> requests.Response:
        return requests.get(f"{self.url}/api/scheduler/tasks", timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


def _settled(serve: Serve, tasks: int) -> dict | None:
    response = serve.tasks()
    if response.status_code != 200:
        return None
    status = response.json()
    entries = [t for c in status["captures"].values() for t in c]
    ok = len(status["captures"]) == 2 and len(entries) == tasks
    return status if ok and all(t["state"] == "replicating" for t in entries) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_second_serve_takes_over_when_the_owner_dies(tmp_path: Path) -> None:
    data = tmp_path / "env"
    first = Serve(data, tmp_path / "first.log")
    second = None
    try:
        first.sql(
            "CREATE TABLE t (k bigint, v bigint); "
            "CREATE MATERIALIZED VIEW sums AS SELECT k, sum(v) AS s FROM t GROUP BY k; "
            "CREATE MATERIALIZED VIEW n AS SELECT count(*) AS n FROM t; "
            "CREATE MATERIALIZED VIEW big AS SELECT k, v FROM t WHERE v >= 10"
        )
        status = wait_for("views on the first's workers", lambda: _settled(first, 3), timeout=90)
        first.sql("INSERT INTO t VALUES (1, 5), (2, 10)")
        assert first.sql("SELECT n FROM n")[0]["rows"] == [[2]]
        first_owner, first_revision = status["owner"], status["revision"]
        checkpoint = wait_for(
            "a checkpoint past the insert",
            lambda: (s := _settled(first, 3)) and s["checkpoint_ts"],
        )

        consensus = open_consensus(str(data / "consensus.db"))
        leases = ConsensusLeaseStore(consensus)
        old_workers = [int(c.address.split(":")[1]) for c in leases.alive_captures().values()]
        assert len(old_workers) == 2

        second = Serve(data, tmp_path / "second.log")
        standby = second.tasks()
        assert standby.status_code == 503 and standby.json()["owner"] == first_owner

        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        wait_for("the first's workers to exit", lambda: not any(map(_alive, old_workers)))
        status = wait_for("the second to take over", lambda: _settled(second, 3), timeout=90)
        assert status["owner"] != first_owner and status["revision"] > first_revision
        new_workers = [int(c.address.split(":")[1]) for c in leases.alive_captures().values()]
        assert not set(new_workers) & set(old_workers)
        consensus.close()

        second.sql("INSERT INTO t VALUES (1, 20), (3, 1)")
        assert sorted(second.sql("SELECT k, s::bigint FROM sums")[0]["rows"]) == [
            [1, 25],
            [2, 10],
            [3, 1],
        ]
        assert second.sql("SELECT n FROM n")[0]["rows"] == [[4]]
        assert sorted(second.sql("SELECT * FROM big")[0]["rows"]) == [[1, 20], [2, 10]]
        after = wait_for(
            "the checkpoint to pass the second insert",
            lambda: (s := _settled(second, 3)) and s["checkpoint_ts"] > checkpoint and s,
        )
        assert after["checkpoint_ts"] >= checkpoint
    finally:
        if first.process.poll() is None:
            first.process.kill()
            first.process.wait()
        if second is not None:
            second.stop()
            assert second.process.returncode == 0, second.log.read_text()
