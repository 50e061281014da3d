"""Nexmark benchmark: Tidemark against what users would pick instead.

Why: a Tidemark step only earns its keep if it beats recomputing the view
with the tools a team already has. So, in one run on one machine, over the
same Nexmark events (coordinator_lib/storage/nexmark.py, seed-deterministic),
for each query q0-q9 and q20 (bench/nexmark_queries.py) as a materialized view:

- Tidemark: the view's dataflow, planned from SQL by coordinator_lib.sql,
  hydrated once, then one incremental `compute.dataflow.step` per delta
  (step picks Spark or the in-process engine itself; its output lands in the
  view's persist shard);
- Spark: a full recompute of the same SQL, plain PySpark over the Parquet
  lake holding the same events, written out as Parquet;
- Spark Declarative Pipelines: the same SQL as a `CREATE MATERIALIZED VIEW`
  in a pipeline spec, refreshed by SDP's runner (bench/nexmark_sdp.py, one
  long-lived Spark Connect session so JVM start-up is not counted per
  refresh); once per run the `spark-pipelines run` CLI also refreshes all
  views, timed with its start-up;
- DuckDB: a full recompute (`COPY (query) TO parquet`) over the same lake,
  in a worker process of its own (bench/nexmark_duckdb.py).

The base holds `--events` events; each delta appends the next 1%, 0.1% and
0.01% of that many events (Nexmark streams only insert), `--repeat` times per
size. Reported per query and delta: medians, each engine's time over
Tidemark's, and memory: for Tidemark and Spark, which share this process tree
(Python and the Spark JVM), how far its RSS rose during the operation; for
SDP and DuckDB, the peak RSS of their own worker process. After hydration
and the first delta of each size every engine's view is compared with
Tidemark's (as multisets, numbers to 6 places); a difference raises
ViewMismatch, so wrong answers fail the bench, and a query the SQL front end
refuses raises QueryNotPlanned before anything runs. Then freshness end to
end (bench/nexmark_freshness.py). Writes
bench/results/nexmark.json, nexmark.md and nexmark.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import SparkContext
from pyspark.sql import SparkSession

from bench.ivm import ViewMismatch, _label
from bench.nexmark_queries import QUERIES, Query
from bench.nexmark_rss import PeakRss, process_tree
from coordinator_lib.compute.arranged import state_sizes
from coordinator_lib.compute.dataflow import DataflowDescription, step
from coordinator_lib.persist import PersistClient, Shard
from coordinator_lib.repr import Frontier, GlobalId
from coordinator_lib.spark_session import get_or_create_spark
from coordinator_lib.sql import CreateViewPlan, InMemoryCatalog, plan_statement
from coordinator_lib.storage.nexmark import (
    AUCTION_DESC,
    BID_DESC,
    PERSON_DESC,
    NexmarkBatch,
    NexmarkGenerator,
)

RESULTS = Path(__file__).parent / "results"
DESCS = {"person": PERSON_DESC, "auction": AUCTION_DESC, "bid": BID_DESC}
FRACTIONS = (0.01, 0.001, 0.0001)
ENGINES = ("tidemark", "spark", "sdp", "duckdb")
# The memory each engine is reported with: the growth of the shared main
# process tree during the operation, or the peak RSS of the engine's own worker.
MEMORY = {"tidemark": "growth", "spark": "growth", "sdp": "peak", "duckdb": "peak"}
ENGINE_NAMES = {
    "tidemark": "Tidemark step",
    "spark": "Spark recompute",
    "sdp": "SDP refresh",
    "duckdb": "DuckDB recompute",
}

__all__ = ["QueryNotPlanned", "ViewMismatch", "canonical", "main", "run_bench"]


def _number(value: Any) -> Any:
    if isinstance(value, float | Decimal):
        return round(float(value), 6)
    return value


def canonical(table: pa.Table, diff_column: str | None = None) -> Counter:
    """A result as a multiset of rows, by position (names differ per engine),
    numbers rounded to 6 places (numeric, double and decimal agree then)."""
    names = [n for n in table.column_names if n != diff_column]
    columns = [table.column(n).to_pylist() for n in names]
    rows = [tuple(_number(v) for v in row) for row in zip(*columns, strict=True)]
    if diff_column is None:
        return Counter(rows)
    result: Counter = Counter()
    for row, diff in zip(rows, table.column(diff_column).to_pylist(), strict=True):
        result[row] += diff
    return +result


def check_equal(expected: Counter, got: Counter, what: str) -> int:
    """Raise ViewMismatch unless the multisets are equal; returns the rows."""
    if expected != got:
        missing, extra = expected - got, got - expected
        raise ViewMismatch(
            f"{what}: differs from Tidemark's view in {sum(missing.values())} missing and"
            f" {sum(extra.values())} extra rows (of {sum(expected.values())}), e.g."
            f" missing {list(missing)[:3]}, extra {list(extra)[:3]}"
        )
    return sum(expected.values())


# ------------------------------------------------------------------ engines
class Lake:
    """The events as Parquet files, one directory per table and one file per
    append: what the recomputing engines read."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.parts = 0
        for name in DESCS:
            (root / name).mkdir(parents=True, exist_ok=True)

    def path(self, table: str) -> Path:
        return self.root / table

    def append(self, batch: NexmarkBatch) -> None:
        for name, table in batch.tables().items():
            if table.num_rows:
                pq.write_table(table, self.path(name) / f"part-{self.parts:05d}.parquet")
        self.parts += 1


