"""Planning the statements about the catalog's namespaces and items that are
not CREATE/DROP of an item: CREATE/DROP DATABASE and SCHEMA, ALTER ... RENAME
TO / SET (RETAIN HISTORY), and SHOW of objects, columns and definitions.

Names resolve against the session's database and search path (`SqlCatalog`);
a missing schema is 3F000 and a missing database 3D000, as in PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.errors import (
    DuplicateDatabase,
    DuplicateObject,
    DuplicateSchema,
    ParseError,
    UnknownDatabase,
    UnknownObject,
    UnknownSchema,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.plan_core import (
    ITEM_KINDS,
    check_database,
    check_schema,
    existing_item,
    interval_option,
)
from coordinator_lib.sql.plans import (
    AlterRenamePlan,
    AlterRetainHistoryPlan,
    CreateDatabasePlan,
    CreateSchemaPlan,
    DropSchemaPlan,
    Plan,
    ShowColumnsPlan,
    ShowCreatePlan,
    ShowKind,
    ShowObjectsPlan,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scope import ident_name, table_parts
from coordinator_lib.sql.statements import AlterObject, ShowColumns, ShowCreate, ShowObjects

_SHOW_KINDS = {
    "OBJECTS": ShowKind.OBJECTS,
    "TABLES": ShowKind.TABLES,
    "SOURCES": ShowKind.SOURCES,
    "SINKS": ShowKind.SINKS,
    "VIEWS": ShowKind.VIEWS,
    "MATERIALIZED VIEWS": ShowKind.MATERIALIZED_VIEWS,
    "INDEXES": ShowKind.INDEXES,
    "SCHEMAS": ShowKind.SCHEMAS,
    "DATABASES": ShowKind.DATABASES,
    "CLUSTERS": ShowKind.CLUSTERS,
    "CONNECTIONS": ShowKind.CONNECTIONS,
    "SECRETS": ShowKind.SECRETS,
    "CONTINUAL TASKS": ShowKind.CONTINUAL_TASKS,
}

# Kinds that keep history (views are inlined: they have none of their own).
_WITH_HISTORY = {
    ItemKind.TABLE,
    ItemKind.MATERIALIZED_VIEW,
    ItemKind.SOURCE,
    ItemKind.INDEX,
    ItemKind.CONTINUAL_TASK,
}


def _item_of_kind(ctx: PlanContext, table: exp.Expr, kind: ItemKind, verb: str) -> CatalogItem:
    """The item `table` names, which must be a `kind`."""
    item = ctx.resolve(table_parts(table), table)  # type: ignore[arg-type]
    if item.kind is not kind:
        raise WrongObjectType(
            f"'{item.name}' is a {item.kind.sql_name}, not a {kind.sql_name}",
            position_of(table),
            hint=f"Use {verb} {item.kind.sql_name.upper()}.",
        )
    return item


# --- CREATE / DROP DATABASE and SCHEMA ------------------------------------------------


def plan_create_namespace(statement: exp.Create, ctx: PlanContext) -> Plan:
    name = statement.this
    parts = table_parts(name)
    if_not_exists = bool(statement.args.get("exists"))
    if statement.kind == "DATABASE":
        if len(parts) != 1:
            raise ParseError("a database name has one part", position_of(name))
        if ctx.catalog.database_exists(parts[0]) and not if_not_exists:
            raise DuplicateDatabase(f"database '{parts[0]}' already exists", position_of(name))
        return CreateDatabasePlan(parts[0], if_not_exists)
    if not 1 <= len(parts) <= 2:
        raise ParseError(
            f"improper schema name (too many dotted names): {'.'.join(parts)}", position_of(name)
        )
    database = check_database(ctx, parts[0] if len(parts) == 2 else ctx.catalog.database, name)
    if ctx.catalog.schema_exists(database, parts[-1]) and not if_not_exists:
        raise DuplicateSchema(f"schema '{parts[-1]}' already exists", position_of(name))
    return CreateSchemaPlan(database, parts[-1], if_not_exists)


def plan_drop_namespace(statement: exp.Drop, ctx: PlanContext) -> DropSchemaPlan:
    kind = str(statement.args["kind"]).upper()
    names = statement.args.get("tables") or []
    if len(names) != 1:
        raise UnsupportedFeature(
            f"DROP {kind} of several {kind.lower()}s at once is not supported",
            position_of(names[1]) if len(names) > 1 else position_of(statement),
        )
    name = names[0]
    parts = table_parts(name)
    if_exists = bool(statement.args.get("exists"))
    cascade = bool(statement.args.get("cascade"))
    if kind == "DATABASE":
        if len(parts) != 1:
            raise ParseError("a database name has one part", position_of(name))
        if not ctx.catalog.database_exists(parts[0]) and not if_exists:
            raise UnknownDatabase(f"unknown database '{parts[0]}'", position_of(name))
        return DropSchemaPlan(parts[0], None, if_exists, cascade)
    if not 1 <= len(parts) <= 2:
        raise ParseError(
            f"improper schema name (too many dotted names): {'.'.join(parts)}", position_of(name)
        )
    database = parts[0] if len(parts) == 2 else ctx.catalog.database
    try:
        check_schema(ctx, parts, name)
    except (UnknownSchema, UnknownDatabase):
        if not if_exists:
            raise
    return DropSchemaPlan(database, parts[-1], if_exists, cascade)


# --- ALTER ------------------------------------------------------------------------


def plan_alter(statement: AlterObject, ctx: PlanContext) -> Plan:
    kind = ITEM_KINDS[statement.args["kind"]]
    table = statement.this
    try:
        item = _item_of_kind(ctx, table, kind, "ALTER")
    except UnknownObject:
        if statement.args.get("exists"):
            raise UnsupportedFeature(
                "ALTER ... IF EXISTS of an object that does not exist is not supported",
                position_of(table),
            ) from None
        raise
    new = statement.args.get("rename")
    if new is not None:
        return _plan_rename(ctx, item, kind, new)
    if kind not in _WITH_HISTORY:
        raise WrongObjectType(
            f"{kind.sql_name}s keep no history; RETAIN HISTORY applies to tables, "
            "materialized views, sources and indexes",
            position_of(table),
        )
    resetting = statement.args.get("reset") is not None
    options = statement.args.get("reset") or statement.args.get("set") or []
    retain_ms: int | None = None
    for option in options:
        if option.name != "RETAIN HISTORY":
            raise UnsupportedFeature(
                f"ALTER {kind.sql_name.upper()} option {option.name} is not supported",
                position_of(option),
            )
        if resetting:
            if option.args.get("value") is not None:
                raise ParseError("RESET takes option names only", position_of(option))
        else:
            retain_ms = interval_option(option)
    return AlterRetainHistoryPlan(kind, item.id, item.name, retain_ms)


def _plan_rename(
    ctx: PlanContext, item: CatalogItem, kind: ItemKind, new: exp.Expr
) -> AlterRenamePlan:
    if kind is ItemKind.SOURCE and item.depends_on:
        raise UnsupportedFeature(
            f"'{item.name}' is a subsource; renaming subsources is not supported",
            position_of(new),
        )
    new_name = QualifiedName(item.name.database, item.name.schema, ident_name(new))
    if existing_item(ctx, new_name) is not None:
        raise DuplicateObject(f"catalog item '{new_name}' already exists", position_of(new))
    return AlterRenamePlan(kind, item.id, item.name, new_name)


# --- SHOW ------------------------------------------------------------------------


def plan_show_objects(statement: ShowObjects, ctx: PlanContext) -> ShowObjectsPlan:
    kind = _SHOW_KINDS[statement.args["kind"]]
    for key, what in (("cluster", "IN CLUSTER"), ("where", "WHERE")):
        node = statement.args.get(key)
        if node is not None:
            raise UnsupportedFeature(f"SHOW ... {what} is not supported", position_of(node))
    from_ = statement.args.get("from_")
    on_node = statement.args.get("on")
    database: str | None = None
    schema: str | None = None
    on = None
    if kind in (ShowKind.DATABASES, ShowKind.CLUSTERS):
        if from_ is not None:
            raise ParseError(f"SHOW {statement.args['kind']} takes no FROM", position_of(from_))
    elif kind is ShowKind.SCHEMAS:
        if from_ is not None:
            parts = table_parts(from_)
            if len(parts) != 1:
                raise ParseError("a database name has one part", position_of(from_))
            database = check_database(ctx, parts[0], from_)
        else:
            database = ctx.catalog.database
    elif on_node is not None:
        item = ctx.resolve(table_parts(on_node), on_node)
        if item.kind is ItemKind.INDEX:
            raise WrongObjectType(f"'{item.name}' is an index", position_of(on_node))
        on = item.id
        database, schema = item.name.database, item.name.schema
    elif from_ is not None:
        database, schema = check_schema(ctx, table_parts(from_), from_)
    else:
        database = ctx.catalog.database
        schema = next(iter(ctx.catalog.search_path), None)
    like = statement.args.get("like")
    return ShowObjectsPlan(kind, database, schema, on, like.this if like is not None else None)


def plan_show_columns(statement: ShowColumns, ctx: PlanContext) -> ShowColumnsPlan:
    table = statement.this
    item = ctx.resolve(table_parts(table), table)
    if item.kind is ItemKind.INDEX:
        raise WrongObjectType(f"'{item.name}' is an index, not a relation", position_of(table))
    return ShowColumnsPlan(item.id, item.name)


def plan_show_create(statement: ShowCreate, ctx: PlanContext) -> ShowCreatePlan:
    kind = ITEM_KINDS[statement.args["kind"]]
    item = _item_of_kind(ctx, statement.this, kind, "SHOW CREATE")
    return ShowCreatePlan(kind, item.id, item.name)


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {
    AlterObject: plan_alter,
    ShowObjects: plan_show_objects,
    ShowColumns: plan_show_columns,
    ShowCreate: plan_show_create,
}


__all__ = [
    "PLANNERS",
    "plan_alter",
    "plan_create_namespace",
    "plan_drop_namespace",
    "plan_show_columns",
    "plan_show_create",
    "plan_show_objects",
]
