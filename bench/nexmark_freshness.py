"""Freshness end to end: how long after a write is acknowledged does the
change show up in a SUBSCRIBE of a view that depends on it?

Why: a view that is cheap to maintain is only useful if changes reach its
readers quickly. This starts a real `tidemark serve` (bench/webhook.py's
Server) on 127.0.0.1 with Nexmark's `bid` as a table and as a webhook source,
and the same aggregate view over each; one pgwire connection (psycopg) holds
`COPY (SUBSCRIBE view) TO STDOUT` open on each view. Writes go one at a time,
each on an auction id nothing else uses, so its row in the view is new:

- INSERT over pgwire: from the INSERT's acknowledgement (execute returned);
- webhook: from the 200 of the POST;

to the subscriber receiving that auction's row. Reported: p50, p99 and max.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import requests

from bench.webhook import Server
from coordinator_lib.storage.nexmark import NexmarkGenerator

COLUMNS = (
    "auction bigint NOT NULL, bidder bigint NOT NULL, price bigint NOT NULL,"
    " date_time bigint NOT NULL"
)
VIEW = "SELECT auction, count(*) AS bids, max(price) AS top FROM {source} GROUP BY auction"
FIRST_MARKER = 10_000_000_000  # auction ids no generated bid uses


class Subscriber:
    """A thread reading `COPY (SUBSCRIBE view) TO STDOUT`; records when each
    auction's row first arrives."""

    def __init__(self, port: int, view: str) -> None:
        self.conn = psycopg.connect(
            host="127.0.0.1", port=port, user="materialize", dbname="materialize", autocommit=True
        )
        self.view = view
        self.arrived: dict[int, float] = {}
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with self.conn.cursor().copy(f"COPY (SUBSCRIBE {self.view}) TO STDOUT") as copy:
                for row in copy.rows():
                    now = time.perf_counter()
                    # mz_timestamp, mz_diff, auction, bids, top
                    auction = int(row[2])
                    with self.cond:
                        self.arrived.setdefault(auction, now)
                        self.cond.notify_all()
        except psycopg.errors.QueryCanceled:
            pass
        except BaseException as error:  # reported by wait()
            self.error = error
            with self.cond:
                self.cond.notify_all()

    def wait(self, auction: int, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        with self.cond:
            while auction not in self.arrived:
                if self.error is not None:
                    raise RuntimeError(f"SUBSCRIBE {self.view} failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"auction {auction} never reached SUBSCRIBE {self.view}")
                self.cond.wait(left)
            return self.arrived[auction]

    def close(self) -> None:
        self.conn.cancel_safe(timeout=10)
        self.thread.join(30)
        self.conn.close()


def _summary(name: str, latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    n = len(ordered)
    return {
        "name": name,
        "samples": n,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(n - 1, int(n * 0.99))] * 1000,
        "max_ms": ordered[-1] * 1000,
        "all_ms": [round(x * 1000, 2) for x in latencies],
    }


def measure_freshness(work: Path, samples: int, seed: int, base_events: int = 5000) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    server = Server(work / "env")
    try:
        pg_port = int(server.proc.args[server.proc.args.index("--pgwire-port") + 1])
        server.sql(f"CREATE TABLE bid ({COLUMNS})")
        server.sql(f"CREATE SOURCE bid_hook FROM WEBHOOK BODY FORMAT JSON ({COLUMNS})")
        bids = NexmarkGenerator(seed).events(0, base_events).bid
        values = ", ".join(
            f"({a}, {b}, {p}, {d})"
            for a, b, p, d in zip(
                *(bids.column(c).to_pylist() for c in ("auction", "bidder", "price", "date_time")),
                strict=True,
            )
        )
        server.sql(f"INSERT INTO bid VALUES {values}")
        server.sql(f"CREATE MATERIALIZED VIEW fresh_sql AS {VIEW.format(source='bid')}")
        server.sql(f"CREATE MATERIALIZED VIEW fresh_hook AS {VIEW.format(source='bid_hook')}")
        rng = random.Random(seed)
        writer = psycopg.connect(
            host="127.0.0.1",
            port=pg_port,
            user="materialize",
            dbname="materialize",
            autocommit=True,
        )
        hook = requests.Session()
        url = f"{server.url}/api/webhook/materialize/public/bid_hook"
        paths = []
        for name, view in (("INSERT over pgwire", "fresh_sql"), ("webhook 200", "fresh_hook")):
            subscriber = Subscriber(pg_port, view)
            latencies = []
            try:
                for i in range(samples):
                    auction = FIRST_MARKER + (1 if view == "fresh_hook" else 0) * 10**6 + i
                    price, at = rng.randint(100, 10**6), 1_700_000_000_000 + i
                    if view == "fresh_sql":
                        writer.execute(f"INSERT INTO bid VALUES ({auction}, 1000, {price}, {at})")
                    else:
                        body = {"auction": auction, "bidder": 1000, "price": price, "date_time": at}
                        answer = hook.post(url, data=json.dumps(body), timeout=60)
                        if answer.status_code != 200:
                            raise RuntimeError(f"webhook answered {answer.status_code}")
                    acked = time.perf_counter()
                    latencies.append(subscriber.wait(auction, 60) - acked)
                    time.sleep(rng.uniform(0, 0.05))  # no lock-step with the server's timers
            finally:
                subscriber.close()
            paths.append(_summary(name, latencies))
        writer.close()
        return {
            "samples": samples,
            "base_bids": bids.num_rows,
            "view_sql": VIEW.format(source="bid"),
            "paths": paths,
        }
    except Exception as error:  # a broken server must not hide the other results
        return {"error": f"{type(error).__name__}: {error}"[:1000]}
    finally:
        server.stop()
