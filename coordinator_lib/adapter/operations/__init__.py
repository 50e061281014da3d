"""What an orchestrator does to an environment, one object at a time.

The Dagster code location (and anything else that drives Tidemark from the
outside) works through these functions over a `Coordinator` it opened with
`Config(background=False)`: no maintenance thread, nothing stepped unless a
function here says so. One module per concern:

- `project`: `apply_sql` applies a project's CREATE statements idempotently;
- `describe`: `catalog_objects` describes every source, table, materialized
  view and index (inputs, columns, column lineage, SQL, refresh period);
- `frontiers`: `observe` reads frontiers and never steps; `update_spans`
  says where a collection's updates are from batch metadata (no data read);
- `timestamps`: `assign_timestamps` only writes (seals tables and webhook
  sources through group commit, runs load generators): like `frontiers`,
  safe in a sensor tick, where Spark must never start;
- `materialize`: one object's work (seal a source, step a view, hydrate an
  index); `reading`: contents and changes under read holds;
- `external`: a PostgreSQL subsource's replication lag, an Iceberg sink's
  table (snapshot id, upper);
- `checks`: the asset checks' questions; `compaction`: the compaction
  sensor's pass.
"""

from coordinator_lib.adapter.maintainer import Maintainer
from coordinator_lib.adapter.operations.checks import (
    CheckOutcome,
    check_consistency,
    check_frontiers,
    check_schema,
)
from coordinator_lib.adapter.operations.compaction import CompactionReport, compact
from coordinator_lib.adapter.operations.describe import (
    INGESTION,
    POSTGRES,
    SUBSOURCES,
    WEBHOOK,
    CatalogObject,
    ColumnInfo,
    catalog_objects,
    find,
)
from coordinator_lib.adapter.operations.external import (
    ReplicationLag,
    SinkTable,
    iceberg_sink_table,
    replication_lag,
)
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    UpdateSpan,
    maintainer,
    observe,
    update_spans,
    updates_in,
)
from coordinator_lib.adapter.operations.materialize import Materialization, materialize
from coordinator_lib.adapter.operations.project import (
    Defined,
    apply_sql,
    leading_comment,
    split_statements,
)
from coordinator_lib.adapter.operations.reading import changes, contents, total_rows
from coordinator_lib.adapter.operations.timestamps import (
    assign_timestamps,
    seal,
    seal_timestamp,
)

__all__ = [
    "INGESTION",
    "POSTGRES",
    "SUBSOURCES",
    "WEBHOOK",
    "CatalogObject",
    "CheckOutcome",
    "ColumnInfo",
    "CompactionReport",
    "Defined",
    "Frontiers",
    "Maintainer",
    "Materialization",
    "ReplicationLag",
    "SinkTable",
    "UpdateSpan",
    "apply_sql",
    "assign_timestamps",
    "catalog_objects",
    "changes",
    "check_consistency",
    "check_frontiers",
    "check_schema",
    "compact",
    "contents",
    "find",
    "iceberg_sink_table",
    "leading_comment",
    "maintainer",
    "materialize",
    "observe",
    "replication_lag",
    "seal",
    "seal_timestamp",
    "split_statements",
    "total_rows",
    "update_spans",
    "updates_in",
]
