"""The Dagster code location (`dagster dev -f definitions.py`, or `dg dev`).

The project is a `dg` project (`[tool.dg]` in pyproject.toml): its
definitions are the components under `demo/defs/`, here one Tidemark
component (`assets.component.TidemarkProject`, configured in
`demo/defs/tidemark/defs.yaml`): the demo's SQL files are applied
(idempotently) and the catalog is read when the location loads, giving one
asset per source, table, materialized view and index, their checks, the
timestamp sensor (which reports the steps of a live `tidemark serve`, or
runs the views refreshed on commit when their tables or sources have new
rows and no server runs), the automation sensor, the compaction sensor and
the REFRESH EVERY schedules. Objects created over pgwire appear at the next
reload. Runs use the in-process executor: one process, one coordinator and
at most one JVM per run.

Environment (all optional, overriding the defs.yaml): TIDEMARK_PROJECT,
TIDEMARK_DATA_DIR, TIDEMARK_CONSENSUS_URL, TIDEMARK_BLOB_ROOT,
TIDEMARK_SPARK_MASTER; TIDEMARK_FRESHNESS_MS: the lag (ms) a frontier check
tolerates.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.component import DEFAULT_PROJECT, build_definitions, coordinator_from_env

__all__ = ["DEFAULT_PROJECT", "build_definitions", "coordinator_from_env", "defs"]


@dg.definitions
def defs() -> dg.Definitions:
    """Loaded by Dagster's tools on demand (importing this module builds nothing)."""
    return dg.load_from_defs_folder(project_root=Path(__file__).resolve().parent)
