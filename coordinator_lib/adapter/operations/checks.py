"""The asset checks' questions: frontiers sane and fresh, contents
matching the schema the RelationDesc implies, and a materialized view equal
to its query recomputed from its inputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrors

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    observe,
)
from coordinator_lib.adapter.operations.reading import contents, held
from coordinator_lib.adapter.verify import pandera_schema
from coordinator_lib.compute.dataflow import input_upper
from coordinator_lib.compute.error_collection import errors_at
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Update, consolidate


@dataclass(frozen=True)
class CheckOutcome:
    """An asset check's verdict: `passed`, what was wrong, and numbers to show."""

    passed: bool
    problems: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


def check_frontiers(
    coordinator: Coordinator,
    id: GlobalId,
    freshness_ms: int,
    recorded: Frontiers | None = None,
    observed: Frontiers | None = None,
) -> CheckOutcome:
    """since <= upper; lag (wall clock - upper) within `freshness_ms`; and
    neither frontier behind `recorded` (the last materialization's).
    `observed`: the frontiers to check when they are not this coordinator's
    (an index `tidemark serve` keeps in its memory)."""
    frontiers = observed if observed is not None else observe(coordinator, id)
    if frontiers is None:
        return CheckOutcome(False, (f"{id} has no frontiers",))
    problems = []
    since, upper = Frontier(frontiers.since), Frontier(frontiers.upper)
    if not (since.is_empty and upper.is_empty) and upper < since:
        problems.append(f"since {frontiers.since} is after upper {frontiers.upper}")
    lag = frontiers.lag_ms()
    if lag > freshness_ms:
        problems.append(f"lag {lag} ms exceeds the declared freshness of {freshness_ms} ms")
    if recorded is not None:
        if Frontier(frontiers.upper) < Frontier(recorded.upper):
            problems.append(f"upper {frontiers.upper} went back from {recorded.upper}")
        if Frontier(frontiers.since) < Frontier(recorded.since):
            problems.append(f"since {frontiers.since} went back from {recorded.since}")
    metadata = {
        "since": frontiers.since,
        "upper": frontiers.upper,
        "lag_ms": lag,
        "freshness_ms": freshness_ms,
    }
    return CheckOutcome(not problems, tuple(problems), metadata)


def schema_of(desc: RelationDesc) -> pa.DataFrameSchema:
    """verify.py's pandera schema of `desc`, plus its unique keys."""
    schema = pandera_schema(desc)
    keys = [k for k in desc.keys if k]
    if keys:
        schema = pa.DataFrameSchema(
            schema.columns,
            strict=True,
            coerce=False,
            unique=[desc.names[i] for i in keys[0]],
        )
    return schema


def check_schema(coordinator: Coordinator, id: GlobalId, max_rows: int = 100_000) -> CheckOutcome:
    """The contents at the latest readable time against the pandera schema
    derived from the RelationDesc (types, nullability, unique keys), and no
    negative multiplicities. Checks at most `max_rows` distinct rows."""
    desc = coordinator.catalog.get(id).desc
    rows = contents(coordinator, id)
    if rows is None:
        return CheckOutcome(True, (), {"rows_checked": 0})
    problems = [f"row {row!r} has multiplicity {diff}" for row, diff in rows if diff < 0][:10]
    expanded = [row for row, diff in rows[:max_rows] for _ in range(min(max(diff, 0), 2))]
    frame = pd.DataFrame(expanded, columns=list(desc.names), dtype=object)
    try:
        schema_of(desc).validate(frame, lazy=True)
    except SchemaErrors as errors:
        cases = errors.failure_cases
        for _, case in cases.head(10).iterrows():
            problems.append(
                f"column {case['column']}: {case['check']} failed on {case['failure_case']!r}"
            )
    except SchemaError as error:  # pragma: no cover - lazy validation collects instead
        problems.append(str(error))
    metadata = {"rows_checked": len(frame), "distinct_rows": len(rows)}
    return CheckOutcome(not problems, tuple(problems), metadata)


def check_consistency(coordinator: Coordinator, id: GlobalId) -> CheckOutcome:
    """The materialized view at its latest readable time has no errors (its
    error collection, compute/error_collection.py) and equals its query
    recomputed from its inputs at that time (invariant 6)."""
    item = coordinator.catalog.get(id)
    assert item.expr is not None
    frontiers = observe(coordinator, id)
    if frontiers is None or frontiers.upper is None or frontiers.since is None:
        return CheckOutcome(True, (), {"time": None})
    inputs = sorted(coordinator.storage_inputs(item.expr))
    shards = {i: coordinator.storage.shard(i) for i in inputs}
    # The latest time both the view and its inputs are complete at.
    at = Frontier(frontiers.upper).meet(input_upper(shards)).step_back()
    if at is None or at < frontiers.since:
        return CheckOutcome(True, (), {"time": None, "note": "nothing readable yet"})
    with held(coordinator, [id, *inputs], at):
        errors = errors_at(coordinator.storage.shard(id), at)
        if errors:  # the recompute would raise the first of them
            problems = [f"{message} (SQLSTATE {code}) x{n}" for code, message, n in errors]
            return CheckOutcome(False, tuple(problems), {"time": at, "errors": len(problems)})
        stored = coordinator.storage.snapshot(id, at)
        expected = coordinator.compute.peek_expr(coordinator.with_system_relations(item.expr), at)
    difference = consolidate(
        [Update(r, 0, d) for r, d in stored] + [Update(r, 0, -d) for r, d in expected]
    )
    extra = [f"extra {u.row!r} x{u.diff}" for u in difference if u.diff > 0]
    missing = [f"missing {u.row!r} x{-u.diff}" for u in difference if u.diff < 0]
    metadata = {
        "time": at,
        "view_rows": sum(d for _, d in stored),
        "recomputed_rows": sum(d for _, d in expected),
        "differences": len(difference),
    }
    return CheckOutcome(not difference, tuple((extra + missing)[:10]), metadata)
