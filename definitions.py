"""The Dagster code location (`dagster dev -f definitions.py`).

A thin shell over coordinator_lib: the project's SQL files are applied
(idempotently) and the catalog is read when the location loads, giving one
asset per source, table, materialized view and index, their checks, the
timestamp-assignment sensor (which also runs the views refreshed on commit
when their tables or sources have new updates), the automation sensor (the
eager condition of on-commit views reading a view), the compaction sensor
and the REFRESH EVERY schedules. Objects created over pgwire appear at the next reload.
Runs use the in-process executor: one process, one coordinator and at most
one JVM per run.

Environment (all optional):
- TIDEMARK_PROJECT: the project folder (default `demo/`), its SQL in `sql/`;
- TIDEMARK_DATA_DIR: the environment directory (default `<project>/data`);
- TIDEMARK_CONSENSUS_URL, TIDEMARK_BLOB_ROOT, TIDEMARK_SPARK_MASTER;
- TIDEMARK_FRESHNESS_MS: the lag (ms) a frontier check tolerates.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from assets import build_assets, load_project
from resources import CoordinatorResource, pyspark_resource
from sensors import build_refresh_schedules, build_sensors, views_job

DEFAULT_PROJECT = Path(__file__).resolve().parent / "demo"


def coordinator_from_env(project_dir: Path) -> CoordinatorResource:
    master = os.environ.get("TIDEMARK_SPARK_MASTER", "local[2]")
    return CoordinatorResource(
        data_dir=os.environ.get("TIDEMARK_DATA_DIR", str(project_dir / "data")),
        consensus_url=os.environ.get("TIDEMARK_CONSENSUS_URL"),
        blob_root=os.environ.get("TIDEMARK_BLOB_ROOT"),
        spark_master=master,
        pyspark=pyspark_resource(master),
    )


def build_definitions(
    project_dir: Path | None = None, coordinator: CoordinatorResource | None = None
) -> dg.Definitions:
    """Definitions for the project in `project_dir` (its `sql/` folder, if
    any, is applied first) on the environment `coordinator` opens."""
    project_dir = project_dir or Path(os.environ.get("TIDEMARK_PROJECT", DEFAULT_PROJECT))
    coordinator = coordinator or coordinator_from_env(project_dir)
    sql_dir = project_dir / "sql"
    project = load_project(coordinator, sql_dir if sql_dir.is_dir() else None)
    assets, checks = build_assets(project)
    job = views_job(project)
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[job] if job is not None else [],
        sensors=build_sensors(project, job),
        schedules=build_refresh_schedules(project),
        resources={"coordinator": coordinator},
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Loaded by Dagster's tools on demand (importing this module builds nothing)."""
    return build_definitions()
