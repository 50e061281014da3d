"""What an in-process step does per delta row, counted (never timed): the
scalar interpreter is not run per row for expressions the step compiles,
a group key it must interpret is evaluated a bounded number of times per
row, and a step reads state rows for the keys it touches only. Each count
fails if a change makes a small step's work grow again (issue 14: a step
costs its delta)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coordinator_lib.compute import local_scalar
from coordinator_lib.expr.scalar import CallUnary, UnaryFunc
from tests.compute.test_arrangements import _check, _ids, _last_step, _session
from tests.compute.test_sql_differential import TABLES

# A join under a GROUP BY on arithmetic, with a filter, a SUM of arithmetic
# and a MAX: only nodes the step compiles (columns, literals, comparisons,
# integer arithmetic, AND).
COMPILED = (
    "SELECT t.k % 10 AS g, count(*) AS n, sum(t.v * 2) AS s, max(t.v + u.w) AS m"
    " FROM t JOIN u ON t.k = u.k WHERE t.v > 5 AND u.w >= 0 GROUP BY t.k % 10"
)
# A group key the step interprets (length is not compiled).
INTERPRETED_KEY = "SELECT length(s) AS l, count(*) AS n FROM t GROUP BY length(s)"
QUERIES = {"compiled": COMPILED, "interpreted_key": INTERPRETED_KEY}
BASE, DELTA = 3_000, 20


class _Evaluations:
    """Calls of the scalar interpreter (`local_scalar._eval`, each node it
    walks counts), and of it on `length(...)` nodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nodes = 0
        self.lengths = 0
        interpret = local_scalar._eval

        def counted(expr: Any, row: Any, types: Any) -> Any:
            self.nodes += 1
            if isinstance(expr, CallUnary) and expr.func is UnaryFunc.LENGTH:
                self.lengths += 1
            return interpret(expr, row, types)

        monkeypatch.setattr(local_scalar, "_eval", counted)

    def reset(self) -> None:
        self.nodes = self.lengths = 0


def _t_row(rng: random.Random) -> tuple[int, int, str]:
    return (rng.randrange(500), rng.randrange(10**6), "x" * rng.randrange(1, 30))


def test_a_step_evaluates_each_delta_rows_scalars_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(14)
    session = _session(tmp_path)
    try:
        for ddl in TABLES:
            session.execute(ddl)
        ids = _ids(session)
        session._write(ids["t"], Counter(_t_row(rng) for _ in range(BASE)))
        session._write(ids["u"], Counter((k, k % 7, f"n{k}") for k in range(500)))
        for name, sql in QUERIES.items():
            session.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
        views = {name: id for id, name in session.views.items()}
        session.step()  # hydration
        evaluations = _Evaluations(monkeypatch)
        for _ in range(2):
            delta = Counter(_t_row(rng) for _ in range(DELTA))
            session._write(ids["t"], delta)
            evaluations.reset()
            session.step()
            # Compiled once per operator and step: no node of COMPILED is
            # interpreted row by row (before: every node, on every row, at
            # each of the filter, the join keys, the check and the group key).
            # The only interpreted nodes are INTERPRETED_KEY's length(s) and
            # its column s.
            assert evaluations.nodes == 2 * evaluations.lengths, evaluations.nodes
            # length(s) of each delta row: once by the Reduce's check (its
            # errors become the view's), once as its group key; not again
            # when the touched groups are read or arranged.
            assert evaluations.lengths <= 2 * DELTA, evaluations.lengths
            # ...and at least once each: the counter sees the interpreter
            # (else the counts above would hold for want of counting).
            assert evaluations.lengths >= DELTA, evaluations.lengths
            for name, id in views.items():
                reads = _last_step(session, id).reads
                assert reads is not None and reads.snapshot == 0, (name, reads)
                # The touched groups' state (one accumulator row each, the
                # MAX's first values) and the join's matching rows, never
                # more than a few rows per delta row.
                assert reads.state <= 3 * DELTA, (name, reads)
        _check(session, views, QUERIES)
    finally:
        session.close()