@dataclass
class TidemarkView:
    query: Query
    description: DataflowDescription
    inputs: dict[GlobalId, Shard]
    output: Shard


class QueryNotPlanned(RuntimeError):
    """A query the SQL front end refuses: the bench fails rather than report
    fewer queries than asked for."""


def plan_query(query: Query, catalog: InMemoryCatalog) -> CreateViewPlan:
    """The query as a materialized view, planned by the real SQL front end."""
    sql = f"CREATE MATERIALIZED VIEW {query.name} AS {query.render('tidemark')}"
    try:
        plan = plan_statement(sql, catalog)
    except Exception as error:  # any refusal, with the planner's message
        reason = f"{type(error).__name__}: {error}".splitlines()[0]
        raise QueryNotPlanned(f"{query.name} does not plan: {reason}") from error
    assert isinstance(plan, CreateViewPlan)
    return plan


def check_plannable(queries: list[Query]) -> None:
    """Plan every query before anything runs; QueryNotPlanned names all refusals."""
    catalog = InMemoryCatalog()
    for name, desc in DESCS.items():
        catalog.add_table(name, desc)
    refusals = []
    for query in queries:
        try:
            plan_query(query, catalog)
        except QueryNotPlanned as error:
            refusals.append(str(error))
    if refusals:
        raise QueryNotPlanned("; ".join(refusals))


class Tidemark:
    """The three tables as persist shards; one dataflow per planned query."""

    def __init__(self, work: Path, queries: list[Query]) -> None:
        self.client = PersistClient.open(work / "persist")
        self.shards = {n: self.client.open_shard(n, d) for n, d in DESCS.items()}
        self.views: dict[str, TidemarkView] = {}
        self.queries = queries

    def append(self, batch: NexmarkBatch) -> int:
        """Append a batch to every table at the next time (all uppers move)."""
        times = {shard.upper().time for shard in self.shards.values()}
        assert len(times) == 1, times
        (t,) = times
        assert t is not None
        for name, table in batch.tables().items():
            time_col = pa.array([t] * table.num_rows, pa.int64())
            diff_col = pa.array([1] * table.num_rows, pa.int64())
            full = table.append_column("__time", time_col).append_column("__diff", diff_col)
            self.shards[name].compare_and_append_table(full, Frontier.at(t), Frontier.at(t + 1))
        return t

    def plan(self, as_of: int) -> None:
        """Plan every query with the real SQL front end (QueryNotPlanned if
        it refuses one)."""
        catalog = InMemoryCatalog()
        ids = {catalog.add_table(n, d).id: self.shards[n] for n, d in DESCS.items()}
        for query in self.queries:
            plan = plan_query(query, catalog)
            view_id = catalog.allocate_id()
            description = DataflowDescription(
                view_id, plan.expr, as_of, sink_id=view_id, debug_name=query.name
            )
            output = self.client.open_shard(query.name, description.desc, initial_since=as_of)
            inputs = {i: ids[i] for i in description.imports}
            self.views[query.name] = TidemarkView(query, description, inputs, output)

    def step(self, spark: SparkSession | None, name: str) -> dict[str, Any]:
        """One step of the view (without a Spark session: in-process, its
        hydration included); what it wrote, read, and the view's state after."""
        view = self.views[name]
        limit = {} if spark is not None else {"local_max_rows": 10**12}
        result = step(spark, view.description, view.inputs, view.output, **limit)  # type: ignore[arg-type]
        if result is None or not result.landed:
            raise RuntimeError(f"Tidemark step of {name} did not advance the view")
        reads = result.reads  # in-process steps count what they read
        sizes = state_sizes(view.output).values()
        return {
            "rows_written": result.rows_written,
            "where": str(getattr(result, "engine", "spark")),
            "rows_read": None if reads is None else dataclasses.asdict(reads),
            "state_rows": sum(s.rows for s in sizes),
            "state_bytes": sum(s.bytes for s in sizes),
        }

    def contents(self, name: str, as_of: int) -> Counter:
        return canonical(self.views[name].output.snapshot_table(as_of), "__diff")

    def close(self) -> None:
        self.client.close()


