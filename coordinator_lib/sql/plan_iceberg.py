"""Plans of Iceberg catalog connections and Iceberg sinks (syntax in
`iceberg_syntax.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.errors import InvalidParameter, UnknownColumn, WrongObjectType
from coordinator_lib.sql.iceberg_syntax import CreateIcebergConnection, CreateIcebergSink
from coordinator_lib.sql.plan_core import check_new_name, item_create_sql, qualify_name
from coordinator_lib.sql.plans import Plan
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scope import ident_name, table_parts

# What a sink can read: relations with a durable collection.
SINKABLE = (ItemKind.TABLE, ItemKind.SOURCE, ItemKind.MATERIALIZED_VIEW)


@dataclass(frozen=True)
class CreateIcebergConnectionPlan(Plan):
    """pyiceberg's SQL catalog: a SQLAlchemy `uri` and a `warehouse` location."""

    name: QualifiedName
    uri: str
    warehouse: str
    if_not_exists: bool = False
    create_sql: str = ""


@dataclass(frozen=True)
class CreateIcebergSinkPlan(Plan):
    """`key`: the upsert key's column indexes; None for MODE APPEND."""

    name: QualifiedName
    from_id: GlobalId
    desc: RelationDesc
    connection: GlobalId
    namespace: str
    table: str
    key: tuple[int, ...] | None = None
    if_not_exists: bool = False
    create_sql: str = ""


def _options(statement: Any, wanted: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for option in statement.args.get("options") or []:
        value = option.args["value"]
        if option.name in values:
            raise InvalidParameter(f"option {option.name} given twice", position_of(option))
        if not value.is_string or not value.this:
            raise InvalidParameter(f"{option.name} must be a non-empty string", position_of(option))
        values[option.name] = str(value.this)
    for name in wanted:
        if name not in values:
            raise InvalidParameter(f"{name} is required", position_of(statement))
    return values


def plan_create_iceberg_connection(
    statement: CreateIcebergConnection, ctx: PlanContext
) -> CreateIcebergConnectionPlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    values = _options(statement, ("URI", "WAREHOUSE"))
    statement.set("exists", False)
    return CreateIcebergConnectionPlan(
        name,
        values["URI"],
        values["WAREHOUSE"],
        if_not_exists,
        item_create_sql(statement, ctx, table, name),
    )


def plan_create_iceberg_sink(
    statement: CreateIcebergSink, ctx: PlanContext
) -> CreateIcebergSinkPlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    source_node = statement.args["source"]
    source = ctx.resolve(table_parts(source_node), source_node)
    if source.kind not in SINKABLE or not source.desc.names:
        raise WrongObjectType(
            f"cannot sink {source.kind.sql_name} '{source.name}': only a table, source or "
            "materialized view",
            position_of(source_node),
        )
    connection_node = statement.args["connection"]
    connection = ctx.resolve(table_parts(connection_node), connection_node)
    if connection.kind is not ItemKind.CONNECTION:
        raise WrongObjectType(
            f"'{connection.name}' is a {connection.kind.sql_name}, not a connection",
            position_of(connection_node),
        )
    values = _options(statement, ("NAMESPACE", "TABLE"))
    key = None
    if statement.args.get("key"):
        key_list = []
        for column in statement.args["key"]:
            column_name = ident_name(column)
            if column_name not in source.desc.names:
                raise UnknownColumn(
                    f'column "{column_name}" does not exist in {source.name}', position_of(column)
                )
            key_list.append(source.desc.names.index(column_name))
        key = tuple(key_list)
    statement.set("exists", False)
    return CreateIcebergSinkPlan(
        name=name,
        from_id=source.id,
        desc=source.desc,
        connection=connection.id,
        namespace=values["NAMESPACE"],
        table=values["TABLE"],
        key=key,
        if_not_exists=if_not_exists,
        create_sql=item_create_sql(statement, ctx, table, name),
    )


def apply_to_catalog(catalog: Any, plan: Plan) -> list[CatalogItem] | None:
    """The items these plans create (the in-memory catalog's `apply`)."""
    if isinstance(plan, CreateIcebergConnectionPlan | CreateIcebergSinkPlan):
        if plan.if_not_exists and plan.name in catalog._by_name:
            return []
        if isinstance(plan, CreateIcebergConnectionPlan):
            return [catalog._new(plan.name, ItemKind.CONNECTION, RelationDesc((), ()))]
        depends = frozenset({plan.from_id, plan.connection})
        return [catalog._new(plan.name, ItemKind.SINK, RelationDesc((), ()), depends_on=depends)]
    return None


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {
    CreateIcebergConnection: plan_create_iceberg_connection,
    CreateIcebergSink: plan_create_iceberg_sink,
}

__all__ = [
    "PLANNERS",
    "SINKABLE",
    "CreateIcebergConnectionPlan",
    "CreateIcebergSinkPlan",
    "apply_to_catalog",
]
