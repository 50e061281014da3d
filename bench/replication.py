"""PostgreSQL source benchmark: an upstream pgbench workload replicated into
Tidemark, side by side with the upstream's own commit rate.

Starts a throwaway PostgreSQL with `wal_level = logical` (pgbench's TPC-B
tables, REPLICA IDENTITY FULL, one publication) and `tidemark serve` in its
own process with a PostgreSQL source over all four tables and a
materialized view counting `pgbench_history` (one row per pgbench
transaction). While pgbench runs, a sampler reads the upstream's history
count every 100 ms; each sample's lag is the time until Tidemark's view
first showed at least that many rows (read over pgwire, strict
serializable). Reported: upstream transactions/s (pgbench's tps), the
transactions/s Tidemark made visible (history rows over the time from
pgbench's start until the view had them all), changes/s (4 upstream row
changes per TPC-B transaction), lag p50/p99.

Writes bench/results/replication.json and replication.md; `--seconds` and
`--clients` shrink it (the test suite runs it tiny so it does not rot).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.webhook import Server
from tests.fixtures.postgres import LOGICAL_SETTINGS, PgCluster, find_pg_bindir

RESULTS = Path(__file__).parent / "results"
PGBENCH = shutil.which("pgbench") or "/usr/bin/pgbench"
CHANGES_PER_TRANSACTION = 4  # TPC-B: three UPDATEs and one INSERT
TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")


def _pgbench_bin(bindir: Path) -> str:
    local = bindir / "pgbench"
    return str(local) if local.exists() else PGBENCH


def _count(conn: psycopg.Connection[Any], query: str) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def run_bench(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    bindir = find_pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found (make setup installs them)")
    os.environ.setdefault("TIDEMARK_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    load_before = os.getloadavg()[0]
    upstream = PgCluster(bindir)
    upstream.start(LOGICAL_SETTINGS)
    server = None
    try:
        url = upstream.url("postgres")
        pgbench = _pgbench_bin(bindir)
        subprocess.run([pgbench, "-i", "-s", "1", "-q", url], check=True, capture_output=True)
        with psycopg.connect(url, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
            conn.execute(f"CREATE PUBLICATION bench FOR TABLE {', '.join(TABLES)}")
        server = Server(work / "data")
        dsn = f"host=127.0.0.1 port={server.pgwire_port} user=materialize dbname=materialize"
        with psycopg.connect(dsn, autocommit=True) as tm:
            tm.execute(
                f"CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', PORT {upstream.port}, "
                "USER 'postgres', DATABASE 'postgres', SSL MODE 'disable')"
            )
            tm.execute(
                "CREATE SOURCE bench FROM POSTGRES CONNECTION pg (PUBLICATION 'bench') "
                "FOR ALL TABLES"
            )
            tm.execute("CREATE MATERIALIZED VIEW history AS SELECT count(*) FROM pgbench_history")
            _count(tm, "SELECT * FROM history")  # the snapshot is in
        samples: list[tuple[float, int]] = []  # (time, upstream history rows)
        seen: list[tuple[float, int]] = []  # (time, Tidemark's view)
        done = threading.Event()

        def sample_upstream() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                while not done.is_set():
                    samples.append(
                        (time.monotonic(), _count(conn, "SELECT count(*) FROM pgbench_history"))
                    )
                    time.sleep(0.1)

        def watch_tidemark() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while not done.is_set():
                    seen.append((time.monotonic(), _count(conn, "SELECT * FROM history")))
                    time.sleep(0.02)  # a busy loop of reads took a fifth of the server's CPU

        threads = [
            threading.Thread(target=sample_upstream),
            threading.Thread(target=watch_tidemark),
        ]
        for thread in threads:
            thread.start()
        profiler = None
        if args.profile is not None:  # the server while pgbench runs, as collapsed stacks
            profiler = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "py-spy"),
                    "record",
                    "--pid",
                    str(server.proc.pid),
                    "--duration",
                    str(args.seconds),
                    "--format",
                    "raw",
                    "--nonblocking",
                    "-o",
                    str(args.profile),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        started = time.monotonic()
        result = subprocess.run(
            [
                pgbench,
                "-n",
                "-c",
                str(args.clients),
                "-j",
                str(args.clients),
                "-T",
                str(args.seconds),
                url,
            ],
            capture_output=True,
            text=True,
            timeout=args.seconds + 120,
        )
        pgbench_done = time.monotonic()
        if profiler is not None:
            profiler.wait(60)
        if result.returncode != 0:
            raise RuntimeError(f"pgbench failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        tps_line = next(line for line in result.stdout.splitlines() if line.startswith("tps ="))
        upstream_tps = float(tps_line.split()[2])
        with psycopg.connect(url, autocommit=True) as conn:
            total = _count(conn, "SELECT count(*) FROM pgbench_history")
        deadline = time.monotonic() + 300
        while not seen or seen[-1][1] < total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Tidemark never showed {total} history rows")
            time.sleep(0.05)
        caught_up = next(t for t, n in seen if n >= total)
        done.set()
        for thread in threads:
            thread.join(30)
        lags = []
        for at, rows in samples:
            if at > pgbench_done:
                break
            shown = next((t for t, n in seen if t >= at and n >= rows), None)
            if shown is not None:
                lags.append((shown - at) * 1000)
        visible_tps = total / (caught_up - started) if total else 0.0
        quantiles = statistics.quantiles(lags, n=100) if len(lags) >= 2 else [0.0] * 99
        with psycopg.connect(dsn, autocommit=True) as tm:
            replicated = {t: _count(tm, f"SELECT count(*) FROM {t}") for t in TABLES}
        with psycopg.connect(url, autocommit=True) as conn:
            upstream_rows = {t: _count(conn, f"SELECT count(*) FROM {t}") for t in TABLES}
        return {
            "machine": {
                "cores": os.cpu_count(),
                "arch": platform.machine(),
                "python": platform.python_version(),
                "load_average_before": round(load_before, 2),
            },
            "clients": args.clients,
            "seconds": args.seconds,
            "transactions": total,
            "upstream_tps": round(upstream_tps, 1),
            "visible_tps": round(visible_tps, 1),
            "changes_per_s": round(visible_tps * CHANGES_PER_TRANSACTION, 1),
            "catch_up_after_pgbench_s": round(caught_up - pgbench_done, 2),
            "lag_p50_ms": round(statistics.median(lags), 1) if lags else None,
            "lag_p99_ms": round(quantiles[98], 1) if lags else None,
            "lag_samples": len(lags),
            "rows_match": replicated == upstream_rows,
        }
    finally:
        if server is not None:
            server.stop()
        upstream.stop()


def _markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    return "\n".join(
        [
            f"PostgreSQL source benchmark (pgbench TPC-B, {doc['clients']} clients, "
            f"{doc['seconds']} s; {m['cores']} cores, {m['arch']}, Python {m['python']}; "
            f"upstream, Tidemark and clients share the machine; load average "
            f"{m['load_average_before']:g} before the run; `make bench-replication`)",
            "",
            "| upstream commits/s | made visible in Tidemark /s | row changes/s | lag p50 "
            "| lag p99 | catch-up after pgbench | tables equal |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            f"| {doc['upstream_tps']} | {doc['visible_tps']} | {doc['changes_per_s']} | "
            f"{doc['lag_p50_ms']} ms | {doc['lag_p99_ms']} ms | "
            f"{doc['catch_up_after_pgbench_s']} s | "
            f"{'yes' if doc['rows_match'] else 'NO'} |",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy's collapsed stacks of the server"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tidemark-bench-replication-") as tmp:
        doc = run_bench(args, Path(tmp))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "replication.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.out / "replication.md").write_text(_markdown(doc))
    print(_markdown(doc))
    return 0 if doc["rows_match"] else 1


if __name__ == "__main__":
    sys.exit(main())
