"""WITH (REFRESH EVERY '<interval>' | REFRESH ON COMMIT) on materialized views:
planned into `refresh_every_ms` (Dagster schedules such views) and kept in
the stored SQL so every process plans it again the same way."""

from __future__ import annotations

import pytest

from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.memory_catalog import InMemoryCatalog
from coordinator_lib.sql.plan import plan_statement
from coordinator_lib.sql.plans import CreateViewPlan


@pytest.fixture
def catalog() -> InMemoryCatalog:
    catalog = InMemoryCatalog()
    catalog.apply(plan_statement("CREATE TABLE t (a int)", catalog))
    return catalog


@pytest.mark.parametrize(
    ("options", "every"),
    [
        ("", None),
        ("WITH (REFRESH EVERY '1 minute')", 60_000),
        ("WITH (REFRESH EVERY '2h', RETAIN HISTORY FOR '1h')", 7_200_000),
        ("WITH (REFRESH ON COMMIT)", None),
    ],
)
def test_refresh_every_is_planned_and_round_trips(
    catalog: InMemoryCatalog, options: str, every: int | None
) -> None:
    plan = plan_statement(f"CREATE MATERIALIZED VIEW v {options} AS SELECT a FROM t", catalog)
    assert isinstance(plan, CreateViewPlan) and plan.refresh_every_ms == every
    again = plan_statement(plan.create_sql, catalog)
    assert isinstance(again, CreateViewPlan) and again.refresh_every_ms == every


@pytest.mark.parametrize(
    "options", ["WITH (REFRESH EVERY '0 s')", "WITH (REFRESH EVERY 5)", "WITH (REFRESH SOMETIMES)"]
)
def test_bad_refresh_options_are_refused(catalog: InMemoryCatalog, options: str) -> None:
    with pytest.raises(SqlError):
        plan_statement(f"CREATE MATERIALIZED VIEW v {options} AS SELECT a FROM t", catalog)
