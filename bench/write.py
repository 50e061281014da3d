"""Write benchmark: Tidemark against PostgreSQL 15 on the same machine, side
by side in one run (`make bench-write`).

- pgbench (PostgreSQL's own client) with a one-row INSERT script, 1, 8 and
  32 clients for `BENCH_WRITE_SECONDS` (30 s) each: transactions/s and
  average latency, against `tidemark serve` and against a PostgreSQL 15
  started here (the test fixture's cluster with fsync, full_page_writes and
  synchronous_commit on, as Tidemark's persist fsyncs every commit).
- COPY of `BENCH_WRITE_COPY_ROWS` (1,000,000) rows of 4 columns from a CSV
  file with psql's `\\copy`: rows/s, and Tidemark's resident memory before
  and at its peak.
- Webhook: single-event POSTs from 64 keep-alive clients for
  `BENCH_WRITE_WEBHOOK_SECONDS` (10 s), load generator in this process:
  requests/s, p50/p99 to the 200; the source must hold exactly the events
  that got a 200 (`bench/webhook.py`).

BENCH_WRITE_PHASES (pgbench,copy,webhook) runs only the phases named;
BENCH_WRITE_PGBENCH_MODES (simple,prepared) the pgbench protocols: simple
sends each INSERT as a new text, prepared Parses it once and Binds values.

Each Tidemark phase is profiled with py-spy (sampling the server process
while the load runs); the top frames say what bounds the number. Writes
bench/results/write.json and write.md (BENCH_WRITE_OUT: elsewhere).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from bench.webhook import Server, _phase, event_body
from tests.fixtures.postgres import PgCluster, find_pg_bindir

RESULTS = Path(__file__).parent / "results"
PGBENCH = shutil.which("pgbench") or "/usr/bin/pgbench"
PSQL = shutil.which("psql") or "/usr/bin/psql"
PY_SPY = str(Path(sys.executable).parent / "py-spy")
INSERT_SCRIPT = """\\set id random(1, 1000000000)
INSERT INTO pgb VALUES (:id, 7, 'payload');
"""
COPY_TABLE = "CREATE TABLE copy_t (id integer, name text, price double precision, day date)"
DURABLE = ("fsync=on", "full_page_writes=on", "synchronous_commit=on")


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass
class PgbenchRun:
    system: str
    mode: str  # pgbench -M: simple (a text per INSERT) or prepared (Parse once)
    clients: int
    seconds: int
    tps: float
    latency_ms: float
    failed: int
    profile: list[str]


@dataclass
class CopyRun:
    system: str
    rows: int
    seconds: float
    rows_per_s: float
    rss_before_mb: float | None
    rss_peak_mb: float | None
    profile: list[str]


class Profiler:
    """py-spy sampling a process for `seconds` in the background; `top()`
    gives the functions of coordinator_lib with the most samples below them
    (inclusive), as a share of the samples of threads doing work."""

    def __init__(self, pid: int, seconds: float, out: Path) -> None:
        self.out = out
        self.proc = None
        if Path(PY_SPY).exists() and seconds >= 1:
            command = [PY_SPY, "record", "--pid", str(pid), "-d", str(int(seconds))]
            command += ["-f", "raw", "-r", "50", "-o", str(out), "--nonblocking"]
            self.proc = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

    def stop(self) -> None:
        """End the sampling now (py-spy writes what it has on SIGINT): the
        phase ended before the `seconds` it was given."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def top(self, count: int = 8) -> list[str]:
        if self.proc is None:
            return ["(py-spy not installed)"]
        self.proc.wait(120)
        if not self.out.exists():
            return ["(py-spy recorded nothing)"]
        inclusive: Counter[str] = Counter()
        total = 0
        for line in self.out.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            if "coordinator_lib" not in stack or "_loop (" in stack.rsplit(";", 1)[-1]:
                continue
            total += int(samples)
            for frame in {f for f in stack.split(";") if "coordinator_lib" in f}:
                name = re.sub(r" \(coordinator_lib/([^:]+):\d+\)", r" (\1)", frame)
                inclusive[name] += int(samples)
        plumbing: tuple[str, ...] = (
            "_Connection.",
            "SessionClient.execute",
            "SessionClient._execute_one",
            "sequence (",
            "run_forever",
            "_handle (",
            "_dispatch (",
        )
        rows = [
            f"{100 * n / total:.0f}% {name}"
            for name, n in inclusive.most_common(60)
            if not name.startswith(plumbing) and "loop" not in name
        ]
        return rows[:count]


