"""Tidemark as a Dagster component: a project's SQL folder and environment
settings in a `defs.yaml`, turned into the assets, checks, sensors,
schedules and the coordinator resource.

Add it to a `dg` project as Dagster's docs teach for any component:

    dg scaffold defs assets.component.TidemarkProject tidemark

then fill in `defs/tidemark/defs.yaml`:

    type: assets.component.TidemarkProject
    attributes:
      project_dir: ../../demo      # its sql/*.sql are applied on load
      data_dir: ../../demo/data    # consensus and blobs (or consensus_url, blob_root)
      spark_master: local[2]

Relative paths are taken from the folder of the `defs.yaml`. The
environment, where set, overrides the file (TIDEMARK_PROJECT,
TIDEMARK_DATA_DIR, TIDEMARK_CONSENSUS_URL, TIDEMARK_BLOB_ROOT,
TIDEMARK_SPARK_MASTER), so one `defs.yaml` serves `make run`, the tests and
a deployment; unset everywhere, the demo project and its `data/` are used.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from dagster.components.scaffold.scaffold import scaffold_with

from assets import build_assets, load_project
from resources import CoordinatorResource, pyspark_resource
from sensors import build_refresh_schedules, build_sensors, views_job

__all__ = [
    "DEFAULT_PROJECT",
    "TidemarkProject",
    "TidemarkProjectScaffolder",
    "build_definitions",
    "coordinator_from_env",
]

DEFAULT_PROJECT = Path(__file__).resolve().parents[1] / "demo"


def coordinator_from_env(
    project_dir: Path,
    data_dir: str | None = None,
    consensus_url: str | None = None,
    blob_root: str | None = None,
    spark_master: str | None = None,
) -> CoordinatorResource:
    """The coordinator resource: the given settings, else the environment's."""
    env = os.environ.get
    master = spark_master or env("TIDEMARK_SPARK_MASTER", "local[2]")
    return CoordinatorResource(
        data_dir=data_dir or env("TIDEMARK_DATA_DIR", str(project_dir / "data")),
        consensus_url=consensus_url or env("TIDEMARK_CONSENSUS_URL"),
        blob_root=blob_root or env("TIDEMARK_BLOB_ROOT"),
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


class TidemarkProjectScaffolder(dg.Scaffolder):
    """`dg scaffold defs`: a defs.yaml with every setting spelled out and a
    `sql/` folder beside it for the project's CREATE statements."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        dg.scaffold_component(
            request,
            {
                "project_dir": ".",
                "data_dir": "data",
                "consensus_url": None,
                "blob_root": None,
                "spark_master": "local[2]",
            },
        )
        (Path(request.target_path) / "sql").mkdir(parents=True, exist_ok=True)


@scaffold_with(TidemarkProjectScaffolder)
class TidemarkProject(dg.Component, dg.Model, dg.Resolvable):
    """A Tidemark project: one asset per source, table, materialized view
    and index of its environment (its `sql/*.sql` applied on load), their
    checks, the timestamp, automation and compaction sensors and the
    REFRESH EVERY schedules. Runs use the in-process executor."""

    project_dir: str | None = None
    data_dir: str | None = None
    consensus_url: str | None = None
    blob_root: str | None = None
    spark_master: str | None = None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        env = os.environ.get

        def path(variable: str, value: str | None) -> str | None:
            if env(variable):
                return env(variable)
            return None if value is None else str((context.path / value).resolve())

        project_dir = Path(path("TIDEMARK_PROJECT", self.project_dir) or DEFAULT_PROJECT)
        coordinator = coordinator_from_env(
            project_dir,
            data_dir=path("TIDEMARK_DATA_DIR", self.data_dir),
            consensus_url=env("TIDEMARK_CONSENSUS_URL") or self.consensus_url,
            blob_root=path("TIDEMARK_BLOB_ROOT", self.blob_root),
            spark_master=env("TIDEMARK_SPARK_MASTER") or self.spark_master,
        )
        return build_definitions(project_dir, coordinator)
