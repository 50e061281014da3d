"""A query cannot take the server down: over pgwire with psycopg, a runaway
in-process query (a 600-row table cross-joined three times) stops on
conn.cancel() and on statement_timeout with 57014, and on max_query_memory
with 53200 when it must hold its rows (a sort), while the server's memory
stays bounded; the session stays usable after each. Large results stream
to the client in bounded memory: a cross join's rows are computed as the
client reads them, and an aggregate over it folds them as they come.

The server is `tidemark serve` in its own process (no Spark: every input
is small, so everything is evaluated in-process); its RSS is read from
/proc/<pid>/status."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors

from coordinator_lib.server.environment import Environment
from tests.adapter.conftest import fast_config

pytestmark = pytest.mark.timeout(180)

# 600 rows cross-joined three times: 216 million rows, hours of Python and
# tens of GB if nothing stops it.
TRIPLE_CROSS_JOIN = "SELECT count(*), sum(a.x + b.x + c.x) FROM t600 a, t600 b, t600 c"
# 50 rows cross-joined three times: 125,000 rows, above 30 MB as the
# engine's lists of updates (by its own estimate), a second or two to send.
ROWS_50 = 50**3
MB = 1 << 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.dsn = f"host=127.0.0.1 port={port} user=materialize dbname=materialize"

    def rss(self) -> int:
        """The server process's resident set size in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/<pid>/status")

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=10)


def start_server(data_dir: Path) -> Server:
    """`tidemark serve` on `data_dir`, once it accepts connections."""
    pg_port, http_port = _free_port(), _free_port()
    command = [sys.executable, "-m", "coordinator_lib.cli", "serve", "--data-dir", str(data_dir)]
    command += ["--pgwire-port", str(pg_port), "--http-port", str(http_port)]
    with open(data_dir.parent / f"{data_dir.name}.log", "a") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    server = Server(proc, pg_port)
    deadline = time.monotonic() + 120
    while True:
        try:
            server.connect().close()
            return server
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_server(server)
                raise AssertionError("tidemark serve did not start") from None
            time.sleep(0.5)


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_server(tmp_path_factory.mktemp("limits") / "data")
    try:
        with server.connect() as conn:
            conn.execute("CREATE TABLE t600 (x int)")
            conn.execute("INSERT INTO t600 VALUES " + ", ".join(f"({i})" for i in range(600)))
            conn.execute("CREATE TABLE t50 (x int)")
            conn.execute("INSERT INTO t50 SELECT x FROM t600 WHERE x < 50")
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def conn(server: Server) -> Iterator[psycopg.Connection[Any]]:
    with server.connect() as conn:
        yield conn


