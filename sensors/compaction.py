"""The compaction sensor: the same pass `tidemark serve` runs
(coordinator.compaction_pass, through operations.compact): read policies move
each since along with its upper, shards are compacted, garbage collected.
No Spark, no dataflow steps. Collections whose frontiers moved since the last
tick are recorded as asset observations; the cursor keeps those frontiers.
"""

import json

import dagster as dg

from assets import Project, asset_key
from assets.metadata import frontier_time
from coordinator_lib.adapter import operations
from resources import CoordinatorResource

__all__ = ["COMPACTION_SECONDS", "build_compaction_sensor"]

COMPACTION_SECONDS = 60


def build_compaction_sensor(project: Project) -> dg.SensorDefinition:
    @dg.sensor(
        name="tidemark_compaction",
        minimum_interval_seconds=COMPACTION_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Applies read policies, compacts shards and records their frontiers.",
    )
    def tidemark_compaction(
        context: dg.SensorEvaluationContext, coordinator: CoordinatorResource
    ) -> dg.SensorResult:
        cursor = json.loads(context.cursor) if context.cursor else {}
        seen: dict[str, list[int | None]] = cursor.get("frontiers", {})
        with coordinator.open(spark=False) as opened:
            report = operations.compact(opened)
            names = {
                operations.find(opened, o.database, o.schema, o.name): o for o in project.objects
            }
        events = []
        frontiers: dict[str, list[int | None]] = {}
        for id, current in report.frontiers.items():
            obj = names.get(id)
            if obj is None:
                continue
            key = asset_key(obj)
            pair = [current.since, current.upper]
            frontiers[key.to_user_string()] = pair
            if seen.get(key.to_user_string()) != pair:
                events.append(
                    dg.AssetObservation(
                        asset_key=key,
                        metadata={
                            "since": frontier_time(current.since),
                            "upper": frontier_time(current.upper),
                            "compacted_batches": report.compacted_batches,
                            "collected_blobs": report.collected_blobs,
                        },
                    )
                )
        passes = int(cursor.get("passes", 0)) + 1
        context.log.info(
            f"compaction pass {passes}: {report.compacted_batches} batches compacted, "
            f"{report.collected_blobs} blobs collected, {len(events)} collections moved"
        )
        return dg.SensorResult(
            asset_events=events,
            cursor=json.dumps({"frontiers": frontiers, "passes": passes}, sort_keys=True),
        )

    return tidemark_compaction
