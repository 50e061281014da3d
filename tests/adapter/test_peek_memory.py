"""A one-off query over a table holds a bounded part of it, not all of it
(issue 18: the in-process soak's heap grew with its tables because each
whole-table query read its inputs' snapshots into Python lists first, and
glibc's arenas stayed fragmented after the peaks). Peaks are Python
allocations traced by tracemalloc while the answer is computed and read
(row by row, nothing kept), never times."""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest

from coordinator_lib.adapter.client import SessionClient
from coordinator_lib.compute import local, local_backend
from coordinator_lib.persist import shard
from tests.adapter.conftest import run_on

SMALL, LARGE = 10_000, 40_000

# A scan (the persist fast path), a filter, an aggregate, a grouped
# aggregate and a join (stream_peek): none needs more than a batch of `t`
# at once.
QUERIES = (
    "SELECT * FROM t",
    "SELECT id, label FROM t WHERE amount < 0",
    "SELECT count(*), sum(amount), max(amount) FROM t",
    "SELECT id % 50, count(*), max(amount) FROM t GROUP BY id % 50",
    # `t` on the join's right: the index is built of the smaller input
    "SELECT count(*), sum(t.id) FROM small s JOIN t ON t.amount = s.amount",
)


def _fill(session: SessionClient, start: int, end: int) -> None:
    """Rows `start` to `end - 1` of `t` (errors raise)."""
    sql = "INSERT INTO t SELECT g, 'row number ' || g, g % 1000 FROM generate_series({}, {}) g"
    list(session.execute(sql.format(start, end - 1)))


def _peak(session: SessionClient, query: str) -> tuple[int, int]:
    """Traced bytes at the query's peak above where it started, and its rows."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    count = 0
    for response in session.execute(query):
        for _ in response.rows or ():
            count += 1
    return tracemalloc.get_traced_memory()[1] - before, count


def _peaks(session: SessionClient) -> dict[str, tuple[int, int]]:
    tracemalloc.start()
    try:
        return {query: _peak(session, query) for query in QUERIES}
    finally:
        tracemalloc.stop()


def test_a_one_off_query_holds_a_batch_of_its_input_not_the_table(
    local_session: SessionClient,
) -> None:
    """Each query's peak over 40,000 rows of `t` is about its peak over
    10,000 (a batch of rows and the answer), and far below the table as
    Python rows (about 160 bytes a row: 6 MB). Before the inputs streamed
    every peak grew with the table (2.9 MB over 10,000 rows, 10.5-12.4 MB
    over 40,000); before the join indexed its smaller input, the join's."""
    list(local_session.execute("CREATE TABLE t (id int, label text, amount int)"))
    list(local_session.execute("CREATE TABLE small (amount int, name text)"))
    list(
        local_session.execute("INSERT INTO small SELECT g, 'n' || g FROM generate_series(0, 99) g")
    )
    _fill(local_session, 0, SMALL)
    small = _peaks(local_session)
    _fill(local_session, SMALL, LARGE)
    large = _peaks(local_session)
    for query in QUERIES:
        (small_peak, small_rows), (large_peak, large_rows) = small[query], large[query]
        if query == "SELECT * FROM t":
            assert (small_rows, large_rows) == (SMALL, LARGE)
        assert large_peak < 4 << 20, f"{query}: {large_peak / 2**20:.1f} MB at its peak"
        assert large_peak < small_peak + (1 << 20), (
            f"{query}: peak {small_peak / 2**20:.1f} MB over {SMALL} rows, "
            f"{large_peak / 2**20:.1f} MB over {LARGE}"
        )


