"""Soak: does the demo server's memory stay flat under normal use?

Starts `tidemark serve` as its own process on a fresh data directory with
the demo project (demo/sql: the AUCTION load generator ticking every
second, a webhook source, a table, materialized views and an index), then
runs a scripted user for `--duration` seconds (default an hour):

- every second or so, over pgwire (psycopg): the views (`item_stats`, the
  indexed point lookup, `watched_items`, `item_interest`), an ad-hoc join
  and aggregate over the sources, catalog queries as psql's `\\d` sends,
  an INSERT / DELETE on `watchlist`; a fresh connection every tenth round;
- over HTTP: `POST /api/sql` and webhook POSTs to `item_views`;
- every minute: a short SUBSCRIBE over COPY, and a canceled runaway
  cross join (the cancel path must not leak either).

The server's RSS (/proc/<pid>/status) is sampled every `--sample-every`
seconds into bench/results/soak.csv, plotted to soak.png, and summarised in
soak.json: RSS at the end of the warm-up (the first 10% of the run), at the
end, and the growth rate over the rest (MB per hour, least squares).

    python -m bench.soak --duration 600

`--in-process` keeps Spark out (every step and query in-process, the demo's
index left out: an index is Spark's): the server's own memory alone.
`--tick 1h` slows the load generator so the stored data stays nearly
constant while the user does the same rounds: growth that remains is growth
with time (or with the user's rounds), not with the data.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import requests

from bench.webhook import Server

RESULTS = Path(__file__).parent / "results"
DEMO_SQL = Path(__file__).parent.parent / "demo" / "sql"
WARMUP_FRACTION = 0.1


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """`field` of /proc/<pid>/status in MB: VmRSS, or RssAnon (the heap: what
    malloc and Python hold, not the Parquet files and libraries mapped in)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def tree_mb(path: Path) -> float:
    """Bytes under `path` in MB: the data the server keeps grows with the
    load generator's tables, and so may what it caches of them."""
    total = 0
    # os.walk skips a directory that compaction removes while it is walked
    for directory, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(directory, name)).st_size
    return total / 2**20


def descendants_rss_mb(pid: int) -> float:
    """RSS of the server's child processes (the Spark JVM): the server's
    memory is theirs too, and the serve process's own RSS does not show it."""
    total = 0.0
    for children in Path(f"/proc/{pid}/task").glob("*/children"):  # any thread may fork
        with contextlib.suppress(OSError, RuntimeError):
            for child in children.read_text().split():
                total += rss_mb(int(child)) + descendants_rss_mb(int(child))
    return total


# The server's memory by allocator, from its /metrics
# (coordinator_lib/adapter/process_memory.py), in MB; python_blocks in thousands.
PARTS = ("malloc_in_use", "malloc_free", "sqlite", "arrow", "python_blocks")


def memory_parts(url: str) -> dict[str, float]:
    """The server's `tidemark_process_memory_bytes` gauges: which part grows."""
    parts: dict[str, float] = {}
    with contextlib.suppress(requests.RequestException):
        text = requests.get(f"{url}/metrics", timeout=30).text
        for line in text.splitlines():
            if line.startswith('tidemark_process_memory_bytes{part="'):
                part = line.split('"')[1]
                scale = 1000 if part == "python_blocks" else 2**20
                parts[part] = float(line.rsplit(" ", 1)[1]) / scale
    return parts


