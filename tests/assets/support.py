"""A demo environment for code location tests: the demo project's SQL
applied to a fresh data directory, and helpers that reach the environment
the way `tidemark serve` or psql would (a coordinator of their own)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from assets.metadata import MINIMUM_FRONTIER, frontier_ms
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.sql.catalog import QualifiedName
from definitions import DEFAULT_PROJECT, build_definitions
from resources import CoordinatorResource

DEMO = DEFAULT_PROJECT


@dataclass
class DemoEnv:
    data_dir: Path
    resource: CoordinatorResource
    defs: dg.Definitions

    @contextmanager
    def coordinator(self) -> Iterator[Coordinator]:
        """The environment as another process sees it."""
        coordinator = Coordinator(Config(data_dir=str(self.data_dir), background=False))
        try:
            yield coordinator
        finally:
            coordinator.close()

    def assets(self) -> list[dg.AssetsDefinition]:
        return [a for a in self.defs.assets or [] if isinstance(a, dg.AssetsDefinition)]

    def checks(self) -> list[dg.AssetChecksDefinition]:
        return list(self.defs.asset_checks or [])


def demo_env(tmp_path: Path, project: Path = DEMO) -> DemoEnv:
    resource = CoordinatorResource(data_dir=str(tmp_path / "data"))
    return DemoEnv(tmp_path / "data", resource, build_definitions(project, resource))


def project_env(tmp_path: Path, sql: str) -> DemoEnv:
    """A code location over a project of its own: `sql` in `project/sql/`."""
    project = tmp_path / "project"
    (project / "sql").mkdir(parents=True)
    (project / "sql" / "01_objects.sql").write_text(sql)
    return demo_env(tmp_path, project)


def key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["materialize", "public", name])


def id_of(coordinator: Coordinator, name: str):  # type: ignore[no-untyped-def]
    item = coordinator.catalog.index.lookup(QualifiedName("materialize", "public", name))
    assert item is not None, name
    return item.id


def run_sql(coordinator: Coordinator, statements: Sequence[str]) -> None:
    from coordinator_lib.adapter.client import Client

    session = Client(coordinator).startup("materialize")
    try:
        for sql in statements:
            list(session.execute(sql))
    finally:
        session.terminate()


def updates_between(coordinator: Coordinator, name: str, lower: int, upper: int) -> int:
    """Update records of collection `name` with times in [lower, upper)."""
    shard = coordinator.storage.shard(id_of(coordinator, name))
    return len(shard.updates_between(lower, Frontier.at(upper)))


def metadata_values(event: dg.AssetMaterialization) -> dict[str, object]:
    """Metadata as plain values; frontiers (shown as dates) in milliseconds."""
    return {
        k: frontier_ms(v.value)
        if isinstance(v, dg.TimestampMetadataValue) or getattr(v, "value", None) == MINIMUM_FRONTIER
        else getattr(v, "value", v)
        for k, v in event.metadata.items()
    }
