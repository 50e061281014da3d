"""Asset checks, asked of the coordinator (operations.check_*):

- `frontiers` (every object): since <= upper, lag within the object's
  declared freshness, and neither frontier behind the last materialization's;
- `schema` (objects with a collection): the rows at the latest readable time
  against the pandera schema derived from the RelationDesc;
- `consistency` (materialized views): the view at its latest readable time
  equals its query recomputed from its inputs at that time.

`schema` and `consistency` are blocking: in a run that materializes an asset
and its checks, a failed one stops the assets downstream of it.
"""

import dagster as dg

from assets.factory import current_id, served_index_state
from assets.keys import asset_key
from assets.metadata import recorded_frontiers
from assets.project import Project
from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations.checks import CheckOutcome
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.adapter.operations.frontiers import Frontiers
from coordinator_lib.sql.catalog import ItemKind
from resources import CoordinatorResource

__all__ = ["build_checks"]


def _result(outcome: CheckOutcome) -> dg.AssetCheckResult:
    metadata = {k: v for k, v in outcome.metadata.items() if v is not None}
    if outcome.problems:
        metadata["problems"] = dg.MetadataValue.md(
            "\n".join(f"- {problem}" for problem in outcome.problems)
        )
    return dg.AssetCheckResult(
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
        description="; ".join(outcome.problems) if outcome.problems else None,
    )


def build_checks(obj: CatalogObject, project: Project) -> list[dg.AssetChecksDefinition]:
    key = asset_key(obj)
    freshness_ms = project.freshness_of(obj)
    checks = []

    @dg.asset_check(
        asset=key,
        name="frontiers",
        description=f"since <= upper, lag within {freshness_ms} ms, no frontier went back",
    )
    def frontiers(
        context: dg.AssetCheckExecutionContext, coordinator: CoordinatorResource
    ) -> dg.AssetCheckResult:
        opened = coordinator.coordinator()
        id = current_id(opened, obj)
        recorded = observed = None
        if obj.kind is ItemKind.INDEX:
            # The index tidemark serve keeps, while one is live; else the one
            # this run's process holds (an index's arrangement is per process,
            # so there is no recorded frontier to compare with).
            state = served_index_state(operations.maintainer(opened), id)
            observed = Frontiers(state.since, state.upper) if state is not None else None
        else:
            found = recorded_frontiers(context.instance, key)
            recorded = Frontiers(*found) if found is not None else None
        outcome = operations.check_frontiers(opened, id, freshness_ms, recorded, observed)
        return _result(outcome)

    checks.append(frontiers)

    if obj.has_collection:

        @dg.asset_check(
            asset=key,
            name="schema",
            blocking=True,
            description="rows match the pandera schema derived from the RelationDesc",
        )
        def schema(coordinator: CoordinatorResource) -> dg.AssetCheckResult:
            opened = coordinator.coordinator()
            return _result(operations.check_schema(opened, current_id(opened, obj)))

        checks.append(schema)

    if obj.kind is ItemKind.MATERIALIZED_VIEW:

        @dg.asset_check(
            asset=key,
            name="consistency",
            blocking=True,
            description="the view at its latest readable time equals a recompute of its query",
        )
        def consistency(coordinator: CoordinatorResource) -> dg.AssetCheckResult:
            opened = coordinator.coordinator()
            return _result(operations.check_consistency(opened, current_id(opened, obj)))

        checks.append(consistency)
    return checks