def apply_demo(dsn: str, in_process: bool = False, tick: str | None = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for path in sorted(DEMO_SQL.glob("*.sql")):
            text = path.read_text()
            if tick is not None:
                text = text.replace("TICK INTERVAL '1s'", f"TICK INTERVAL '{tick}'")
            if in_process:
                text = "\n".join(s for s in text.split("\n") if not s.startswith("CREATE INDEX"))
            conn.execute(text)


class User:
    """The scripted user: one round of what someone at psql and a browser does."""

    QUERIES = (
        "SELECT * FROM item_stats ORDER BY bids DESC LIMIT 10",
        "SELECT * FROM item_stats WHERE item = 'Signed Memorabilia'",
        "SELECT * FROM watched_items",
        "SELECT * FROM item_interest ORDER BY views DESC",
        "SELECT a.item, count(*), max(b.amount) FROM auctions a JOIN bids b "
        "ON b.auction_id = a.id GROUP BY a.item",
        "SELECT count(*) FROM auction_bids",
        "SELECT c.relname, c.relkind FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'",
        "SHOW MATERIALIZED VIEWS",
        "EXPLAIN SELECT * FROM watched_items",
    )
    ITEMS = ("Signed Memorabilia", "City Bar Crawl", "Best Pizza in Town", "Gift Basket")

    def __init__(self, server: Server, dsn: str) -> None:
        self.server = server
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.rounds = 0
        self.errors: list[str] = []
        self.http = requests.Session()

    def round(self) -> None:
        self.rounds += 1
        if self.rounds % 10 == 0:
            self.conn.close()
            self.conn = psycopg.connect(self.dsn, autocommit=True)
        for query in self.QUERIES:
            self.conn.execute(query).fetchall()
        user_id = self.rounds % 50
        item = random.choice(self.ITEMS)
        self.conn.execute(
            "INSERT INTO watchlist VALUES (%s, %s, %s)", (user_id, item, random.randint(1, 100))
        )
        if self.rounds % 3 == 0:
            self.conn.execute("DELETE FROM watchlist WHERE user_id = %s", (user_id,))
        url = self.server.url
        answer = self.http.post(
            f"{url}/api/sql", json={"query": "SELECT * FROM item_stats"}, timeout=60
        )
        answer.raise_for_status()
        for _ in range(3):
            self.http.post(
                f"{url}/api/webhook/materialize/public/item_views", data=item, timeout=60
            ).raise_for_status()

    def minutely(self) -> None:
        """A SUBSCRIBE over COPY and a runaway cross join, each canceled after a while."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            threading.Timer(3.0, conn.cancel_safe).start()
            with (
                contextlib.suppress(psycopg.errors.QueryCanceled),
                conn.cursor().copy("COPY (SUBSCRIBE item_stats) TO STDOUT") as copy,
            ):
                for _ in copy:
                    pass
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            threading.Timer(2.0, conn.cancel_safe).start()
            with contextlib.suppress(psycopg.errors.QueryCanceled):
                conn.execute("SELECT count(*) FROM bids a, bids b, bids c").fetchall()

    def close(self) -> None:
        self.conn.close()
        self.http.close()


def run(
    duration: float,
    sample_every: float,
    out: Path,
    in_process: bool = False,
    tick: str | None = None,
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    samples: list[Sample] = []
    parts: list[dict[str, float]] = []  # memory_parts, one per sample
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        data_dir = Path(tmp) / "data"
        options = ("--local-max-rows", "1000000000") if in_process else ()
        server = Server(data_dir, *options)
        dsn = f"host=127.0.0.1 port={server.pgwire_port} user=materialize dbname=materialize"
        try:
            apply_demo(dsn, in_process, tick)
            user = User(server, dsn)
            started = time.monotonic()
            done = threading.Event()

            def sample() -> None:  # on its own thread: a slow round must not thin the samples
                while True:
                    seconds = time.monotonic() - started
                    samples.append(_sample(seconds, server.proc.pid, user.rounds, data_dir))
                    parts.append(memory_parts(server.url))
                    print(
                        f"{seconds:7.0f} s  RSS {samples[-1][1]:7.1f} MB  "
                        f"anon {samples[-1][4]:7.1f} MB  data {samples[-1][5]:7.1f} MB  "
                        f"children {samples[-1][3]:7.1f} MB  rounds {user.rounds}  "
                        + "  ".join(f"{k} {v:.1f}" for k, v in parts[-1].items()),
                        flush=True,
                    )
                    if done.wait(sample_every):
                        return

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            next_minute = started
            while (now := time.monotonic()) - started < duration:
                if now >= next_minute:
                    next_minute += 60
                    _attempt(user.minutely, user.errors)
                _attempt(user.round, user.errors)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
            done.set()
            sampler.join()
            samples.append(
                _sample(time.monotonic() - started, server.proc.pid, user.rounds, data_dir)
            )
            parts.append(memory_parts(server.url))
            user.close()
        finally:
            server.stop()
    summary = _summarise(samples, parts, duration, user.errors)
    _write(samples, parts, summary, out)
    return summary


def _sample(seconds: float, pid: int, rounds: int, data_dir: Path) -> Sample:
    return (
        seconds,
        rss_mb(pid),
        rounds,
        descendants_rss_mb(pid),
        rss_mb(pid, "RssAnon"),
        tree_mb(data_dir),
    )


def _attempt(action: Any, errors: list[str]) -> None:
    try:
        action()
    except Exception as error:  # counted, not fatal: the soak is about memory
        errors.append(f"{type(error).__name__}: {error}")


def _slope_mb_per_hour(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (m - mean_m) for t, m in points)
    return cov / var * 3600 if var else 0.0


# seconds, server RSS MB, rounds, children RSS MB, server anonymous RSS MB, data directory MB
Sample = tuple[float, float, int, float, float, float]


def _summarise(
    samples: list[Sample], parts: list[dict[str, float]], duration: float, errors: list[str]
) -> dict[str, Any]:
    warm = [s for s in samples if s[0] >= duration * WARMUP_FRACTION]
    warm_parts = [
        (s[0], p) for s, p in zip(samples, parts, strict=True) if s[0] >= duration * WARMUP_FRACTION
    ]
    by_part = {
        part: {
            "after_warmup": round(points[0][1], 1),
            "end": round(points[-1][1], 1),
            "growth_per_hour": round(_slope_mb_per_hour(points), 1),
        }
        for part in PARTS
        if (points := [(t, p[part]) for t, p in warm_parts if part in p])
    }
    return {
        "duration_s": round(samples[-1][0]),
        "rounds": samples[-1][2],
        "rss_after_warmup_mb": round(warm[0][1], 1) if warm else None,
        "rss_end_mb": round(samples[-1][1], 1),
        "rss_max_mb": round(max(s[1] for s in samples), 1),
        "growth_after_warmup_mb_per_hour": round(
            _slope_mb_per_hour([(s[0], s[1]) for s in warm]), 1
        ),
        "anon_growth_after_warmup_mb_per_hour": round(
            _slope_mb_per_hour([(s[0], s[4]) for s in warm]), 1
        ),
        "data_dir_end_mb": round(samples[-1][5], 1),
        "data_dir_growth_mb_per_hour": round(_slope_mb_per_hour([(s[0], s[5]) for s in warm]), 1),
        # The machine may be shared and busy: growth per unit of work, not per hour.
        "growth_after_warmup_mb_per_100_rounds": round(
            _slope_mb_per_hour([(s[2], s[1]) for s in warm]) / 36, 2
        ),
        "children_rss_end_mb": round(samples[-1][3], 1),
        "children_growth_after_warmup_mb_per_hour": round(
            _slope_mb_per_hour([(s[0], s[3]) for s in warm]), 1
        ),
        # MB (python_blocks: thousands of objects), from the server's /metrics
        "memory_parts_after_warmup": by_part,
        "errors": len(errors),
        "first_errors": errors[:5],
    }


def _write(
    samples: list[Sample], parts: list[dict[str, float]], summary: dict[str, Any], out: Path
) -> None:
    with (out / "soak.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(
            ["seconds", "rss_mb", "rounds", "children_rss_mb", "rss_anon_mb", "data_dir_mb"]
            + [f"{part}_{'k' if part == 'python_blocks' else 'mb'}" for part in PARTS]
        )
        writer.writerows(
            (
                round(t, 1),
                round(m, 1),
                r,
                round(c, 1),
                round(a, 1),
                round(d, 1),
                *(round(p[part], 1) if part in p else "" for part in PARTS),
            )
            for (t, m, r, c, a, d), p in zip(samples, parts, strict=True)
        )
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [t / 60 for t, *_ in samples]
    figure, (axis, below) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    axis.plot(minutes, [s[1] for s in samples], label="tidemark serve")
    axis.plot(minutes, [s[4] for s in samples], label="serve, anonymous")
    axis.plot(minutes, [s[3] for s in samples], label="its children (Spark JVM)")
    axis.plot(minutes, [s[5] for s in samples], label="data directory")
    axis.legend()
    axis.set_ylabel("RSS (MB)")
    axis.set_ylim(bottom=0)
    axis.set_title(
        f"soak: demo server + scripted user, "
        f"{summary['growth_after_warmup_mb_per_hour']} MB/h after warm-up"
    )
    axis.grid(True, alpha=0.3)
    for part in PARTS:
        if part != "python_blocks" and any(part in p for p in parts):
            below.plot(minutes, [p.get(part, float("nan")) for p in parts], label=part)
    if any("python_blocks" in p for p in parts):
        blocks = [p.get("python_blocks", float("nan")) / 10 for p in parts]
        below.plot(minutes, blocks, label="Python objects (10,000s)")
    below.legend()
    below.set_xlabel("minutes")
    below.set_ylabel("serve's memory by allocator (MB)")
    below.set_ylim(bottom=0)
    below.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(out / "soak.png", dpi=100)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=3600, help="seconds (default 3600)")
    parser.add_argument("--sample-every", type=float, default=5, help="seconds between samples")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--in-process", action="store_true", help="no Spark: the server's own memory alone"
    )
    parser.add_argument(
        "--tick",
        help="the AUCTION generator's tick interval (default 1s): a slower tick stores less "
        "data for the same user, to tell growth with the data from growth with time",
    )
    args = parser.parse_args()
    summary = run(args.duration, args.sample_every, args.out, args.in_process, args.tick)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
