"""Draining a capture holding 100 views, with real `tidemark worker`
processes (the in-process counterpart is bench/scheduler_bench.py).

Setup: a coordinator with the scheduler (owner tick 0.1 s, as in `tidemark
serve`) and one supervised worker, `quickstart-0`; a table of `--rows` rows
and `--views` materialized views over it (`SELECT k, count(*), sum(v) FROM
t WHERE v > i GROUP BY k`), all placed on `quickstart-0`. Then a second
worker, `extra-1`, joins, and `quickstart-0` is drained: every view is
prepared on `extra-1` (its dataflow built at the view's upper, inputs held),
committed there, and stopped on `quickstart-0`, `max_task_concurrency` at a
time. Measured:

- placement: from the last CREATE until every view replicates on the first
  worker;
- drain: from the first drain request until `drain_capture` answers 0 and
  every view replicates on `extra-1` (the owner's view);
- fresh after drain: one INSERT, then the time until all views have
  stepped past it (the new worker maintains all of them).

Consensus is SQLite on the local disk (a compare-and-set fsyncs: ~5 ms
here), and all messages go through it. Writes bench/results/scheduler_workers.json
and scheduler_workers.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from coordinator_lib.adapter.client import serve
from coordinator_lib.adapter.cluster_supervisor import ClusterService
from coordinator_lib.adapter.coordinator import Config
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from coordinator_lib.scheduler.owner import NotOwner

RESULTS = Path(__file__).parent / "results"


def _wait(what: str, check: Any, timeout: float = 600.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run(views: int, rows: int, concurrency: int, data_dir: Path) -> dict[str, Any]:
    config = Config(
        data_dir=str(data_dir),
        workers=1,
        scheduler=True,
        scheduler_lease_ttl_ms=5_000,
        advance_interval_ms=200,
    )
    handle = serve(config)
    coord = handle.coordinator
    service = ClusterService(coord, scheduler_options={"max_task_concurrency": concurrency})
    service.start()
    session = handle.client.startup("materialize", "materialize")
    extra = None

    def sql(text: str) -> None:
        for _ in session.execute(text):
            pass

    def placement() -> dict[str, tuple[str, str]]:
        try:
            status = service.owner.status()
        except NotOwner:
            return {}
        return {
            t["task"]: (capture, t["state"])
            for capture, tasks in status["captures"].items()
            for t in tasks
            if t["role"] == "primary"
        }

    def all_on(capture: str) -> bool:
        now = placement()
        return len(now) == views and all(p == (capture, "replicating") for p in now.values())

    try:
        leases = ConsensusLeaseStore(coord.storage.persist.consensus, cluster="quickstart")
        _wait("the first worker", lambda: "quickstart-0" in leases.alive_captures())
        sql("CREATE TABLE t (k bigint, v bigint)")
        values = ", ".join(f"({i % 10}, {i % 100})" for i in range(rows))
        sql(f"INSERT INTO t VALUES {values}")
        started = time.perf_counter()
        for i in range(views):
            sql(
                f"CREATE MATERIALIZED VIEW v{i} AS "
                f"SELECT k, count(*) AS n, sum(v) AS s FROM t WHERE v > {i % 100} GROUP BY k"
            )
        created_s = time.perf_counter() - started
        started = time.perf_counter()
        _wait("placement", lambda: all_on("quickstart-0"))
        placement_s = time.perf_counter() - started

        extra = subprocess.Popen(
            [sys.executable, "-m", "coordinator_lib.cli", "worker", "--id", "extra-1",
             "--data-dir", str(data_dir), "--lease-ttl-ms", "5000",
             "--parent-pid", str(os.getpid())],
            stdout=(data_dir / "extra-1.log").open("w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait("the second worker", lambda: len((service.owner.status())["captures"]) == 2)

        started = time.perf_counter()
        requests_sent = 0

        def drained() -> bool:
            nonlocal requests_sent
            requests_sent += 1
            return service.owner.drain_capture("quickstart-0") == 0 and all_on("extra-1")

        _wait("the drain", drained)
        drain_s = time.perf_counter() - started

        sql("INSERT INTO t VALUES (1, 99)")
        written = coord.storage.collection_frontiers(coord.catalog.items()[0].id)[1].time
        assert written is not None
        ids = [item.id for item in coord.catalog.items()][1:]
        started = time.perf_counter()
        _wait(
            "fresh views",
            lambda: all(
                (coord.storage.collection_frontiers(id)[1].time or 0) >= written for id in ids
            ),
        )
        fresh_s = time.perf_counter() - started
        return {
            "what": f"drain a worker holding {views} views (max {concurrency} moves in flight)",
            "views": views,
            "rows": rows,
            "max_task_concurrency": concurrency,
            "create_s": created_s,
            "placement_s": placement_s,
            "drain_s": drain_s,
            "fresh_after_drain_s": fresh_s,
        }
    finally:
        session.terminate()
        if extra is not None and extra.poll() is None:
            extra.send_signal(signal.SIGTERM)
            extra.wait(60)
        service.stop()
        handle.shutdown()


def _markdown(document: dict) -> str:
    meta = document["meta"]
    lines = [
        f"Scheduler with real workers ({meta['machine']}; `{meta['command']}`)",
        "",
        "| what | create views | placement | drain | all views fresh after |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in document["runs"]:
        lines.append(
            f"| {r['what']} | {r['create_s']:.1f} s | {r['placement_s']:.1f} s"
            f" | {r['drain_s']:.1f} s | {r['fresh_after_drain_s']:.2f} s |"
        )
    lines += [
        "",
        f"{document['runs'][0]['rows']} rows in the table; SQLite consensus; owner tick 0.1 s;"
        " placement counts from the last CREATE; drain from the first drain request until"
        " every view replicates on the other worker; the last column is one INSERT's"
        " time to reach every view after the drain.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--views", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    runs = []
    for concurrency in args.concurrency:
        data_dir = Path(tempfile.mkdtemp(prefix="tidemark-drain-"))
        try:
            runs.append(run(args.views, args.rows, concurrency, data_dir))
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
    document = {
        "meta": {
            "machine": f"{os.cpu_count()} cores, {platform.machine()},"
            f" Python {platform.python_version()}",
            "command": "python -m bench.scheduler_workers",
        },
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scheduler_workers.json").write_text(json.dumps(document, indent=2))
    markdown = _markdown(document)
    (args.out / "scheduler_workers.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