class Running:
    """`sql` running on its own connection on another thread; `outcome`
    gets its rows or its exception. A query that never ends leaves only
    this daemon thread behind (the fixture stops the server)."""

    def __init__(self, server: Server, sql: str, *setup: str) -> None:
        self.conn = server.connect()
        for statement in setup:
            self.conn.execute(statement)
        self.outcome: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(sql,), daemon=True)
        self.thread.start()

    def _run(self, sql: str) -> None:
        try:
            self.outcome.append(self.conn.execute(sql).fetchall())
        except Exception as error:
            self.outcome.append(error)

    def ended(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def usable(self) -> bool:
        """The session still answers after its statement failed."""
        return self.conn.execute("SELECT count(*) FROM t600").fetchone() == (600,)


class PeakRss:
    """The server's peak RSS growth over `baseline` while in the block,
    sampled every 20 ms on a thread."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.baseline = server.rss()
        self.peak = self.baseline
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, self.server.rss())

    @property
    def grew(self) -> int:
        return self.peak - self.baseline

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()


def test_cancel_stops_an_in_process_cross_join(server: Server) -> None:
    # Only the cancel may stop it; it runs for minutes (216 million rows).
    running = Running(server, TRIPLE_CROSS_JOIN, "SET max_query_memory = '64GB'")
    assert not running.ended(1.0), f"the query ended before it was canceled: {running.outcome}"
    running.conn.cancel()
    assert running.ended(30), "the query kept running after conn.cancel()"
    (error,) = running.outcome
    assert isinstance(error, errors.QueryCanceled), error
    assert error.sqlstate == "57014"
    assert "user request" in str(error)
    assert running.usable()
    running.conn.close()


def test_statement_timeout_stops_an_in_process_cross_join(server: Server) -> None:
    setup = ("SET max_query_memory = '64GB'", "SET statement_timeout = '1s'")
    running = Running(server, TRIPLE_CROSS_JOIN, *setup)
    assert running.ended(30), "the query kept running past its statement_timeout"
    (error,) = running.outcome
    assert isinstance(error, errors.QueryCanceled), error
    assert "statement timeout" in str(error)
    assert running.usable()
    running.conn.close()


def test_max_query_memory_stops_a_sorted_cross_join(server: Server) -> None:
    """ORDER BY holds every row before the first is sent: that is charged."""
    baseline = server.rss()
    peak = baseline
    sql = "SELECT a.x, b.x, c.x FROM t600 a, t600 b, t600 c ORDER BY 3, 2, 1"
    running = Running(server, sql, "SET max_query_memory = '200MB'")
    while not running.ended(0.02) and peak < baseline + 4096 * MB:
        peak = max(peak, server.rss())
    assert running.ended(0), "the query kept growing past max_query_memory"
    (error,) = running.outcome
    assert isinstance(error, errors.OutOfMemory), error
    assert error.sqlstate == "53200"
    assert "max_query_memory (200MB)" in str(error)
    assert error.diag.message_hint and "SET max_query_memory" in error.diag.message_hint
    # The estimate bounds what the engine holds: RSS grew by well under 2x the limit.
    assert peak - baseline < 400 * MB
    assert running.usable()
    running.conn.close()


def test_max_query_memory_is_checked_and_has_a_default(conn: psycopg.Connection[Any]) -> None:
    (default,) = conn.execute("SHOW max_query_memory").fetchone()  # type: ignore[misc]
    assert default.endswith(("MB", "GB"))
    for bad in ("-1", "0", "lots", "12XB"):
        with pytest.raises(errors.InvalidParameterValue, match="max_query_memory"):
            conn.execute(f"SET max_query_memory = '{bad}'")
    conn.execute("SET max_query_memory = 1048576")
    assert conn.execute("SHOW max_query_memory").fetchone() == ("1MB",)
    # A query within the limit runs.
    assert conn.execute("SELECT count(*) FROM t600 a, t600 b WHERE a.x = b.x").fetchone() == (600,)


def test_a_cross_join_streams_past_max_query_memory(server: Server) -> None:
    """Its rows are computed as a cursor FETCHes them: far more than the
    limit flows through, nothing of it is held (the server's RSS stays
    flat). It used to be built whole first: 53200 at this limit."""
    with server.connect() as conn, PeakRss(server) as rss:
        conn.autocommit = False
        conn.execute("SET max_query_memory = '8MB'")
        cursor = conn.cursor("triples")
        cursor.execute("SELECT a.x, b.x, c.x FROM t50 a, t50 b, t50 c")
        count = total = 0
        while rows := cursor.fetchmany(10_000):
            count += len(rows)
            total += sum(a * 2500 + b * 50 + c for a, b, c in rows)
        conn.commit()
    # Each triple once: the codes 0 .. 50**3 - 1, each once, sum to this.
    assert (count, total) == (ROWS_50, ROWS_50 * (ROWS_50 - 1) // 2)
    assert rss.grew < 40 * MB, f"server RSS grew by {rss.grew / MB:.0f} MB"


def test_an_aggregate_folds_a_cross_join_as_it_comes(server: Server) -> None:
    """count(*) over 125,000 joined rows holds one group, not the rows
    (53200 at this limit when they were built whole first)."""
    with server.connect() as conn:
        conn.execute("SET max_query_memory = '4MB'")
        sql = "SELECT count(*), sum(a.x + b.x + c.x) FROM t50 a, t50 b, t50 c"
        assert conn.execute(sql).fetchone() == (ROWS_50, 3 * 2500 * (49 * 50 // 2))


def test_a_slow_reader_cancels_a_streamed_cross_join_in_bounded_memory(server: Server) -> None:
    """216 million rows read slowly, row by row: the server computes them as
    they are read (its RSS stays flat, where it used to build them all
    before sending the first), and a cancel stops it with 57014."""
    conn = server.connect()
    conn.execute("SET max_query_memory = '64GB'")  # only the cancel may stop it
    read: list[int] = []
    outcome: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in conn.cursor().stream("SELECT a.x, b.x, c.x FROM t600 a, t600 b, t600 c"):
                read.append(1)
                if len(read) % 1000 == 0:
                    time.sleep(0.01)
        except BaseException as error:
            outcome.append(error)

    with PeakRss(server) as rss:
        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        while len(read) < 50_000 and rss.grew < 200 * MB and thread.is_alive():
            time.sleep(0.05)
        conn.cancel()
        thread.join(60)
    assert not thread.is_alive(), "the query kept running after conn.cancel()"
    (error,) = outcome
    assert isinstance(error, errors.QueryCanceled), error
    assert rss.grew < 40 * MB, f"server RSS grew by {rss.grew / MB:.0f} MB"
    assert len(read) >= 50_000, f"{len(read)} rows read before the cancel"
    assert conn.execute("SELECT count(*) FROM t600").fetchone() == (600,)
    assert logged(conn, "SELECT a.x, b.x, c.x FROM t600 a, t600 b, t600 c") == (
        "canceled",
        "canceling statement due to user request",
    )
    conn.close()


def logged(conn: psycopg.Connection[Any], sql: str) -> tuple[str, str | None]:
    """How the statement log says the last run of `sql` ended."""
    row = conn.execute(
        "SELECT status, error_message FROM mz_internal.mz_statement_log"
        " WHERE sql = %s ORDER BY began_at DESC LIMIT 1",
        (sql,),
    ).fetchone()
    assert row is not None, f"{sql!r} is not in the statement log"
    return row


def test_a_streamed_query_failing_midway_is_logged_as_its_error(server: Server) -> None:
    """One row of 125,000 divides by zero: the client gets 22012 after rows
    were sent, and the statement log records that error, not the success
    it had when its first rows were ready."""
    sql = "SELECT 1 / (a.x * 2500 + b.x * 50 + c.x - 100000) FROM t50 a, t50 b, t50 c"
    with server.connect() as conn:
        with pytest.raises(errors.DivisionByZero):
            conn.execute(sql).fetchall()
        assert logged(conn, sql) == ("error", "division by zero")
        conn.execute("SELECT 1 FROM t50 LIMIT 1").fetchall()
        assert logged(conn, "SELECT 1 FROM t50 LIMIT 1") == ("success", None)


@pytest.mark.spark
@pytest.mark.parametrize("moment", ["job_running", "planning"])
def test_cancel_stops_a_spark_job(tmp_path: Path, spark: Any, moment: str) -> None:
    """Every input goes to Spark (local_max_rows=0); the server runs in this
    process to share the test's Spark session, so the cancel request is
    psycopg's cancel_safe (its blocking cancel() would hold this process's
    GIL while the in-process server needs it to answer). The cancel comes
    while a Spark job runs, or as soon as the server runs the statement,
    while it still plans and reads its inputs: that cancel used to be lost
    (checked once, before any job existed) and the job ran on."""
    config = fast_config(tmp_path / "env", local_max_rows=0)
    env = Environment(config, pgwire_port=0, http_port=0, spark=spark)
    env.start()
    try:
        server = Server.__new__(Server)
        server.dsn = f"host=127.0.0.1 port={env.pgwire.port} user=materialize dbname=materialize"
        with server.connect() as conn:
            conn.execute("CREATE TABLE t600 (x int)")
            conn.execute("INSERT INTO t600 VALUES " + ", ".join(f"({i})" for i in range(600)))
        tracker = spark.sparkContext.statusTracker()
        running = Running(server, TRIPLE_CROSS_JOIN)
        session = env.handle.coordinator.session(running.conn.info.backend_pid)
        assert session is not None
        # A cancel sent before the server has the query cancels nothing, as
        # in PostgreSQL: wait until the statement runs (its log record is open).
        while session.statement is None or session.statement.sql != TRIPLE_CROSS_JOIN:
            assert not running.ended(0.01), f"ended before it was seen: {running.outcome}"
        while moment == "job_running" and not tracker.getActiveJobsIds():
            assert not running.ended(0.05), f"ended before a Spark job ran: {running.outcome}"
        if moment == "planning":
            assert not tracker.getActiveJobsIds(), "a Spark job already ran: not planning"
        running.conn.cancel_safe()
        assert running.ended(60), "the Spark job kept running after the cancel"
        (error,) = running.outcome
        assert isinstance(error, errors.QueryCanceled), error
        assert "user request" in str(error)
        assert running.usable()
        running.conn.close()
        deadline = time.monotonic() + 30
        while tracker.getActiveJobsIds():  # its tasks were interrupted, not left running
            assert time.monotonic() < deadline, "Spark jobs still active after the cancel"
            time.sleep(0.1)
    finally:
        env.stop()


@pytest.mark.slow
def test_a_large_select_streams_in_bounded_memory(tmp_path: Path) -> None:
    """Half a million rows (a thousand distinct, each 512 times) go to the
    client as they are expanded: the server's peak RSS grows by far less
    than the result (it used to expand them into a list and a DataFrame
    first). The server restarts after loading so the loading's freed memory
    cannot hide the SELECT's."""
    data_dir = tmp_path / "data"
    loader = start_server(data_dir)
    try:
        with loader.connect() as conn:
            conn.execute("CREATE TABLE big (x int, label text)")
            values = ", ".join(f"({i}, 'row number {i}')" for i in range(1000))
            conn.execute(f"INSERT INTO big VALUES {values}")
            for _ in range(9):  # 1,000 * 2**9 rows
                conn.execute("INSERT INTO big SELECT * FROM big")
    finally:
        stop_server(loader)
    server = start_server(data_dir)
    try:
        with server.connect() as conn:
            assert conn.execute("SELECT count(*) FROM big").fetchone() == (512_000,)
            baseline = server.rss()
            peaks = [baseline]
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.02):
                    peaks.append(server.rss())

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                rows = conn.execute("SELECT * FROM big").fetchall()
            finally:
                done.set()
                sampler.join()
        assert len(rows) == 512_000
        assert all(label == f"row number {x}" for x, label in rows[::10_000])
        grew = max(peaks) - baseline
        assert grew < 25 * MB, f"server RSS grew by {grew / MB:.0f} MB"
    finally:
        stop_server(server)