# The soak's three statements whose peaks grew with its tables (issue 18):
# the canceled cross join of `bids` three ways (here its first rows read,
# the rest left), the ad-hoc join of two growing inputs, and `count(*)`. Each with
# how many of its rows are read (None: all) and its rows over `rows` rows
# of `t`.
GROWING = (
    ("SELECT a.id, b.id, c.label FROM t a, t b, t c", 100, lambda rows: None),
    (
        "SELECT a.id % 4, count(*), max(b.amount) FROM t a JOIN t b ON b.id = a.id "
        "GROUP BY a.id % 4",
        None,
        lambda rows: [(k, rows // 4, max(i % 1000 for i in range(k, rows, 4))) for k in range(4)],
    ),
    ("SELECT count(*) FROM t", None, lambda rows: [(rows,)]),
)

# A join's chunk and a snapshot's batch, made small so the test is quick.
GROWING_ROWS = 512


def _growing_peak(
    session: SessionClient, query: str, limit: int | None
) -> tuple[int, list[tuple[Any, ...]]]:
    """Traced bytes at the query's peak above where it started, and the
    rows read (the first `limit`; the rest left unread)."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    read: list[tuple[Any, ...]] = []
    for response in session.execute(query):
        rows = iter(response.rows or ())
        read += itertools.islice(rows, limit)
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    return tracemalloc.get_traced_memory()[1] - before, read


def test_joins_and_counts_hold_a_chunk_of_growing_tables(
    local_session: SessionClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soak's growing statements over GROWING_ROWS rows of `t` (a join's
    chunk and a snapshot's batch) and 8 times as many: each peak over the
    larger `t` is within 0.5 MB of its peak over the smaller (a join
    indexes a chunk at a time and reads the other input again; a count
    holds a batch). Before, each join's index held `t` whole (numbers in
    the commit that made the test this size)."""
    monkeypatch.setattr(local_backend, "JOIN_CHUNK_ROWS", GROWING_ROWS)
    monkeypatch.setattr(shard, "SNAPSHOT_BATCH_ROWS", GROWING_ROWS)
    monkeypatch.setattr(local, "SORTED_UP_TO", 100)  # rows computed before the first is sent
    list(local_session.execute("CREATE TABLE t (id int, label text, amount int)"))
    peaks: list[dict[str, int]] = []
    for start, end in ((0, GROWING_ROWS), (GROWING_ROWS, 8 * GROWING_ROWS)):
        _fill(local_session, start, end)
        tracemalloc.start()
        try:
            found = {
                query: _growing_peak(local_session, query, limit) for query, limit, _ in GROWING
            }
        finally:
            tracemalloc.stop()
        for query, limit, expected in GROWING:
            rows = found[query][1]
            if limit is None:
                assert sorted(rows) == expected(end), query
            else:
                assert len(rows) == limit, query
        peaks.append({query: peak for query, (peak, _) in found.items()})
    small, large = peaks
    grown = [
        f"{query}: {small[query] / 2**20:.2f} MB over {GROWING_ROWS} rows, "
        f"{large[query] / 2**20:.2f} MB over {8 * GROWING_ROWS}"
        for query, _, _ in GROWING
        if large[query] >= small[query] + (1 << 19)
    ]
    assert not grown, grown


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*), sum(a.id), sum(b.id) FROM t a, u b",
        "SELECT count(*), sum(a.id * b.id * c.id) FROM t a, u b, t c",
        "SELECT a.id, b.id FROM t a, u b WHERE a.id < b.id",
        "SELECT a.id, b.label FROM t a JOIN u b ON a.amount = b.amount",
        "SELECT a.id, b.id FROM t a LEFT JOIN u b ON a.amount = b.amount",
        "SELECT x.id, x.label, b.id "
        "FROM (SELECT a.id, b.label FROM t a JOIN u b ON a.id = b.id) x, u b",
    ],
)
def test_a_chunked_join_has_the_rows_of_one_index(
    local_session: SessionClient, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """Joins with chunks of 2 rows (several chunks, NULL keys, duplicate
    keys, an input of unknown size) answer as with one index."""
    statements = (
        "CREATE TABLE t (id int, label text, amount int)",
        "CREATE TABLE u (id int, label text, amount int)",
        "INSERT INTO t SELECT g, 'row ' || g, g % 3 FROM generate_series(1, 9) g",
        "INSERT INTO t VALUES (10, NULL, NULL), (11, 'x', 1)",
        "INSERT INTO u SELECT g, 'u ' || g, g % 4 FROM generate_series(1, 7) g",
        "INSERT INTO u VALUES (8, NULL, NULL)",
    )
    for statement in statements:
        list(local_session.execute(statement))
    run = run_on(local_session)
    whole = sorted(run(query), key=repr)
    monkeypatch.setattr(local_backend, "JOIN_CHUNK_ROWS", 2)
    monkeypatch.setattr(local_backend, "JOIN_MAX_PASSES", 100)
    assert sorted(run(query), key=repr) == whole
    assert whole
