"""A run's view step resumes from the view's durable upper (issue 16).

While a Dagster run works, `tidemark serve` (another coordinator on the same
environment) may step the view past where the run found it and compact the
view's inputs behind its new upper. The run then steps from the view's
durable upper to its inputs' upper: it does not fail (ReadBeforeSince, seen
in "Materialize all" on the demo), and it does not give up either (b7b2264
recorded "no step" and left the view behind its inputs). The race is made
certain: the server steps and compacts right before the run holds its
inputs."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.repr.global_id import GlobalId
from tests.assets.support import id_of, project_env, run_sql

# The module (the package re-exports its function under the same name).
materializing = importlib.import_module("coordinator_lib.adapter.operations.materialize")

SQL = """
CREATE TABLE orders (id bigint NOT NULL, item text NOT NULL);
CREATE MATERIALIZED VIEW order_counts AS
    SELECT item, count(*) AS orders FROM orders GROUP BY item;
"""


def test_a_run_resumes_where_the_server_left_the_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = project_env(tmp_path, SQL)
    config = Config(data_dir=str(env.data_dir), background=False, default_retain_history_ms=1)
    server, run = Coordinator(config), Coordinator(config)
    try:
        run_sql(server, ["INSERT INTO orders VALUES (1, 'kettle')"])
        server.step_once()
        view, table = id_of(run, "order_counts"), id_of(run, "orders")
        run_sql(server, ["INSERT INTO orders VALUES (4, 'desk')"])  # the run has a step to take
        before = operations.observe(run, view)
        assert before is not None and before.upper is not None

        original = materializing.held
        raced: list[int] = []

        @contextmanager
        def server_moves_first(
            coordinator: Coordinator, ids: Sequence[GlobalId], at: int
        ) -> Iterator[None]:
            if not raced:
                # The server steps the view on, more rows arrive after that
                # step, and compaction moves the table past where the run
                # found the view.
                run_sql(server, ["INSERT INTO orders VALUES (2, 'lamp')"])
                server.step_once()
                run_sql(server, ["INSERT INTO orders VALUES (3, 'lamp')"])
                time.sleep(0.01)
                server.compaction_pass()
                since = operations.observe(server, table).since  # type: ignore[union-attr]
                assert since is not None and since > at, "the race did not happen"
                raced.append(at)
            with original(coordinator, ids, at):
                yield

        monkeypatch.setattr(materializing, "held", server_moves_first)
        done = operations.materialize(run, view)
        assert raced
        table_upper = operations.observe(run, table).upper  # type: ignore[union-attr]
        # The run stepped, from where the server had left the view, to the
        # table's upper: the view took in the last row.
        assert done.step_lower is not None and done.step_lower > before.upper
        assert done.upper == table_upper
        rows = operations.contents(run, view)
        assert sorted(rows or []) == [(("desk", 1), 1), (("kettle", 1), 1), (("lamp", 2), 1)]
    finally:
        run.close()
        server.close()
