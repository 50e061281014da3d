"""Consensus contract, run on both backends (SQLite and a real PostgreSQL).

Every durable invariant of the project rests on compare_and_set: of racing
writers with the same expected seqno exactly one wins, a loser changes
nothing, and an acknowledged write survives its writer being killed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.persist.consensus import (
    Consensus,
    ConsensusError,
    KeyChange,
    VersionedData,
    open_consensus,
)
from coordinator_lib.persist.postgres_consensus import PostgresConsensus
from coordinator_lib.persist.sqlite_consensus import SqliteConsensus

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def consensus(consensus_url: str) -> Iterator[Consensus]:
    c = open_consensus(consensus_url)
    try:
        yield c
    finally:
        c.close()


def vd(seqno: int, data: bytes = b"") -> VersionedData:
    return VersionedData(seqno, data)


# -- the contract --------------------------------------------------------------


def test_open_picks_backend(consensus: Consensus, consensus_url: str) -> None:
    expected = PostgresConsensus if consensus_url.startswith("postgresql://") else SqliteConsensus
    assert isinstance(consensus, expected)


def test_head_of_missing_key_is_none(consensus: Consensus) -> None:
    assert consensus.head("nope") is None
    assert consensus.list_keys() == []


def test_cas_from_none_creates_once(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, vd(1, b"one"))
    assert consensus.head("k") == vd(1, b"one")
    # The key exists now: a second creator loses and changes nothing.
    assert not consensus.compare_and_set("k", None, vd(5, b"other"))
    assert consensus.head("k") == vd(1, b"one")


def test_cas_with_wrong_seqno_changes_nothing(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, vd(3, b"a"))
    assert not consensus.compare_and_set("k", 2, vd(4, b"b"))
    assert not consensus.compare_and_set("k", 4, vd(5, b"b"))
    assert not consensus.compare_and_set("missing", 3, vd(4, b"b"))
    assert consensus.head("k") == vd(3, b"a")
    assert consensus.head("missing") is None
    assert consensus.compare_and_set("k", 3, vd(4, b"b"))
    assert consensus.head("k") == vd(4, b"b")


def test_cas_all_is_all_or_nothing(consensus: Consensus) -> None:
    """Several keys change in one step: one key's wrong seqno (or a key
    that exists where none was expected) leaves every key as it was."""
    assert consensus.compare_and_set("a", None, vd(1, b"a1"))
    assert consensus.compare_and_set("b", None, vd(1, b"b1"))
    attempts = [
        [KeyChange("a", 1, vd(2, b"a2")), KeyChange("b", 7, vd(8, b"b2"))],
        [KeyChange("a", 1, vd(2, b"a2")), KeyChange("c", 1, vd(2, b"c2"))],
        [KeyChange("b", 1, vd(2, b"b2")), KeyChange("a", None, vd(2, b"a2"))],
        [KeyChange("c", None, vd(1, b"c1")), KeyChange("a", 9, vd(10, b"a2"))],
    ]
    for changes in attempts:
        assert not consensus.compare_and_set_all(changes)
        assert consensus.head("a") == vd(1, b"a1")
        assert consensus.head("b") == vd(1, b"b1")
        assert consensus.head("c") is None
    assert consensus.compare_and_set_all(
        [
            KeyChange("b", 1, vd(2, b"b2")),
            KeyChange("c", None, vd(1, b"c1")),
            KeyChange("a", 1, vd(2, b"a2")),
        ]
    )
    assert [consensus.head(k) for k in "abc"] == [vd(2, b"a2"), vd(2, b"b2"), vd(1, b"c1")]
    with pytest.raises(ValueError):  # one change would see the other's write
        consensus.compare_and_set_all([KeyChange("a", 2, vd(3)), KeyChange("a", 3, vd(4))])
    with pytest.raises(ValueError):
        consensus.compare_and_set_all([KeyChange("a", 2, vd(2)), KeyChange("b", 2, vd(3))])
    assert consensus.head("a") == vd(2, b"a2")


def test_cas_all_races_one_winner_per_version(consensus: Consensus) -> None:
    """Threads move the same three keys together, naming them in different
    orders (PostgreSQL must not deadlock): each version is won exactly once
    and the keys end together."""
    keys = ["x", "y", "z"]
    for key in keys:
        assert consensus.compare_and_set(key, None, vd(1, b"0"))
    n, rounds = 4, 25
    barrier = threading.Barrier(n)
    wins = [0] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        order = keys[i % 3 :] + keys[: i % 3]
        try:
            barrier.wait(timeout=60)
            for _ in range(rounds):
                for _attempt in range(10_000):
                    # Reads of several keys are no snapshot: a commit may
                    # fall between two of them, so read until they agree.
                    seqnos = {consensus.head(key).seqno for key in order}  # type: ignore[union-attr]
                    if len(seqnos) != 1:
                        continue
                    (seqno,) = seqnos
                    change = [KeyChange(k, seqno, vd(seqno + 1, b"%d" % i)) for k in order]
                    if consensus.compare_and_set_all(change):
                        wins[i] += 1
                        break
                else:
                    raise AssertionError("the keys parted for good")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    heads = {consensus.head(key) for key in keys}
    assert len(heads) == 1  # one seqno and the same last writer for all three
    assert heads.pop().seqno == 1 + n * rounds  # type: ignore[union-attr]
    assert sum(wins) == n * rounds


def test_seqno_must_increase(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, vd(3, b"a"))
    with pytest.raises(ValueError):
        consensus.compare_and_set("k", 3, vd(3, b"b"))
    with pytest.raises(ValueError):
        consensus.compare_and_set("k", 3, vd(2, b"b"))
    assert consensus.head("k") == vd(3, b"a")
    # Jumps are allowed: seqnos only have to grow.
    assert consensus.compare_and_set("k", 3, vd(10, b"c"))
    assert consensus.head("k") == vd(10, b"c")


def test_list_keys_by_prefix_sorted(consensus: Consensus) -> None:
    keys = ["b", "a/2", "a/10", "a/1", "a_", "ab", "a%x", "A", "a/é", "a/Z", "a", "a\\b"]
    for k in keys:
        assert consensus.compare_and_set(k, None, vd(1))
    assert consensus.list_keys() == sorted(keys)
    assert consensus.list_keys("") == sorted(keys)
    assert consensus.list_keys("a/") == ["a/1", "a/10", "a/2", "a/Z", "a/é"]
    # LIKE wildcards in a prefix are plain characters.
    assert consensus.list_keys("a_") == ["a_"]
    assert consensus.list_keys("a%") == ["a%x"]
    assert consensus.list_keys("a\\") == ["a\\b"]
    # Prefixes are case-sensitive.
    assert consensus.list_keys("A") == ["A"]
    assert consensus.list_keys("zzz") == []


def test_delete(consensus: Consensus) -> None:
    assert consensus.compare_and_set("k", None, vd(2, b"x"))
    assert not consensus.delete("k", 1)
    assert not consensus.delete("missing", 1)
    assert consensus.head("k") == vd(2, b"x")
    assert consensus.delete("k", 2)
    assert consensus.head("k") is None
    assert consensus.list_keys() == []
    assert not consensus.delete("k", 2)
    # A deleted key can be created again.
    assert consensus.compare_and_set("k", None, vd(1, b"again"))
    assert consensus.head("k") == vd(1, b"again")


def test_binary_data_round_trips(consensus: Consensus) -> None:
    values = [b"", bytes(range(256)), os.urandom(1 << 20)]
    seq: int | None = None
    for i, data in enumerate(values, start=1):
        assert consensus.compare_and_set("blob", seq, vd(i, data))
        seq = i
        got = consensus.head("blob")
        assert got is not None and got.data == data and type(got.data) is bytes


def test_large_seqnos(consensus: Consensus) -> None:
    big = 2**62
    assert consensus.compare_and_set("k", None, vd(big))
    assert consensus.compare_and_set("k", big, vd(2**63 - 1))
    assert consensus.head("k") == vd(2**63 - 1)


def test_nul_in_key_is_refused(consensus: Consensus) -> None:
    with pytest.raises(ValueError):
        consensus.compare_and_set("a\x00b", None, vd(1))
    assert consensus.list_keys() == []


def test_values_survive_close_and_reopen(consensus_url: str) -> None:
    c = open_consensus(consensus_url)
    assert c.compare_and_set("x", None, vd(1, b"first"))
    assert c.compare_and_set("x", 1, vd(2, b"second"))
    assert c.compare_and_set("y", None, vd(7, b"why"))
    c.close()
    with pytest.raises(RuntimeError):
        c.head("x")
    c.close()  # idempotent
    c2 = open_consensus(consensus_url)
    try:
        assert c2.head("x") == vd(2, b"second")
        assert c2.head("y") == vd(7, b"why")
        assert c2.list_keys() == ["x", "y"]
    finally:
        c2.close()


def test_two_handles_see_each_other(consensus_url: str) -> None:
    a, b = open_consensus(consensus_url), open_consensus(consensus_url)
    try:
        assert a.compare_and_set("k", None, vd(1, b"a"))
        assert not b.compare_and_set("k", None, vd(1, b"b"))
        assert b.head("k") == vd(1, b"a")
        assert b.compare_and_set("k", 1, vd(2, b"b"))
        assert not a.compare_and_set("k", 1, vd(2, b"a"))
        assert a.head("k") == vd(2, b"b")
    finally:
        a.close()
        b.close()


# -- races ---------------------------------------------------------------------


def _increment_loop(c: Consensus, key: str, rounds: int) -> list[int]:
    """Read the head and try to bump it `rounds` times; return the seqnos won."""
    won: list[int] = []
    for _ in range(rounds):
        cur = c.head(key)
        assert cur is not None
        nxt = cur.seqno + 1
        if c.compare_and_set(key, cur.seqno, vd(nxt, str(int(cur.data) + 1).encode())):
            won.append(nxt)
    return won


def _check_one_winner_per_version(c: Consensus, key: str, wins: list[list[int]]) -> None:
    final = c.head(key)
    assert final is not None
    total = sum(len(w) for w in wins)
    assert int(final.data) == total == final.seqno
    flat = sorted(s for w in wins for s in w)
    assert flat == list(range(1, final.seqno + 1)), "some version was won twice or by no one"


def test_threads_race_one_winner_per_version(consensus: Consensus) -> None:
    """Threads of one process share one Consensus object (server threads)."""
    n, rounds = 4, 50
    assert consensus.compare_and_set("ctr", None, vd(0, b"0"))
    barrier = threading.Barrier(n)
    wins: list[list[int]] = [[] for _ in range(n)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            wins[i] = _increment_loop(consensus, "ctr", rounds)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    _check_one_winner_per_version(consensus, "ctr", wins)


def _race_worker(url: str, key: str, rounds: int, barrier: Any, results: Any) -> None:
    """Body of one racing OS process (module level so 'spawn' can import it)."""
    c = open_consensus(url)
    try:
        barrier.wait(timeout=120)
        results.put((os.getpid(), _increment_loop(c, key, rounds)))
    except BaseException as exc:
        results.put((os.getpid(), repr(exc)))
        raise
    finally:
        c.close()


@pytest.mark.slow
def test_processes_race_one_winner_per_version(consensus: Consensus, consensus_url: str) -> None:
    """Separate OS processes share nothing but the durable state: exactly
    one of them wins each version."""
    n, rounds = 4, 50
    assert consensus.compare_and_set("ctr", None, vd(0, b"0"))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_race_worker, args=(consensus_url, "ctr", rounds, barrier, results))
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    try:
        outcomes = [results.get(timeout=300) for _ in range(n)]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    failures = [o for o in outcomes if isinstance(o[1], str)]
    assert not failures, failures
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    wins = [o[1] for o in outcomes]
    _check_one_winner_per_version(consensus, "ctr", wins)


_WRITER = """
import sys
from coordinator_lib.persist.consensus import VersionedData, open_consensus
c = open_consensus(sys.argv[1])
seq = None
i = 0
while True:
    i += 1
    assert c.compare_and_set("k", seq, VersionedData(i, str(i).encode() * 100))
    seq = i
    print(i, flush=True)
