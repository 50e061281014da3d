"""DuckDB worker for bench/nexmark.py.

Why a separate process: the bench's main process holds Tidemark, PySpark and
the Spark JVM, so the RSS of anything measured there is mostly theirs. Here
DuckDB runs alone (this Python process imports only duckdb and the RSS
sampler), so the peak RSS it reports is what recomputing a view in DuckDB
costs, plus this interpreter's baseline (reported once as `rss_mb` in the
ready line). Times are taken here too, around the `COPY`, as for SDP.

Protocol: one JSON object per line on stdin, {"views": {table: parquet glob},
"sql": query, "target": parquet path}; one JSON answer per line on stdout,
{"seconds", "peak_mb", "growth_mb"} or {"error"}. The first line out is
{"ready": true, "rss_mb": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import duckdb

from bench.nexmark_rss import PeakRss


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    with PeakRss([os.getpid()]) as idle:
        pass
    print(json.dumps({"ready": True, "rss_mb": idle.peak_mb}), flush=True)
    attached: set[str] = set()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            for name, glob in request["views"].items():
                if name not in attached:  # the lake's files exist once there is a base
                    con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quote(glob)})")
                    attached.add(name)
            copy = f"COPY ({request['sql']}) TO {_quote(request['target'])} (FORMAT parquet)"
            with PeakRss([os.getpid()]) as rss:
                start, cpu_start = time.perf_counter(), time.process_time()
                con.execute(copy)
                seconds = time.perf_counter() - start
                cpu = time.process_time() - cpu_start  # DuckDB's threads included
            answer = {
                "seconds": seconds,
                "cpu_seconds": cpu,
                "peak_mb": rss.peak_mb,
                "growth_mb": rss.growth_mb,
            }
        except duckdb.Error as error:  # the bench raises it with the query's name
            answer = {"error": f"{type(error).__name__}: {error}"[:2000]}
        print(json.dumps(answer), flush=True)
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
