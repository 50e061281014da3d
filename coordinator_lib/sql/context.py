"""State shared while planning one statement: the catalog, what was resolved
(for dependencies and readable EXPLAIN), and the CTEs in scope."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from sqlglot import exp

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.catalog import CatalogItem, QualifiedName, SqlCatalog
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.outer import shift_outer
from coordinator_lib.sql.positions import position_of

if TYPE_CHECKING:
    from coordinator_lib.sql.plans import Plan
    from coordinator_lib.sql.query import BoundQuery
    from coordinator_lib.sql.scalar import ScalarBinder


class Planner(Protocol):
    """The planner as the modules below it call it back: a subquery is a
    query of its own, EXPLAIN and COPY plan a statement. `sql/plan.py`, the
    top of sql/, implements it (`PLANNER`); passing it in keeps the modules'
    imports one way (planner above binder) though planning recurses."""

    def plan_query(self, node: exp.Expr, ctx: PlanContext) -> BoundQuery: ...

    def visible(self, query: BoundQuery, node: exp.Expr | None = None) -> RelationExpr: ...

    def coerce_columns(
        self,
        query: BoundQuery,
        targets: list[ScalarType],
        assignment: bool,
        nodes: list[exp.Expr | None],
        what: str,
    ) -> RelationExpr: ...

    def plan_statement(self, statement: exp.Expr, ctx: PlanContext) -> Plan: ...


@dataclass(frozen=True)
class CteBinding:
    """A WITH query, planned once and inlined wherever it is named."""

    expr: RelationExpr
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    # How many queries enclose the one that defines it (len(PlanContext.outer)):
    # its references to their columns are relative to that level.
    level: int | None = None


@dataclass
class PlanContext:
    catalog: SqlCatalog
    text: str
    planner: Planner
    # Every catalog item a name resolved to (views included, though inlined).
    references: set[GlobalId] = field(default_factory=set)
    names: dict[GlobalId, QualifiedName] = field(default_factory=dict)
    ctes: list[dict[str, CteBinding]] = field(default_factory=list)
    # id() of each exp.Table that named a catalog item -> the item's name, so the
    # stored create_sql can print every reference fully qualified.
    qualified: dict[int, QualifiedName] = field(default_factory=dict)
    # Binders of the queries enclosing the subquery being planned, innermost last.
    outer: list[ScalarBinder] = field(default_factory=list)

    def resolve(self, parts: tuple[str, ...], node: exp.Expr | None = None) -> CatalogItem:
        """Resolve a name through the catalog, recording it; errors get `node`'s position."""
        try:
            item = self.catalog.resolve(parts)
        except SqlError as error:
            raise error.at(position_of(node)) from None
        self.references.add(item.id)
        self.names[item.id] = item.name
        if isinstance(node, exp.Table):
            self.qualified[id(node)] = item.name
        return item

    def cte(self, name: str) -> CteBinding | None:
        """The WITH query `name`, its outer references adjusted to the level
        it is named at (a subquery may name its enclosing query's CTE)."""
        for frame in reversed(self.ctes):
            if name in frame:
                binding = frame[name]
                if binding.level is None:
                    return binding
                deeper = len(self.outer) - binding.level
                if deeper <= 0:
                    return binding
                return replace(binding, expr=shift_outer(binding.expr, deeper))
        return None

    def readable_names(self) -> dict[GlobalId, str]:
        return {gid: str(name) for gid, name in self.names.items()}