"""


def test_acknowledged_write_survives_sigkill(consensus_url: str) -> None:
    """A writer killed mid-stream loses nothing it acknowledged and leaves no
    torn value behind."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, consensus_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    acked = 0
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= 200:
                break
        assert acked >= 200, proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        # Lines written before the kill were acknowledged too.
        for line in proc.stdout:
            acked = int(line)
    finally:
        proc.kill()
        proc.wait()
    c = open_consensus(consensus_url)
    try:
        head = c.head("k")
        assert head is not None
        # At most one commit may have happened without its acknowledgement.
        assert acked <= head.seqno <= acked + 1
        assert head.data == str(head.seqno).encode() * 100
    finally:
        c.close()


# -- model check -----------------------------------------------------------------

_ops = st.lists(
    st.tuples(
        st.sampled_from(["cas", "cas", "delete", "list"]),
        st.sampled_from(["k0", "k1", "k1/x"]),
        st.sampled_from(["current", "current", "none", "int"]),
        st.integers(0, 4),  # an explicit expected seqno
        st.integers(-1, 3),  # new seqno minus expected
        st.binary(max_size=6),
    ),
    max_size=25,
)


@settings(
    max_examples=60,
    deadline=None,
    # One database for all examples: each example uses its own key prefix.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_ops)
def test_agrees_with_dict_model(consensus: Consensus, ops: list[tuple[Any, ...]]) -> None:
    prefix = f"{uuid.uuid4().hex}/"
    model: dict[str, VersionedData] = {}
    for kind, name, mode, exp_int, delta, data in ops:
        key = prefix + name
        cur = model.get(key)
        if kind == "list":
            assert consensus.list_keys(prefix) == sorted(model)
            continue
        if kind == "delete":
            expected = cur.seqno if (mode == "current" and cur is not None) else exp_int
            ok = consensus.delete(key, expected)
            assert ok == (cur is not None and cur.seqno == expected)
            if ok:
                del model[key]
        else:
            exp: int | None
            if mode == "current":
                exp = None if cur is None else cur.seqno
            elif mode == "none":
                exp = None
            else:
                exp = exp_int
            new = vd((exp if exp is not None else exp_int) + delta, data)
            if exp is not None and new.seqno <= exp:
                with pytest.raises(ValueError):
                    consensus.compare_and_set(key, exp, new)
            else:
                ok = consensus.compare_and_set(key, exp, new)
                assert ok == ((None if cur is None else cur.seqno) == exp)
                if ok:
                    model[key] = new
        assert consensus.head(key) == model.get(key)
        assert consensus.seqno(key) == (None if key not in model else model[key].seqno)
    assert consensus.list_keys(prefix) == sorted(model)


# -- SQLite specifics -------------------------------------------------------------


def test_sqlite_is_wal_and_creates_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "consensus.db"
    c = open_consensus(f"sqlite://{path}")
    try:
        assert isinstance(c, SqliteConsensus)
        assert c.compare_and_set("k", None, vd(1))
    finally:
        c.close()
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    # The other accepted spellings name the same file.
    for url in (f"sqlite:{path}", str(path)):
        c = open_consensus(url)
        try:
            assert c.head("k") == vd(1)
        finally:
            c.close()


def test_sqlite_refuses_memory() -> None:
    with pytest.raises(ValueError):
        SqliteConsensus(":memory:")


def test_sqlite_lock_timeout_is_a_consensus_error(tmp_path: Path) -> None:
    """A writer blocked past the busy timeout fails with ConsensusError
    (outcome: nothing changed) instead of hanging or leaking sqlite3 errors."""
    import sqlite3

    path = tmp_path / "c.db"
    c = SqliteConsensus(path, busy_timeout_s=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        assert c.compare_and_set("k", None, vd(1))
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(ConsensusError):
            c.compare_and_set("k", 1, vd(2))
        blocker.execute("ROLLBACK")
        assert c.head("k") == vd(1)
        assert c.compare_and_set("k", 1, vd(2))
    finally:
        blocker.close()
        c.close()


def test_sqlite_compare_and_set_paused_between_statements_holds_no_one_off(
    tmp_path: Path,
) -> None:
    """A process stopped (SIGSTOP, a long GC or GIL wait) at any point of its
    compare-and-set must not hold other processes off consensus: the write
    lock may be held only inside one statement. The old CaS (BEGIN IMMEDIATE,
    SELECT, UPDATE, COMMIT) stalled a whole cluster when the frozen-worker
    test froze a worker between two of those statements."""
    import sqlite3

    path = tmp_path / "c.db"
    pause = threading.Event()
    paused = threading.Event()

    class Paused(SqliteConsensus):
        """Stops before each statement but the first of a compare-and-set."""

        statements = 0

        def _connect(self) -> sqlite3.Connection:
            conn = super()._connect()

            def trace(sql: str) -> None:
                if pause.is_set():
                    Paused.statements += 1
                    if Paused.statements > 1:
                        paused.set()
                        while pause.is_set():
                            time.sleep(0.01)

            conn.set_trace_callback(trace)
            return conn

    frozen = Paused(path)
    other = SqliteConsensus(path, busy_timeout_s=0.5)
    try:
        assert frozen.compare_and_set("k", None, vd(1))
        pause.set()
        writer = threading.Thread(
            target=frozen.compare_and_set_all,
            args=([KeyChange("k", 1, vd(2)), KeyChange("j", None, vd(1))],),
        )
        writer.start()
        # Old code pauses holding the lock; the one statement never pauses.
        paused.wait(timeout=1)
        assert other.compare_and_set("elsewhere", None, vd(1))
        pause.clear()
        writer.join(timeout=10)
        assert other.head("k") == vd(2) and other.head("j") == vd(1)
    finally:
        pause.clear()
        frozen.close()
        other.close()


# -- PostgreSQL specifics -----------------------------------------------------------


def _other_backends(url: str, where: str = "true") -> list[int]:
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND " + where
        ).fetchall()
    return [int(r[0]) for r in rows]


def _terminate(url: str, pids: list[int]) -> None:
    """Kill server sessions and wait until they are gone."""
    with psycopg.connect(url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 30
    while set(pids) & set(_other_backends(url)):
        assert time.monotonic() < deadline, "terminated backends did not exit"
        time.sleep(0.02)


def test_postgres_dead_idle_connections_are_replaced(postgres_consensus_url: str) -> None:
    """A server restart or idle timeout must not turn the next write into an
    unknown outcome: pooled connections the server closed are discarded."""
    url = postgres_consensus_url
    c = PostgresConsensus(url)
    try:
        assert c.compare_and_set("k", None, vd(1, b"a"))
        _terminate(url, _other_backends(url))
        assert c.compare_and_set("k", 1, vd(2, b"b"))
        _terminate(url, _other_backends(url))
        assert c.head("k") == vd(2, b"b")
    finally:
        c.close()


def test_postgres_reads_retry_writes_report_unknown(
    postgres_consensus_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a connection dies under a statement, a read is retried once and
    a write raises ConsensusError (it may or may not have committed)."""
    import coordinator_lib.persist.postgres_consensus as pgc

    url = postgres_consensus_url
    c = PostgresConsensus(url)
    try:
        assert c.compare_and_set("k", None, vd(1, b"a"))
        # Pretend the liveness check missed the death (it races with it).
        monkeypatch.setattr(pgc, "_alive", lambda conn: True)
        _terminate(url, _other_backends(url))
        assert c.head("k") == vd(1, b"a")
        _terminate(url, _other_backends(url))
        with pytest.raises(ConsensusError):
            c.compare_and_set("k", 1, vd(2, b"b"))
        assert c.head("k") == vd(1, b"a")
        assert c.compare_and_set("k", 1, vd(2, b"b"))
    finally:
        c.close()


def test_postgres_write_killed_midway_is_unknown(postgres_consensus_url: str) -> None:
    url = postgres_consensus_url
    c = PostgresConsensus(url)
    outcome: list[object] = []
    try:
        assert c.compare_and_set("k", None, vd(1, b"a"))
        with psycopg.connect(url) as locker:  # not autocommit: holds the row lock
            locker.execute("SELECT * FROM consensus WHERE key = 'k' FOR UPDATE")

            def write() -> None:
                try:
                    outcome.append(c.compare_and_set("k", 1, vd(2, b"b")))
                except BaseException as exc:
                    outcome.append(exc)

            t = threading.Thread(target=write)
            t.start()
            deadline = time.monotonic() + 30
            while not (blocked := _other_backends(url, "wait_event_type = 'Lock'")):
                assert time.monotonic() < deadline, "the write never blocked"
                time.sleep(0.02)
            _terminate(url, blocked)
            t.join(timeout=30)
            locker.rollback()
        assert len(outcome) == 1 and isinstance(outcome[0], ConsensusError), outcome
        assert c.head("k") == vd(1, b"a")
        assert c.compare_and_set("k", 1, vd(2, b"b"))
    finally:
        c.close()


def test_postgres_pool_is_bounded_and_closed(postgres_consensus_url: str) -> None:
    """Short-lived threads (one per request) reuse pooled connections, and
    close() ends every session."""
    url = postgres_consensus_url
    c = PostgresConsensus(url, max_idle=2)
    for _ in range(20):
        t = threading.Thread(target=c.head, args=("k",))
        t.start()
        t.join()
    assert len(_other_backends(url)) <= 2
    c.close()
    deadline = time.monotonic() + 30
    while _other_backends(url):
        assert time.monotonic() < deadline, "close() left sessions open"
        time.sleep(0.02)


def test_postgres_concurrent_table_creation(postgres_consensus_url: str) -> None:
    """Many processes may open a fresh database at once; none may fail on
    the CREATE TABLE race."""
    n = 8
    barrier = threading.Barrier(n)
    opened: list[Consensus] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(timeout=60)
            opened.append(PostgresConsensus(postgres_consensus_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not errors, errors
        assert len(opened) == n
        assert opened[0].compare_and_set("k", None, vd(1))
        assert opened[-1].head("k") == vd(1)
    finally:
        for c in opened:
            c.close()


def test_postgres_unreachable_is_a_consensus_error() -> None:
    with pytest.raises(ConsensusError):
        PostgresConsensus("postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2")
