"""The arrangement store: keyed reads consolidated at the state's upper,
applies fenced by the expected upper, atomic under SIGKILL and races
between processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from coordinator_lib.persist.arrangement_store import ArrangementStore


def test_reads_are_consolidated_by_key_at_the_upper(tmp_path: Path) -> None:
    state = ArrangementStore(tmp_path / "a.db").state("v1")
    assert state.upper() is None
    joined = state.arrangement("join.0")
    assert state.apply(
        {"join.0": [((1,), (1, "a"), 1), ((1,), (1, "b"), 2), ((2,), (2, "c"), 1)]}, None, 5
    )
    assert state.apply({"join.0": [((1,), (1, "b"), -2), ((2,), (2, "c"), 1)]}, 5, 7)
    assert state.upper() == 7
    got = joined.read([(1,), (2,), (3,)])
    assert dict(got) == {(1,): [((1, "a"), 1)], (2,): [((2, "c"), 2)]}
    # A row whose multiplicity reached 0 is gone, not kept as a zero.
    assert sorted(joined.scan()) == [((1, "a"), 1), ((2, "c"), 2)]
    assert state.stats()["join.0"].rows == 2
    assert state.stats()["join.0"].updates == 3


def test_keys_and_rows_compare_as_python_does(tmp_path: Path) -> None:
    state = ArrangementStore(tmp_path / "a.db").state("v1")
    assert state.apply({"r": [((Decimal("1.0"),), (Decimal("1.0"), 2.5), 1)]}, None, 1)
    assert state.apply({"r": [((1,), (Decimal("1.00"), 2.5), -1)]}, 1, 2)
    assert state.arrangement("r").scan() == []


def test_a_writer_with_a_stale_upper_changes_nothing(tmp_path: Path) -> None:
    state = ArrangementStore(tmp_path / "a.db").state("v1")
    assert state.apply({"r": [((1,), (1,), 1)]}, None, 3)
    assert not state.apply({"r": [((1,), (1,), 5)]}, None, 4)  # "no state yet": fenced
    assert not state.apply({"r": [((1,), (1,), 5)]}, 2, 4)
    assert state.upper() == 3
    assert state.arrangement("r").read([(1,)]) == {(1,): [((1,), 1)]}


def test_replace_discards_the_old_contents(tmp_path: Path) -> None:
    state = ArrangementStore(tmp_path / "a.db").state("v1")
    assert state.apply({"a": [((1,), (1,), 1)], "b": [((2,), (2,), 1)]}, None, 3)
    assert state.apply({"a": [((9,), (9,), 1)]}, 3, 10, replace=True)
    assert state.arrangement("a").scan() == [((9,), 1)]
    assert state.arrangement("b").scan() == []


def test_state_survives_reopening_in_another_store(tmp_path: Path) -> None:
    first = ArrangementStore(tmp_path / "a.db")
    assert first.state("v1").apply({"r": [((1,), (1, "x"), 1)]}, None, 3)
    first.close()
    again = ArrangementStore(tmp_path / "a.db").state("v1")
    assert again.upper() == 3
    assert again.arrangement("r").read([(1,)]) == {(1,): [((1, "x"), 1)]}


def _race(path: str, writer: int, start: float, out: multiprocessing.Queue) -> None:
    state = ArrangementStore(path).state("v1")
    time.sleep(max(0.0, start - time.time()))
    won = state.apply({"r": [((k,), (k, writer), 1) for k in range(2000)]}, 1, 2)
    out.put((writer, won))


def test_two_processes_racing_from_one_upper_land_one_whole_apply(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    assert ArrangementStore(path).state("v1").apply({}, None, 1)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 2.0
    procs = [ctx.Process(target=_race, args=(path, w, start, out)) for w in (1, 2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert sorted(results.values()) == [False, True]
    winner = next(w for w, won in results.items() if won)
    rows = ArrangementStore(path).state("v1").arrangement("r").scan()
    assert sorted(rows) == [((k, winner), 1) for k in range(2000)]


def _write_forever(path: str, landed: Any) -> None:
    state = ArrangementStore(path).state("v1")
    upper = state.upper()
    assert upper is not None
    while True:
        # Every apply moves all 5000 rows of generation `upper` to `upper + 1`.
        updates = [((k,), (k, upper), -1) for k in range(5000)]
        updates += [((k,), (k, upper + 1), 1) for k in range(5000)]
        assert state.apply({"r": updates}, upper, upper + 1)
        upper += 1
        landed.set()


def test_sigkill_mid_apply_leaves_the_old_or_the_new_state_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    assert (
        ArrangementStore(path)
        .state("v1")
        .apply({"r": [((k,), (k, 1), 1) for k in range(5000)]}, None, 1)
    )
    ctx = multiprocessing.get_context("spawn")
    for delay in (0.0, 0.13, 0.29):
        landed = ctx.Event()
        proc = ctx.Process(target=_write_forever, args=(path, landed))
        proc.start()
        assert landed.wait(120)  # it landed an apply and goes on applying
        time.sleep(delay)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        state = ArrangementStore(path).state("v1")
        upper = state.upper()
        assert upper is not None
        assert sorted(state.arrangement("r").scan()) == [((k, upper), 1) for k in range(5000)]
    assert upper > 1  # the writer did land applies before it was killed


def _recount(path: Path, dataflow: str) -> dict[str, tuple[int, int, int]]:
    """Each operator's size counted from its rows, as a scan would."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return {
            op: (n, u, b)
            for op, n, u, b in conn.execute(
                "SELECT a.operator, count(*), sum(r.diff), sum(length(r.row) + 32)"
                " FROM arrangement a JOIN (SELECT arrangement, row, diff FROM arranged"
                " UNION ALL SELECT arrangement, row, diff FROM pending"
                " UNION ALL SELECT arrangement, row, diff FROM ordered) r"
                " ON r.arrangement = a.id WHERE a.dataflow = ? GROUP BY a.operator",
                (dataflow,),
            )
        }
    finally:
        conn.close()


