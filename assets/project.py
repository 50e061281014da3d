"""A Tidemark project: a folder of `.sql` files with CREATE statements.

Loading it applies the statements idempotently (objects that exist are left
as they are) and reads the catalog, so the code location shows every object
of the environment: the project's and those created over pgwire since (they
appear at the next code location reload). Loading opens the environment
without Spark: nothing here runs a dataflow step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coordinator_lib.adapter import operations
from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.adapter.operations.project import Defined
from coordinator_lib.repr.global_id import GlobalId
from resources import CoordinatorResource

__all__ = ["DEFAULT_FRESHNESS_MS", "Project", "load_project"]

# How far (wall clock - upper) an object may lag before its frontier check
# fails, unless TIDEMARK_FRESHNESS_MS says otherwise. A view refreshed every
# N ms may lag up to twice that.
DEFAULT_FRESHNESS_MS = 300_000


@dataclass(frozen=True)
class Project:
    """The objects to show, where the project's SQL defines them, and the
    freshness each object declares."""

    objects: tuple[CatalogObject, ...]
    defined: Mapping[str, Defined] = field(default_factory=dict)
    freshness_ms: int = DEFAULT_FRESHNESS_MS

    def by_id(self) -> dict[GlobalId, CatalogObject]:
        return {obj.id: obj for obj in self.objects}

    def qualified_name(self, obj: CatalogObject) -> str:
        return str(_qualified(obj))

    def definition(self, obj: CatalogObject) -> Defined | None:
        return self.defined.get(self.qualified_name(obj))

    def freshness_of(self, obj: CatalogObject) -> int:
        if obj.refresh_every_ms is not None:
            return max(self.freshness_ms, 2 * obj.refresh_every_ms)
        return self.freshness_ms


def _qualified(obj: CatalogObject) -> object:
    from coordinator_lib.sql.catalog import QualifiedName

    return QualifiedName(obj.database, obj.schema, obj.name)


def load_project(coordinator: CoordinatorResource, sql_dir: Path | None) -> Project:
    """Apply `sql_dir/*.sql` (in file name order) and describe the catalog."""
    defined: dict[str, Defined] = {}
    with coordinator.open(spark=False) as opened:
        if sql_dir is not None:
            for path in sorted(sql_dir.glob("*.sql")):
                for item in operations.apply_sql(opened, path.read_text(), str(path.resolve())):
                    defined[item.name] = item
        objects = tuple(operations.catalog_objects(opened))
    freshness = int(os.environ.get("TIDEMARK_FRESHNESS_MS", DEFAULT_FRESHNESS_MS))
    return Project(objects, defined, freshness)
