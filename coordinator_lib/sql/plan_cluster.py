"""Plans of CREATE CLUSTER and DROP CLUSTER (syntax in `cluster_syntax.py`).

A cluster is a named set of `tidemark worker` processes (captures) that the
table scheduler spreads the cluster's materialized views over; its
replication factor is how many workers it has (see docs/scheduler.md:
unlike Materialize, where every replica runs every dataflow, a view here
runs on one worker at a time and moves when that worker dies).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from coordinator_lib.sql.cluster_syntax import CreateCluster
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.errors import InvalidParameter, ParseError, UnsupportedFeature
from coordinator_lib.sql.plans import Plan
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scope import ident_name, table_parts

MAX_REPLICATION_FACTOR = 64


@dataclass(frozen=True)
class CreateClusterPlan(Plan):
    name: str
    replication_factor: int = 1
    size: str | None = None
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropClusterPlan(Plan):
    names: tuple[str, ...]
    if_exists: bool = False
    cascade: bool = False


def plan_create_cluster(statement: Any, ctx: PlanContext) -> CreateClusterPlan:
    name = ident_name(statement.this)
    factor_node = statement.args.get("replication_factor")
    factor = 1
    if factor_node is not None:
        text = factor_node.name
        if not text.isdigit() or not 0 <= int(text) <= MAX_REPLICATION_FACTOR:
            raise InvalidParameter(
                f"REPLICATION FACTOR must be an integer from 0 to {MAX_REPLICATION_FACTOR}",
                position_of(factor_node),
            )
        factor = int(text)
    size_node = statement.args.get("size")
    size = size_node.name if size_node is not None else None
    replicas = statement.args.get("replicas")
    if replicas is not None:
        factor, size = _replicas_as_workers(statement, replicas)
    return CreateClusterPlan(
        name=name,
        replication_factor=factor,
        size=size,
        if_not_exists=bool(statement.args.get("exists")),
    )


def _replicas_as_workers(statement: Any, replicas: list[exp.Tuple]) -> tuple[int, str | None]:
    """An unmanaged cluster's REPLICAS list as Tidemark's cluster: one worker
    a replica (the replicas' names are not kept), all of one size."""
    for key in ("replication_factor", "size"):
        node = statement.args.get(key)
        if node is not None:
            raise InvalidParameter(
                "REPLICAS cannot be given with SIZE or REPLICATION FACTOR", position_of(node)
            )
    if len(replicas) > MAX_REPLICATION_FACTOR:
        raise InvalidParameter(
            f"a cluster has at most {MAX_REPLICATION_FACTOR} replicas", position_of(replicas[0])
        )
    names = [ident_name(r.expressions[0]) for r in replicas]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise InvalidParameter(
                f"replica {name} is given more than once", position_of(replicas[i])
            )
    sizes = {r.expressions[1].name for r in replicas}
    if len(sizes) > 1:
        raise UnsupportedFeature(
            "replicas of different sizes in one cluster are not supported",
            position_of(replicas[0]),
        )
    return len(replicas), next(iter(sizes), None)


def plan_drop_cluster(statement: exp.Drop, ctx: PlanContext) -> DropClusterPlan:
    names = []
    for table in statement.args.get("tables") or []:
        parts = table_parts(table)
        if len(parts) != 1:
            raise ParseError("a cluster name has no schema or database", position_of(table))
        names.append(parts[0])
    return DropClusterPlan(
        names=tuple(names),
        if_exists=bool(statement.args.get("exists")),
        cascade=bool(statement.args.get("cascade")),
    )


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {CreateCluster: plan_create_cluster}

__all__ = [
    "PLANNERS",
    "CreateClusterPlan",
    "DropClusterPlan",
    "plan_create_cluster",
    "plan_drop_cluster",
]
