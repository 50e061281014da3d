"""What each step of a view read, over pgwire (issue 14):
mz_internal.mz_dataflow_step_reads lists the latest steps of the dataflows
the server runs, with the rows each read from its inputs' updates (the
delta), from inputs' whole contents (snapshots) and from arranged state, so
a slow step can be explained by a query."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.server.test_view_errors import running

pytestmark = pytest.mark.timeout(120)

STEPS = (
    "SELECT lower, upper, engine, rows_from_delta, rows_from_snapshot, rows_from_state,"
    " rows_written, seconds FROM mz_internal.mz_dataflow_step_reads"
    " WHERE name = 'per_item' AND rows_from_delta > 0 ORDER BY upper"
)


def test_each_step_shows_the_rows_it_read(tmp_path: Path) -> None:
    with running(tmp_path / "env") as conn:
        conn.execute("CREATE TABLE orders (id int, item text)")
        conn.execute(
            "CREATE MATERIALIZED VIEW per_item AS SELECT item, count(*) AS n"
            " FROM orders GROUP BY item"
        )
        conn.execute("INSERT INTO orders VALUES (1, 'kettle'), (2, 'lamp'), (3, 'lamp')")
        # A SELECT waits for the view to reach the write.
        assert conn.execute("SELECT n FROM per_item WHERE item = 'lamp'").fetchall() == [(2,)]
        conn.execute("INSERT INTO orders VALUES (4, 'lamp')")
        assert conn.execute("SELECT * FROM per_item ORDER BY item").fetchall() == [
            ("kettle", 1),
            ("lamp", 3),
        ]
        deadline = time.monotonic() + 30
        while len(steps := conn.execute(STEPS).fetchall()) < 1 or sum(s[3] for s in steps) < 4:
            assert time.monotonic() < deadline, steps
            time.sleep(0.1)
        for lower, upper, engine, _, snapshot, _, written, seconds in steps:
            assert lower < upper and engine == "local" and written > 0 and seconds >= 0
            assert snapshot == 0  # the inputs were empty at the view's as_of
        # The last step took in one order of a known item: it read that one
        # update and lamp's accumulator from the state, nothing else.
        assert steps[-1][3:6] == (1, 0, 1)
