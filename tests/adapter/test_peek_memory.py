"""A one-off query over a table holds a bounded part of it, not all of it
(issue 18: the in-process soak's heap grew with its tables because each
whole-table query read its inputs' snapshots into Python lists first, and
glibc's arenas stayed fragmented after the peaks). Peaks are Python
allocations traced by tracemalloc while the answer is computed and read
(row by row, nothing kept), never times."""

from __future__ import annotations

import tracemalloc

from coordinator_lib.adapter.client import SessionClient

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