def test_state_sizes_follow_every_write_without_a_scan(tmp_path: Path, monkeypatch: Any) -> None:
    """A view's state size (mz_internal, each Dagster materialization) is
    kept as the state is written: it equals a recount after inserts,
    updates, deletions to zero, replaces and drops of keyed, timed and
    ordered arrangements, and reading it costs the same at 20 rows as at
    20,000 (the old query scanned every row)."""
    import random
    import sqlite3

    from coordinator_lib.persist import arrangement_store

    steps = [0]

    def counting(path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for statement in arrangement_store._SCHEMA:
            conn.execute(statement)
        arrangement_store._create_sizes(conn)
        conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1) or 0, 1)
        return conn

    monkeypatch.setattr(arrangement_store, "_connect", counting)
    path = tmp_path / "a.db"
    store = ArrangementStore(path)
    state, other = store.state("v1"), store.state("v2")
    rng = random.Random(7)
    upper: int | None = None

    def sized(state: Any) -> dict[str, tuple[int, int, int]]:
        return {op: (s.rows, s.updates, s.bytes) for op, s in state.stats().items()}

    for step in range(1, 40):
        keyed = [
            (
                (rng.randrange(5),),
                (rng.randrange(8), "x" * rng.randrange(9)),
                rng.choice([1, 1, 2, -1]),
            )
            for _ in range(6)
        ]
        timed = [
            (step + rng.randrange(4), (rng.randrange(3),), rng.choice([1, -1])) for _ in range(3)
        ]
        ordered = [
            (
                (rng.randrange(3),),
                bytes([rng.randrange(4)]),
                (rng.randrange(4),),
                rng.choice([1, -1]),
            )
            for _ in range(3)
        ]
        assert state.apply(
            {"join": keyed},
            upper,
            step,
            replace=step == 20,
            timed={"pending": timed},
            ordered={"topk": ordered},
        )
        assert other.apply({"join": [((step,), (step,), 1)]}, upper, step)
        upper = step
        assert sized(state) == _recount(path, "v1")
        assert sized(other) == _recount(path, "v2")
    other.drop()
    assert sized(other) == {} == _recount(path, "v2")
    assert sized(state) == _recount(path, "v1")

    def cost_of_stats(state: Any, rows: int) -> int:
        steps[0] = 0
        assert state.stats()["r"].rows == rows
        return steps[0]

    small, large = store.state("small"), store.state("large")
    assert small.apply({"r": [((i,), (i, "v"), 1) for i in range(20)]}, None, 1)
    small_cost = cost_of_stats(small, 20)
    assert large.apply({"r": [((i,), (i, "v"), 1) for i in range(20_000)]}, None, 1)
    assert cost_of_stats(large, 20_000) <= small_cost * 2


def test_a_large_state_keeps_a_small_page_cache(tmp_path: Path) -> None:
    """The state lives on disk and in the OS's page cache; SQLite's own cache
    of it is on the server's heap, and filled toward 16 MiB a connection as the
    demo's state grew (issue 18's soak: the server's heap kept growing)."""
    from coordinator_lib.adapter.process_memory import process_memory

    before = process_memory()["sqlite"]
    state = ArrangementStore(tmp_path / "a.db").state("df")
    rows = 60_000
    batch = 20_000
    for first in range(0, rows, batch):
        updates = [((k,), (k, "x" * 100), 1) for k in range(first, first + batch)]
        assert state.apply({"op": updates}, first or None, first + batch)
    read = state.arrangement("op").read([(k,) for k in range(0, rows, 5)])
    assert len(read) == rows // 5
    on_disk = sum(f.stat().st_size for f in tmp_path.iterdir())
    grew = process_memory()["sqlite"] - before
    assert on_disk > 8 * 2**20
    assert grew < 3 * 2**20, f"SQLite's memory grew {grew / 2**20:.1f} MB for {on_disk} bytes"