class SparkRecompute:
    """The query in plain Spark SQL over the lake, written out as Parquet."""

    def __init__(self, spark: SparkSession | None, lake: Lake, out: Path) -> None:
        self.spark, self.lake, self.out = spark, lake, out

    def run(self, query: Query) -> None:
        assert self.spark is not None, "the Spark recompute needs a session"
        self._run(self.spark, query)

    def _run(self, spark: SparkSession, query: Query) -> None:
        for name in DESCS:
            spark.read.parquet(str(self.lake.path(name))).createOrReplaceTempView(name)
        frame = spark.sql(query.render("spark"))
        frame.write.mode("overwrite").parquet(str(self.out / query.name))

    def contents(self, query: Query) -> Counter:
        return canonical(pq.read_table(self.out / query.name))


class Worker:
    """A bench worker process (`python -m <module>`): one JSON request and
    answer per line; the first line it writes says whether it is ready."""

    def __init__(self, module: str, args: list[str], work: Path, what: str) -> None:
        self.work, self.what = work, what
        work.mkdir(parents=True, exist_ok=True)
        self.log = (work / "worker.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=work,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        )
        self.error: str | None = None
        self.hello = self._read()
        if not self.hello.get("ready"):
            self.error = self.hello.get("error", f"the {what} worker did not start")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            return {"error": f"the {self.what} worker exited (see {self.work / 'worker.log'})"}
        return json.loads(line)

    def request(self, request: dict[str, Any], failing: str) -> dict[str, Any]:
        """The worker's answer; RuntimeError (saying `failing`) if it reports an error."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise RuntimeError(f"{failing} failed: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class DuckDBRecompute(Worker):
    """The query in DuckDB over the lake, written out as Parquet, in its own
    process (bench/nexmark_duckdb.py) so its peak RSS is DuckDB's alone."""

    def __init__(self, lake: Lake, out: Path, work: Path, threads: int) -> None:
        super().__init__("bench.nexmark_duckdb", ["--threads", str(threads)], work, "DuckDB")
        if self.error:
            self.close()
            raise RuntimeError(self.error)
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.lake = lake

    def run(self, query: Query) -> dict[str, Any]:
        """Time and peak RSS of the recompute, as measured in the worker."""
        views = {name: str(self.lake.path(name) / "*.parquet") for name in DESCS}
        target = str(self.out / f"{query.name}.parquet")
        request = {"views": views, "sql": query.render("duckdb"), "target": target}
        return self.request(request, f"DuckDB recompute of {query.name}")

    def contents(self, query: Query) -> Counter:
        return canonical(pq.read_table(self.out / f"{query.name}.parquet"))


def sdp_sql(query: Query, lake: Lake) -> str:
    """A pipeline SQL file: the tables as temporary views over the lake, and
    the query as a materialized view."""
    views = "".join(
        f"CREATE TEMPORARY VIEW {name} AS SELECT * FROM parquet.`{lake.path(name)}`;\n"
        for name in DESCS
    )
    return f"{views}CREATE MATERIALIZED VIEW {query.name} AS {query.render('spark')};\n"


def write_spec(directory: Path, name: str, sql: str) -> Path:
    """A Spark Declarative Pipelines project: spec file and one SQL file."""
    (directory / "transformations").mkdir(parents=True, exist_ok=True)
    (directory / "transformations" / f"{name}.sql").write_text(sql)
    spec = directory / "spark-pipeline.yml"
    spec.write_text(
        f"name: {name}\nstorage: file://{directory / 'storage'}\n"
        "libraries:\n  - glob:\n      include: transformations/**\n"
    )
    return spec


class Sdp(Worker):
    """Talks to bench/nexmark_sdp.py: one JSON request and answer per line."""

    def __init__(self, work: Path, master: str) -> None:
        super().__init__("bench.nexmark_sdp", ["--master", master], work, "SDP")

    def refresh(self, query: Query, lake: Lake) -> dict[str, Any]:
        spec = write_spec(self.work / query.name, query.name, sdp_sql(query, lake))
        return self.request({"spec": str(spec), "name": query.name}, f"SDP refresh of {query.name}")

    def contents(self, query: Query) -> Counter:
        return canonical(pq.read_table(self.work / "spark-warehouse" / query.name))


def sdp_cli_run(work: Path, queries: list[Query], lake: Lake) -> dict[str, Any]:
    """All views in one pipeline refreshed by the `spark-pipelines run` CLI
    (its own JVM and Spark Connect server): wall time including start-up."""
    cli = Path(sys.executable).parent / "spark-pipelines"
    if not cli.exists():
        return {"ok": False, "error": f"{cli} not found"}
    directory = work / "sdp-cli"
    tables = "".join(
        f"CREATE TEMPORARY VIEW {n} AS SELECT * FROM parquet.`{lake.path(n)}`;\n" for n in DESCS
    )
    views = "".join(f"CREATE MATERIALIZED VIEW {q.name} AS {q.render('spark')};\n" for q in queries)
    spec = write_spec(directory, "nexmark", tables + views)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    started = time.perf_counter()
    with (directory / "cli.log").open("wb") as log:
        proc = subprocess.run(
            [str(cli), "run", "--spec", str(spec)],
            cwd=directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=900,
        )
    seconds = time.perf_counter() - started
    log_text = (directory / "cli.log").read_text(errors="replace")
    ok = proc.returncode == 0 and "Run is COMPLETED" in log_text
    return {
        "ok": ok,
        "returncode": proc.returncode,
        "seconds": seconds,
        "views": len(queries),
        "warehouse": str(directory / "spark-warehouse"),
        "error": None if ok else log_text[-2000:],
    }


# ---------------------------------------------------------------- the runs
@dataclass
class Cell:
    """One query at one delta size: every repeat's measurements."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    # CPU seconds of the same operations (Tidemark: this process; DuckDB: its
    # worker, all its threads): what the work cost, whatever the machine's
    # load did to the wall clock.
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)
    peak_mb: dict[str, list[float]] = field(default_factory=dict)
    growth_mb: dict[str, list[float]] = field(default_factory=dict)
    rows_written: list[int] = field(default_factory=list)
    where: set[str] = field(default_factory=set)
    # Rows each in-process step read: deltas, inputs' old contents, state.
    rows_read: list[dict[str, int]] = field(default_factory=list)
    checked_rows: int | None = None
    state_rows: int = 0  # the view's arranged state after its last step
    state_bytes: int = 0

    def add(
        self, engine: str, seconds: float, peak: float, growth: float, cpu: float | None = None
    ) -> None:
        self.seconds.setdefault(engine, []).append(seconds)
        if cpu is not None:
            self.cpu_seconds.setdefault(engine, []).append(cpu)
        self.peak_mb.setdefault(engine, []).append(peak)
        self.growth_mb.setdefault(engine, []).append(growth)

    def summary(self) -> dict[str, Any]:
        med = {e: statistics.median(v) for e, v in self.seconds.items()}
        base = med.get("tidemark")
        return {
            "seconds": med,
            "seconds_all": self.seconds,
            "cpu_seconds": {e: statistics.median(v) for e, v in self.cpu_seconds.items()},
            "cpu_seconds_all": self.cpu_seconds,
            "ratio_to_tidemark": {e: s / base for e, s in med.items()} if base else {},
            "peak_rss_mb": {e: max(v) for e, v in self.peak_mb.items()},
            "rss_growth_mb": {e: max(v) for e, v in self.growth_mb.items()},
            "memory_mb": {  # the headline: see MEMORY
                e: max(self.growth_mb[e] if MEMORY[e] == "growth" else self.peak_mb[e])
                for e in self.seconds
            },
            "rows_written": int(statistics.median(self.rows_written)) if self.rows_written else 0,
            "tidemark_ran_on": "+".join(sorted(self.where)),
            "tidemark_rows_read": {
                k: int(statistics.median(r[k] for r in self.rows_read))
                for k in (self.rows_read[0] if self.rows_read else {})
            },
            "checked_rows": self.checked_rows,
            "state_rows": self.state_rows,
            "state_bytes": self.state_bytes,
        }


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, spark: SparkSession | None) -> None:
        self.args = args
        self.spark = spark
        self.queries = [q for q in QUERIES if q.name in args.queries]
        self.generator = NexmarkGenerator(args.seed, args.rate)
        self.lake = Lake(work / "lake")
        self.tidemark = Tidemark(work, self.queries)
        self.spark_engine = SparkRecompute(spark, self.lake, work / "spark-out")
        self.engines = [e for e in ENGINES if e in args.engines]
        self.duckdb: DuckDBRecompute | None = None
        if "duckdb" in self.engines:
            self.duckdb = DuckDBRecompute(
                self.lake, work / "duckdb-out", work / "duckdb", threads=os.cpu_count() or 2
            )
        self.sdp: Sdp | None = None
        self.sdp_error: str | None = None
        if "sdp" in self.engines:
            self.sdp = Sdp(work / "sdp", args.master)
            if self.sdp.error:
                self.sdp_error = self.sdp.error
                self.sdp.close()
                self.sdp = None
        self.next_event = 0
        self.work = work

    def close(self) -> None:
        if self.sdp is not None:
            self.sdp.close()
        if self.duckdb is not None:
            self.duckdb.close()
        self.tidemark.close()

    def _main_tree(self) -> list[int]:
        """This process and its Spark JVM, without the workers (measured apart)."""
        workers = [w.proc.pid for w in (self.sdp, self.duckdb) if w is not None]
        return process_tree(os.getpid(), workers)

    def append(self, events: int) -> tuple[int, NexmarkBatch]:
        batch = self.generator.events(self.next_event, events)
        self.next_event += events
        t = self.tidemark.append(batch)
        self.lake.append(batch)
        return t, batch

    def measure(self, cell: Cell, name: str) -> None:
        """Every engine once on query `name`."""
        query = self.tidemark.views[name].query
        tree = self._main_tree()
        runs: dict[str, Callable[[], Any]] = {
            "tidemark": lambda: self.tidemark.step(self.spark, name),
            "spark": lambda: self.spark_engine.run(query),
        }
        sdp, duck = self.sdp, self.duckdb
        workers: dict[str, Callable[[], dict[str, Any]] | None] = {
            "sdp": (lambda: sdp.refresh(query, self.lake)) if sdp is not None else None,
            "duckdb": (lambda: duck.run(query)) if duck is not None else None,
        }
        for engine in self.engines:
            if engine in workers:  # timed and measured in its own process
                work = workers[engine]
                if work is not None:
                    answer = work()
                    cell.add(
                        engine,
                        answer["seconds"],
                        answer["peak_mb"],
                        answer["growth_mb"],
                        answer.get("cpu_seconds"),
                    )
                continue
            with PeakRss(tree) as rss:
                start, cpu_start = time.perf_counter(), time.process_time()
                result = runs[engine]()
                seconds = time.perf_counter() - start
                cpu = time.process_time() - cpu_start
            cell.add(engine, seconds, rss.peak_mb, rss.growth_mb, cpu)
            if engine == "tidemark":
                cell.rows_written.append(result["rows_written"])
                cell.where.add(result["where"])
                if result["rows_read"] is not None:
                    cell.rows_read.append(result["rows_read"])
                cell.state_rows, cell.state_bytes = result["state_rows"], result["state_bytes"]

    def check(self, cell: Cell, name: str, t: int, what: str) -> None:
        """Every engine's view equals Tidemark's at time `t`."""
        query = self.tidemark.views[name].query
        expected = self.tidemark.contents(name, t)
        others: dict[str, Callable[[], Counter]] = {
            "spark": lambda: self.spark_engine.contents(query),
        }
        if self.duckdb is not None:
            others["duckdb"] = lambda: self.duckdb.contents(query)  # type: ignore[union-attr]
        if self.sdp is not None:
            others["sdp"] = lambda: self.sdp.contents(query)  # type: ignore[union-attr]
        for engine in self.engines:
            if engine in others:
                check_equal(expected, others[engine](), f"{name} {what}: {engine}")
        cell.checked_rows = sum(expected.values())

    def run(self) -> dict[str, Any]:
        args = self.args
        start = time.perf_counter()
        t0, base = self.append(args.events)
        load_s = time.perf_counter() - start
        self.tidemark.plan(t0)
        names = list(self.tidemark.views)
        print(f"loaded {base.events:,} events; planned {names}", flush=True)
        # Warm the JVM and DuckDB's code paths before anything is timed.
        if self.spark is not None:
            self.spark_engine.run(self.tidemark.views[names[0]].query)
        if self.duckdb is not None:
            self.duckdb.run(self.tidemark.views[names[0]].query)
        results: dict[str, dict[str, Any]] = {}
        hydration: dict[str, Any] = {}
        for name in names:
            cell = Cell()
            self.measure(cell, name)
            self.check(cell, name, t0, "after hydration")
            hydration[name] = cell.summary()
            print(_progress("hydrate", name, hydration[name]), flush=True)
        for fraction in args.fractions:
            label = _label(fraction)
            events = max(1, round(args.events * fraction))
            cells = {name: Cell() for name in names}
            for r in range(args.repeat):
                t, _ = self.append(events)
                for name in names:
                    self.measure(cells[name], name)
                    if r == 0:
                        self.check(cells[name], name, t, f"after a {label} delta at {t}")
            for name in names:
                summary = cells[name].summary()
                summary["delta_events"] = events
                results.setdefault(name, {})[label] = summary
                print(_progress(label, name, summary), flush=True)
        sdp_cli = None
        if self.sdp is not None and args.sdp_cli:
            self.sdp.close()
            self.sdp = None
            sdp_cli = sdp_cli_run(
                self.work, [self.tidemark.views[n].query for n in names], self.lake
            )
            if sdp_cli["ok"]:
                final = self.tidemark.shards["bid"].upper().time
                assert final is not None
                for name in names:
                    got = canonical(pq.read_table(Path(sdp_cli["warehouse"]) / name))
                    check_equal(self.tidemark.contents(name, final - 1), got, f"{name}: SDP CLI")
                sdp_cli["checked"] = True
        return {
            "load_s": load_s,
            "base_events": base.events,
            "base_rows": {n: t.num_rows for n, t in base.tables().items()},
            "planned": names,
            "hydration": hydration,
            "results": results,
            "sdp_error": self.sdp_error,
            "duckdb_idle_rss_mb": self.duckdb.hello.get("rss_mb") if self.duckdb else None,
            "sdp_cli": sdp_cli,
        }


def _progress(label: str, name: str, summary: dict[str, Any]) -> str:
    times = ", ".join(f"{e} {s:.3f}s" for e, s in summary["seconds"].items())
    return f"{label:>8} {name:>4}: {times} ({summary['tidemark_ran_on']})"


# ------------------------------------------------------------------ reports
def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def _ratio(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def _memory(cell: dict[str, Any], engine: str) -> str:
    if MEMORY[engine] == "growth":
        return f"+{cell['rss_growth_mb'].get(engine, 0):,.0f}"
    return f"{cell['peak_rss_mb'].get(engine, 0):,.0f}"


def markdown(document: dict[str, Any]) -> str:
    meta, run = document["meta"], document["run"]
    engines = [e for e in ENGINES if e in meta["engines"]]
    lines = [
        f"Nexmark benchmark ({run['base_events']:,} base events: {run['base_rows']['person']:,}"
        f" persons, {run['base_rows']['auction']:,} auctions, {run['base_rows']['bid']:,} bids;"
        f" median of {meta['repeat']} deltas per size; {meta['machine']}; load average"
        f" {meta.get('load_average_before', 0):.1f} before the run; `{meta['command']}`)",
        "",
        "Time to bring each view up to date after a delta (Tidemark: one incremental step;"
        " the others recompute the whole view), the others' time over Tidemark's in"
        " parentheses, and memory in MB. Tidemark and the Spark recompute run in one process"
        " tree (Python and the Spark JVM), whose size is mostly the JVM's heap and what ran"
        " before, so for them the column is how far that tree's RSS rose during the operation"
        " (`+`, the peak over the start); SDP and DuckDB run in worker processes of their own,"
        " so for them it is that worker's peak RSS (SDP: Python and its Spark Connect JVM;"
        f" DuckDB: Python and DuckDB, {run.get('duckdb_idle_rss_mb') or 0:,.0f} MB when idle)."
        " Every engine's view was checked equal to Tidemark's after hydration and after the"
        " first delta of each size. CPU is the median CPU time of the same operations"
        " (Tidemark: its process; DuckDB: its worker, all threads): the work, which the"
        " machine's load does not stretch as it does the wall clock.",
        "",
        "| query | delta | "
        + " | ".join(ENGINE_NAMES[e] for e in engines)
        + " | memory MB ("
        + " / ".join(f"{e} {MEMORY[e]}" for e in engines)
        + ") | CPU ("
        + " / ".join(ENGINE_NAMES[e] for e in engines)
        + ") | Tidemark state rows / MB | Tidemark ran on | rows checked |",
        "| --- | --- | "
        + " | ".join("---:" for _ in engines)
        + " | ---: | ---: | ---: | --- | ---: |",
    ]
    for name in run["planned"]:
        for label, cell in [("hydration", run["hydration"][name]), *run["results"][name].items()]:
            delta = label if label == "hydration" else f"{label} ({cell['delta_events']:,} ev)"
            parts = []
            for e in engines:
                s = cell["seconds"].get(e)
                ratio = cell["ratio_to_tidemark"].get(e)
                parts.append(
                    _seconds(s)
                    + (f" ({_ratio(ratio)})" if ratio is not None and e != "tidemark" else "")
                )
            peaks = " / ".join(_memory(cell, e) for e in engines)
            cpus = " / ".join(_seconds(cell.get("cpu_seconds", {}).get(e)) for e in engines)
            checked = f"{cell['checked_rows']:,}" if cell["checked_rows"] is not None else "-"
            lines.append(
                f"| {name} | {delta} | {' | '.join(parts)} | {peaks} | {cpus}"
                f" | {cell.get('state_rows', 0):,} / {cell.get('state_bytes', 0) / 2**20:,.1f}"
                f" | {cell['tidemark_ran_on']} | {checked} |"
            )
    lines.append("")
    if run["sdp_error"]:
        lines.append(f"- **SDP could not run here**: {run['sdp_error']}")
    cli = run.get("sdp_cli")
    if cli:
        if cli["ok"]:
            lines.append(
                f"- `spark-pipelines run` (the CLI, its own JVM and Spark Connect server)"
                f" refreshed all {cli['views']} views in {cli['seconds']:.1f} s wall time,"
                " start-up included; its views were checked equal to Tidemark's."
            )
        else:
            lines.append(f"- `spark-pipelines run` failed: {str(cli['error'])[:300]}")
    fresh = document.get("freshness")
    if fresh:
        lines += ["", _freshness_markdown(fresh)]
    lines += ["", "Query deviations from the published Nexmark SQL:", ""]
    for q in QUERIES:
        if q.name in meta["queries"] and q.deviation:
            lines.append(f"- {q.name} ({q.title}): {q.deviation}")
    return "\n".join(lines) + "\n"


def _freshness_markdown(fresh: dict[str, Any]) -> str:
    if "error" in fresh:
        return f"Freshness: not measured ({fresh['error']})."
    lines = [
        f"Freshness end to end (`tidemark serve` on 127.0.0.1, {fresh['samples']} writes per"
        f" path, one at a time; view: `{fresh['view_sql']}`): time from the write's"
        " acknowledgement to the change arriving in a `SUBSCRIBE` of the view over pgwire.",
        "",
        "| write path | p50 | p99 | max | samples |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for path in fresh["paths"]:
        lines.append(
            f"| {path['name']} | {path['p50_ms']:.0f} ms | {path['p99_ms']:.0f} ms"
            f" | {path['max_ms']:.0f} ms | {path['samples']} |"
        )
    return "\n".join(lines)


def plot(document: dict[str, Any], target: Path) -> None:
    """Refresh time against delta size, one panel per query, one line per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run, engines = document["run"], [e for e in ENGINES if e in document["meta"]["engines"]]
    names = run["planned"]
    cols = min(4, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        cells = run["results"][name]
        xs = [cells[label]["delta_events"] for label in cells]
        for engine in engines:
            ys = [cells[label]["seconds"].get(engine) for label in cells]
            if all(y is not None for y in ys):
                ax.plot(xs, ys, marker="o", label=ENGINE_NAMES[engine])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("delta (events)")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(engines))
    fig.suptitle(f"Nexmark: refresh time vs delta size ({run['base_events']:,} base events)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(target, dpi=90)
    plt.close(fig)


# --------------------------------------------------------------------- main
def _env(name: str, default: str) -> str:
    return os.environ.get(f"NEXMARK_{name}", default)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, default=int(_env("EVENTS", "100000")), help="base size"
    )
    parser.add_argument("--repeat", type=int, default=int(_env("REPEAT", "3")))
    parser.add_argument(
        "--fractions",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[float(x) for x in _env("FRACTIONS", "0.01,0.001,0.0001").split(",")],
        help="delta sizes as fractions of the base",
    )
    parser.add_argument(
        "--queries",
        type=lambda s: s.split(","),
        default=_env("QUERIES", ",".join(q.name for q in QUERIES)).split(","),
    )
    parser.add_argument(
        "--engines",
        type=lambda s: s.split(","),
        default=_env("ENGINES", ",".join(ENGINES)).split(","),
    )
    parser.add_argument("--seed", type=int, default=int(_env("SEED", "42")))
    parser.add_argument("--rate", type=int, default=10_000, help="events per second (event time)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--fresh-samples", type=int, default=int(_env("FRESH_SAMPLES", "200")))
    parser.add_argument("--no-freshness", action="store_true")
    parser.add_argument("--no-sdp-cli", dest="sdp_cli", action="store_false")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--work", type=Path, help="keep the data here (default: a temp dir)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.queries) - {q.name for q in QUERIES})
    if unknown:
        parser.error(f"unknown --queries {', '.join(unknown)}")
    if "tidemark" not in args.engines:
        parser.error("--engines must include tidemark (the others are compared with it)")
    return args