def _pgbench(
    dsn: str, clients: int, seconds: int, script: Path, mode: str
) -> tuple[float, float, int]:
    command = [PGBENCH, "-n", "-f", str(script), "-M", mode, "-c", str(clients)]
    command += ["-j", str(min(clients, os.cpu_count() or 2)), "-T", str(seconds), dsn]
    result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    out = result.stdout + result.stderr
    tps = re.search(r"tps = ([\d.]+)", out)
    latency = re.search(r"latency average = ([\d.]+) ms", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    if result.returncode != 0 or tps is None or latency is None:
        raise RuntimeError(f"pgbench failed ({result.returncode}):\n{out[-2000:]}")
    return float(tps.group(1)), float(latency.group(1)), int(failed.group(1)) if failed else 0


def _rss_mb(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _write_csv(path: Path, rows: int) -> None:
    with path.open("w") as out:
        chunk = 100_000
        for start in range(0, rows, chunk):
            out.write(
                "".join(
                    f"{i},name {i % 1000},{i % 997 / 4},20{i % 30:02d}-0{i % 9 + 1}-1{i % 10}\n"
                    for i in range(start, min(start + chunk, rows))
                )
            )


def _copy(system: str, dsn: str, csv: Path, rows: int, pid: int | None, work: Path) -> CopyRun:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(COPY_TABLE)
    before = _rss_mb(pid, "VmRSS") if pid else None
    expected = 8 + rows / 20_000  # a rough upper bound of the COPY's length, for py-spy
    profiler = Profiler(pid, expected, work / f"copy-{system}.txt") if pid else None
    began = time.perf_counter()
    result = subprocess.run(
        [PSQL, dsn, "-v", "ON_ERROR_STOP=1", "-c", f"\\copy copy_t from '{csv}' with (format csv)"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    elapsed = time.perf_counter() - began
    if profiler is not None:
        profiler.stop()  # sample the COPY, not the count below
    if result.returncode != 0 or f"COPY {rows}" not in result.stdout:
        raise RuntimeError(f"{system} COPY failed: {result.stdout}{result.stderr}")
    peak = _rss_mb(pid, "VmHWM") if pid else None
    with psycopg.connect(dsn, autocommit=True) as conn:
        [(count,)] = conn.execute("SELECT count(*) FROM copy_t").fetchall()
    if count != rows:
        raise AssertionError(f"{system}: copy_t holds {count} rows, {rows} were copied")
    return CopyRun(
        system,
        rows,
        round(elapsed, 2),
        round(rows / elapsed),
        before,
        peak,
        profiler.top() if profiler else [],
    )


def run(work: Path) -> dict:
    seconds = _env_int("BENCH_WRITE_SECONDS", 30)
    clients = [int(c) for c in os.environ.get("BENCH_WRITE_CLIENTS", "1,8,32").split(",")]
    modes = os.environ.get("BENCH_WRITE_PGBENCH_MODES", "simple,prepared").split(",")
    copy_rows = _env_int("BENCH_WRITE_COPY_ROWS", 1_000_000)
    webhook_seconds = _env_int("BENCH_WRITE_WEBHOOK_SECONDS", 10)
    phases = set(os.environ.get("BENCH_WRITE_PHASES", "pgbench,copy,webhook").split(","))
    script = work / "insert.sql"
    script.write_text(INSERT_SCRIPT)
    csv = work / "rows.csv"
    _write_csv(csv, copy_rows)
    bindir = find_pg_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries not found (make setup installs them)")
    load_before = os.getloadavg()[0]
    postgres = PgCluster(bindir)
    # Every read in-process: a count(*) of the COPY's million rows would
    # otherwise start Spark, a second JVM beside whatever else runs here.
    server = Server(work / "env")
    pgbench: list[PgbenchRun] = []
    copies: list[CopyRun] = []
    webhook: dict = {}
    try:
        postgres.start(DURABLE)
        pg_dsn = postgres.url("postgres")
        tm_dsn = f"host=127.0.0.1 port={server.pgwire_port} user=materialize dbname=materialize"
        for dsn in (tm_dsn, pg_dsn):
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE TABLE pgb (id bigint, k integer, v text)")
        runs = [(mode, n) for mode in modes for n in clients] if "pgbench" in phases else []
        for mode, n in runs:
            for system, dsn in (("Tidemark", tm_dsn), ("PostgreSQL 15", pg_dsn)):
                profiler = (
                    Profiler(server.proc.pid, seconds - 2, work / f"pgbench-{mode}-{n}.txt")
                    if system == "Tidemark"
                    else None
                )
                tps, latency, failed = _pgbench(dsn, n, seconds, script, mode)
                top = profiler.top() if profiler else []
                pgbench.append(PgbenchRun(system, mode, n, seconds, tps, latency, failed, top))
                print(
                    f"pgbench {system:>13} -M {mode:<8} x{n:<3} {tps:>9.1f} tps {latency:8.2f} ms",
                    flush=True,
                )
        for system, dsn, pid in (
            (("Tidemark", tm_dsn, server.proc.pid), ("PostgreSQL 15", pg_dsn, None))
            if "copy" in phases
            else ()
        ):
            run_ = _copy(system, dsn, csv, copy_rows, pid, work)
            copies.append(run_)
            print(f"COPY {system:>13} {run_.rows_per_s:>10,} rows/s {run_.seconds} s", flush=True)
        if "webhook" not in phases:
            return _document(load_before, pgbench, copies, webhook)
        server.sql("CREATE SOURCE events FROM WEBHOOK BODY FORMAT JSON")
        profiler = Profiler(server.proc.pid, webhook_seconds - 1, work / "webhook.txt")
        # `_phase` checks that exactly the acknowledged events landed, once each.
        phase = _phase(server, "1 event", "events", event_body, 1, 64, webhook_seconds)
        webhook = {**asdict(phase), "profile": profiler.top(), "landed_exactly_once": True}
        print(f"webhook x64 {phase.requests_per_s:,.1f} req/s p99 {phase.p99_ms} ms", flush=True)
    finally:
        server.stop()
        postgres.stop()
    return _document(load_before, pgbench, copies, webhook)


def _document(
    load_before: float, pgbench: list[PgbenchRun], copies: list[CopyRun], webhook: dict
) -> dict:
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.machine(),
            "python": platform.python_version(),
            "load_average_before": round(load_before, 2),
        },
        "postgres_settings": list(DURABLE),
        "pgbench": [asdict(r) for r in pgbench],
        "copy": [asdict(r) for r in copies],
        "webhook": webhook,
    }


def markdown(doc: dict) -> str:
    m = doc["machine"]
    lines = [
        f"Write benchmark (`make bench-write`; {m['cpus']} cores, {m['platform']}, Python "
        f"{m['python']}; servers and load generators share the machine; load average "
        f"{m['load_average_before']:g} before the run; PostgreSQL 15 with "
        f"{', '.join(doc['postgres_settings'])})",
        "",
        "pgbench, one-row INSERT script (`-n -f insert.sql -M <protocol>`):",
        "",
        "| protocol | clients | Tidemark tps | PostgreSQL tps | ratio | Tidemark latency "
        "| PostgreSQL latency |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    runs = doc["pgbench"]
    for mode, n in sorted({(r.get("mode", "simple"), r["clients"]) for r in runs}, reverse=True):
        tm, pg = (
            next(
                r
                for r in runs
                if (r.get("mode", "simple"), r["clients"]) == (mode, n)
                and (r["system"] == "Tidemark") == tidemark
            )
            for tidemark in (True, False)
        )
        lines.append(
            f"| {mode} | {n} | {tm['tps']:,.1f} | {pg['tps']:,.1f} | {tm['tps'] / pg['tps']:.3f} "
            f"| {tm['latency_ms']:.1f} ms | {pg['latency_ms']:.2f} ms |"
        )
    lines += ["", "COPY FROM STDIN (psql `\\copy`, CSV, 4 columns):", ""]
    lines += [
        "| system | rows | seconds | rows/s | RSS before | peak RSS |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in doc["copy"]:
        rss = (
            f"{c['rss_before_mb']:,.0f} MB | {c['rss_peak_mb']:,.0f} MB"
            if c["rss_before_mb"] is not None
            else "- | -"
        )
        lines.append(
            f"| {c['system']} | {c['rows']:,} | {c['seconds']} | {c['rows_per_s']:,} | {rss} |"
        )
    w = doc["webhook"]
    if w:
        lines += [
            "",
            f"Webhook, single-event POSTs, {w['concurrency']} clients: "
            f"{w['requests_per_s']:,.0f} requests/s, p50 {w['p50_ms']:.1f} ms, p99 "
            f"{w['p99_ms']:.1f} ms, server CPU {w['server_cpu_ms_per_request']} ms/request; "
            "every acknowledged event landed exactly once (count checked).",
        ]
    lines += ["", "What bounds each Tidemark number (py-spy, inclusive share of samples):", ""]
    for r in runs:
        if r["system"] == "Tidemark":
            mode = r.get("mode", "simple")
            lines.append(f"- pgbench -M {mode} x{r['clients']}: " + "; ".join(r["profile"][:6]))
    for c in doc["copy"]:
        if c["profile"]:
            lines.append("- COPY: " + "; ".join(c["profile"][:6]))
    if w:
        lines.append("- webhook: " + "; ".join(w["profile"][:6]))
    return "\n".join(lines) + "\n"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-write-") as work:
        path = Path(work)
        os.chmod(path, 0o755)  # the PostgreSQL server (another OS user) reads nothing here
        document = run(path)
    out = Path(os.environ.get("BENCH_WRITE_OUT", RESULTS))
    out.mkdir(parents=True, exist_ok=True)
    (out / "write.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / "write.md").write_text(markdown(document))
    print(markdown(document))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
