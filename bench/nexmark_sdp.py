"""Spark Declarative Pipelines worker for bench/nexmark.py.

Why a separate process: SDP runs on Spark Connect, and one Python process
cannot hold both the classic SparkSession Tidemark uses and a local Spark
Connect server. This process starts the Connect session once (so JVM
start-up is not billed to every refresh), then for each request refreshes
one pipeline with SDP's own runner, the functions `spark-pipelines run` calls
(load the spec, create the dataflow graph, register the definitions, start
the run, follow its events), and answers with the time and the peak RSS of
its process tree (this Python process and its JVM).

Protocol: one JSON object per line on stdin, {"spec": path, "name": view};
one JSON answer per line on stdout. The first line out is {"ready": true}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.nexmark_rss import PeakRss, process_tree


def refresh(spark: Any, spec_path: Path) -> list[str]:
    """One run of the pipeline at `spec_path`, as `spark-pipelines run` does it
    minus creating and stopping the session; returns the run's event messages."""
    from pyspark.pipelines import cli
    from pyspark.pipelines.spark_connect_graph_element_registry import (
        SparkConnectGraphElementRegistry,
    )
    from pyspark.pipelines.spark_connect_pipeline import create_dataflow_graph, start_run

    spec = cli.load_pipeline_spec(spec_path)
    graph = create_dataflow_graph(
        spark,
        default_catalog=spec.catalog,
        default_database=spec.database,
        sql_conf=spec.configuration,
    )
    registry = SparkConnectGraphElementRegistry(spark, graph)
    cli.register_definitions(spec_path, registry, spec, spark, graph)
    events = start_run(
        spark,
        graph,
        full_refresh=[],
        full_refresh_all=False,
        refresh=[],
        dry=False,
        storage=spec.storage,
    )
    return [
        r["pipeline_event_result"].event.message for r in events if "pipeline_event_result" in r
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr  # the runner logs to stdout; keep the protocol clean
    try:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.remote(args.master)
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
    except Exception as error:  # reported to the bench, which records why SDP did not run
        out.write(json.dumps({"error": f"{type(error).__name__}: {error}"}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    try:
        for line in sys.stdin:
            request = json.loads(line)
            tree = process_tree(os.getpid())
            try:
                with PeakRss(tree) as rss:
                    start = time.perf_counter()
                    messages = refresh(spark, Path(request["spec"]))
                    seconds = time.perf_counter() - start
                if not messages or "COMPLETED" not in messages[-1]:
                    raise RuntimeError(f"the run ended with {messages[-3:]}")
                answer = {"seconds": seconds, "peak_mb": rss.peak_mb, "growth_mb": rss.growth_mb}
            except Exception as error:  # the bench raises it with the query's name
                answer = {"error": f"{type(error).__name__}: {error}"[:2000]}
            out.write(json.dumps(answer) + "\n")
            out.flush()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