def run_bench(args: argparse.Namespace, work: Path, spark: SparkSession | None) -> dict[str, Any]:
    bench = Bench(args, work, spark)
    try:
        run = bench.run()
    finally:
        bench.close()
    freshness = None
    if not args.no_freshness:
        from bench.nexmark_freshness import measure_freshness

        freshness = measure_freshness(work / "freshness", args.fresh_samples, args.seed)
    return {"run": run, "freshness": freshness}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    command = "make bench" if not argv else "python -m bench.nexmark " + " ".join(argv)
    load_before = os.getloadavg()[0]
    check_plannable([q for q in QUERIES if q.name in args.queries])  # before Spark starts
    own_session = SparkContext._active_spark_context is None
    # Without the Spark engines no JVM starts, and Tidemark steps in-process.
    uses_spark = bool({"spark", "sdp"} & set(args.engines))
    spark = get_or_create_spark(args.master, shuffle_partitions=2) if uses_spark else None
    try:
        if args.work is not None:
            args.work.mkdir(parents=True, exist_ok=True)
            document = run_bench(args, args.work, spark)
        else:
            with tempfile.TemporaryDirectory(prefix="tidemark-bench-nexmark-") as tmp:
                document = run_bench(args, Path(tmp), spark)
        version = spark.version if spark is not None else "not started"
    finally:
        if own_session and spark is not None:
            spark.stop()
    document["meta"] = {
        "command": command,
        "events": args.events,
        "repeat": args.repeat,
        "fractions": args.fractions,
        "queries": args.queries,
        "engines": args.engines,
        "seed": args.seed,
        "rate": args.rate,
        "duckdb": duckdb.__version__,
        "load_average_before": load_before,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python"
        f" {platform.python_version()}, Spark {version} {args.master}, DuckDB {duckdb.__version__}",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "nexmark.json").write_text(json.dumps(document, indent=2, default=str))
    text = markdown(document)
    (args.out / "nexmark.md").write_text(text)
    plot(document, args.out / "nexmark.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
