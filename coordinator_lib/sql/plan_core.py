"""Planning the statements the other planners build on: queries (SELECT,
VALUES, set operations), CREATE TABLE / VIEW / INDEX / SOURCE, INSERT,
UPDATE, DELETE and DROP, and the checks they share (a new item's name, a
schema, a database, AS OF). `plan.py` dispatches every statement; the
catalog, session, webhook, cluster, continual-task and PostgreSQL-source
planners import from here.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import replace
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.relation import Constant, Get, Map, Project, RelationExpr
from coordinator_lib.expr.scalar import Column, Literal, ScalarExpr, conjuncts
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.coercion import declared_type, parse_interval_ms
from coordinator_lib.sql.constraints import (
    is_key_constraint,
    is_table_constraint,
    not_null_columns,
    plan_unique_constraints,
    relation_keys,
)
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.create_sql import render_create_sql
from coordinator_lib.sql.dialect import (
    CreateSource,
    DefaultIndex,
    InCluster,
    MzOption,
    Tidemark,
    WithOptions,
)
from coordinator_lib.sql.errors import (
    DuplicateColumn,
    DuplicateObject,
    InvalidParameter,
    NotNullViolation,
    ParseError,
    SqlError,
    UnknownColumn,
    UnknownDatabase,
    UnknownObject,
    UnknownSchema,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.plans import (
    AsOfTime,
    CreateIndexPlan,
    CreateSourcePlan,
    CreateTablePlan,
    CreateViewPlan,
    DeletePlan,
    DropPlan,
    InsertPlan,
    SelectPlan,
    UpdatePlan,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.query import (
    BoundQuery,
    assigned_columns,
    check_column_name,
    coerce_columns,
    plan_query,
    plan_values,
    values_relation,
    visible,
)
from coordinator_lib.sql.scalar import ScalarBinder, Typed, null_of
from coordinator_lib.sql.scope import Scope, ScopeItem, ident_name, table_parts
from coordinator_lib.sql.subquery import lower_filter, lower_subqueries
from coordinator_lib.sql.temporal import plan_temporal_filters
from coordinator_lib.sql.typmod import fit_expr, fit_value, has_modifier
from coordinator_lib.storage.load_generator import make_generator

S = ScalarType

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

QUERY_TYPES = (exp.Select, exp.Union, exp.Except, exp.Intersect, exp.Subquery, exp.Values)


def item_create_sql(
    statement: exp.Expr,
    ctx: PlanContext,
    own: exp.Expr | None,
    name: QualifiedName,
    *,
    index_name: str | None = None,
) -> str:
    """The stored form: every name fully qualified (see `create_sql.py`)."""
    owned = (own, name) if own is not None else None
    return render_create_sql(statement, ctx.qualified, owned, index_name=index_name)


def plan_select_statement(statement: exp.Expr, ctx: PlanContext) -> SelectPlan:
    bound = plan_query(statement, ctx)
    as_of_node = statement.args.get("as_of")
    as_of = plan_as_of(as_of_node) if as_of_node is not None else None
    return SelectPlan(bound.expr, bound.finishing, as_of, tuple(bound.names))


def plan_as_of(node: exp.Expr) -> AsOfTime:
    """AS OF takes a constant: milliseconds since the epoch, or a timestamp."""
    return AsOfTime(plan_time(node.this, "AS OF"), bool(node.args.get("at_least")))


def plan_time(node: exp.Expr, what: str) -> int:
    """A constant time (AS OF, UP TO): milliseconds since the epoch, or a timestamp."""
    value = ScalarBinder(Scope(), what).bind(node)
    position = position_of(node)
    if value.unknown:
        value = ScalarBinder(Scope(), what).resolve_unknown(value, S.TIMESTAMPTZ, node)
    if not isinstance(value.expr, Literal) or value.expr.value is None:
        raise UnsupportedFeature(f"{what} needs a constant timestamp", position)
    raw = value.expr.value
    if isinstance(raw, bool):
        raise InvalidParameter(f"{what} needs a timestamp, got a boolean", position)
    if isinstance(raw, int | decimal.Decimal):
        if raw != int(raw):
            raise InvalidParameter(f"{what} {raw} is not a whole number of milliseconds", position)
        millis = int(raw)
    elif isinstance(raw, dt.datetime):
        aware = raw if raw.tzinfo is not None else raw.replace(tzinfo=dt.UTC)
        millis = (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    elif isinstance(raw, dt.date):
        millis = (dt.datetime(raw.year, raw.month, raw.day, tzinfo=dt.UTC) - _EPOCH) // (
            dt.timedelta(milliseconds=1)
        )
    else:
        raise InvalidParameter(f"{what} needs a timestamp, got {value.scalar.value}", position)
    if millis < 0:
        raise InvalidParameter(f"{what} must not be negative", position)
    return millis


def qualify_name(ctx: PlanContext, table: exp.Table) -> QualifiedName:
    parts = table_parts(table)
    if 2 <= len(parts) <= 3:
        check_schema(ctx, parts[:-1], table)
    try:
        return ctx.catalog.qualify(parts)
    except SqlError as error:
        raise error.at(position_of(table)) from None


def check_schema(ctx: PlanContext, parts: tuple[str, ...], node: exp.Expr) -> tuple[str, str]:
    """(database, schema) of a 1-2 part schema name, which must exist."""
    if not 1 <= len(parts) <= 2:
        raise ParseError(
            f"improper schema name (too many dotted names): {'.'.join(parts)}",
            position_of(node),
        )
    database = parts[0] if len(parts) == 2 else ctx.catalog.database
    check_database(ctx, database, node)
    if not ctx.catalog.schema_exists(database, parts[-1]):
        raise UnknownSchema(f"unknown schema '{parts[-1]}'", position_of(node))
    return database, parts[-1]


def check_database(ctx: PlanContext, database: str, node: exp.Expr) -> str:
    if not ctx.catalog.database_exists(database):
        raise UnknownDatabase(f"unknown database '{database}'", position_of(node))
    return database


def existing_item(ctx: PlanContext, name: QualifiedName) -> CatalogItem | None:
    try:
        return ctx.catalog.resolve(name.parts)
    except UnknownObject:
        return None


def check_new_name(
    ctx: PlanContext,
    name: QualifiedName,
    node: exp.Expr,
    *,
    if_not_exists: bool,
    replace: bool = False,
) -> CatalogItem | None:
    """The item already named `name`, if IF NOT EXISTS / OR REPLACE allow one."""
    existing = existing_item(ctx, name)
    if existing is not None and not (if_not_exists or replace):
        raise DuplicateObject(f"catalog item '{name}' already exists", position_of(node))
    return existing


def _properties(statement: exp.Expr, allowed: tuple[type, ...]) -> list[exp.Expr]:
    props = statement.args.get("properties")
    items = list(props.expressions) if props is not None else []
    for prop in items:
        if not isinstance(prop, allowed):
            raise UnsupportedFeature(
                f"{prop.sql(dialect=Tidemark) or type(prop).__name__} is not supported here",
                position_of(prop) or position_of(statement),
            )
    return items


def plan_create_table(statement: exp.Create, ctx: PlanContext) -> CreateTablePlan:
    schema = statement.this
    if not isinstance(schema, exp.Schema) or statement.expression is not None:
        raise UnsupportedFeature(
            "CREATE TABLE needs a column list (CREATE TABLE ... AS / LIKE are not supported)",
            position_of(statement),
        )
    if statement.args.get("replace"):
        raise UnsupportedFeature("CREATE OR REPLACE TABLE is not supported", position_of(statement))
    retain_ms = _retain_history(_properties(statement, (WithOptions,)), "table")
    name = qualify_name(ctx, schema.this)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, schema.this, if_not_exists=if_not_exists)
    names: list[str] = []
    types: list[ColumnType] = []
    for column in schema.expressions:
        if is_table_constraint(column):
            continue  # UNIQUE / PRIMARY KEY: sql/constraints.py, below
        if not isinstance(column, exp.ColumnDef):
            raise UnsupportedFeature(
                "table constraints are not supported (Materialize tables have none)",
                position_of(column),
            )
        column_name = check_column_name(ident_name(column.this), column)
        if column_name in names:
            raise DuplicateColumn(
                f'column "{column_name}" specified more than once', position_of(column)
            )
        kind = column.args.get("kind")
        if kind is None:
            raise ParseError(f'column "{column_name}" needs a type', position_of(column))
        try:
            declared = declared_type(kind)
        except SqlError as error:
            raise error.at(position_of(kind) or position_of(column)) from None
        nullable = True
        for constraint in column.args.get("constraints") or []:
            inner = constraint.args.get("kind")
            if isinstance(inner, exp.NotNullColumnConstraint):
                nullable = bool(inner.args.get("allow_null"))
            elif not is_key_constraint(constraint):
                raise UnsupportedFeature(
                    f"column constraint {constraint.sql(dialect=Tidemark)} is not supported",
                    position_of(constraint) or position_of(column),
                )
        names.append(column_name)
        types.append(replace(declared, nullable=nullable))
    unique = plan_unique_constraints(schema, name.item, names)
    primary = not_null_columns(unique)
    types = [replace(t, nullable=False) if i in primary else t for i, t in enumerate(types)]
    keys = relation_keys(unique, [t.nullable for t in types])
    desc = RelationDesc(tuple(names), tuple(types), keys)
    return CreateTablePlan(
        name,
        desc,
        if_not_exists=if_not_exists,
        create_sql=item_create_sql(statement, ctx, schema.this, name),
        retain_history_ms=retain_ms,
        unique=unique,
    )


def plan_create_view(statement: exp.Create, ctx: PlanContext) -> CreateViewPlan:
    props = _properties(statement, (exp.MaterializedProperty, InCluster, WithOptions))
    materialized = any(isinstance(p, exp.MaterializedProperty) for p in props)
    cluster_prop = next((p for p in props if isinstance(p, InCluster)), None)
    cluster = ident_name(cluster_prop.this) if cluster_prop is not None else None
    retain_ms = _retain_history(props, "materialized view", _REFRESH_OPTIONS)
    refresh_every_ms = _refresh_every(props)
    target = statement.this
    renames: list[str] = []
    table = target
    if isinstance(target, exp.Schema):
        table = target.this
        renames = [ident_name(e) for e in target.expressions]
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    replace = bool(statement.args.get("replace"))
    existing = check_new_name(ctx, name, table, if_not_exists=if_not_exists, replace=replace)
    replaces = None
    if existing is not None and replace:
        wanted = ItemKind.MATERIALIZED_VIEW if materialized else ItemKind.VIEW
        if existing.kind is not wanted:
            raise WrongObjectType(
                f"'{name}' is a {existing.kind.sql_name}, not a {wanted.sql_name}",
                position_of(table),
            )
        replaces = existing.id
    query = statement.expression
    if query.args.get("as_of") is not None:
        raise InvalidParameter("views cannot have AS OF", position_of(query.args["as_of"]))
    bound = plan_query(query, ctx)
    expr = visible(bound, query)
    names = list(bound.names)
    if len(renames) > len(names):
        raise ParseError(
            "CREATE VIEW specifies more column names than columns", position_of(target)
        )
    names[: len(renames)] = renames
    seen: set[str] = set()
    for column_name in names:
        check_column_name(column_name, query)
        if column_name in seen:
            raise DuplicateColumn(
                f'column "{column_name}" specified more than once', position_of(query)
            )
        seen.add(column_name)
    if tuple(expr.desc.names) != tuple(names):
        expr = Project(expr, tuple(range(len(names))), tuple(names))
    if replaces is not None and replaces in ctx.references:
        raise InvalidParameter(
            f"cannot replace '{name}': the new definition depends on it", position_of(table)
        )
    if materialized:  # mz_now() only in temporal filters (sql/temporal.py)
        expr = plan_temporal_filters(expr, ctx.text)
    return CreateViewPlan(
        name=name,
        expr=expr,
        desc=expr.desc,
        materialized=materialized,
        retain_history_ms=retain_ms,
        cluster=cluster,
        if_not_exists=if_not_exists,
        replace=replaces,
        depends_on=frozenset(ctx.references),
        create_sql=item_create_sql(statement, ctx, table, name),
        refresh_every_ms=refresh_every_ms if materialized else None,
    )


_REFRESH_OPTIONS = frozenset({"REFRESH EVERY", "REFRESH ON COMMIT"})


def _refresh_every(props: list[exp.Expr]) -> int | None:
    """A materialized view's WITH (REFRESH EVERY '<interval>'), in ms
    (None: REFRESH ON COMMIT, Materialize's default)."""
    every = None
    for prop in props:
        if isinstance(prop, WithOptions):
            for option in prop.expressions:
                if option.name == "REFRESH EVERY":
                    every = interval_option(option)
                    if every <= 0:
                        raise InvalidParameter(
                            "REFRESH EVERY needs a positive interval", position_of(option)
                        )
                elif option.name == "REFRESH ON COMMIT":
                    every = None
    return every


def _retain_history(
    props: list[exp.Expr], what: str, also: frozenset[str] = frozenset()
) -> int | None:
    """The RETAIN HISTORY of a WITH (...) option list, in milliseconds
    (options named in `also` are read elsewhere)."""
    retain_ms = None
    for prop in props:
        if isinstance(prop, WithOptions):
            for option in prop.expressions:
                if option.name in also:
                    continue
                if option.name != "RETAIN HISTORY":
                    raise UnsupportedFeature(
                        f"{what} option {option.name} is not supported", position_of(option)
                    )
                retain_ms = interval_option(option)
    return retain_ms


def interval_option(option: MzOption) -> int:
    value = option.args.get("value")
    if not (isinstance(value, exp.Literal) and value.is_string):
        raise InvalidParameter(
            f"{option.name} needs an interval string such as '1h'", position_of(option)
        )
    try:
        return parse_interval_ms(value.this)
    except SqlError as error:
        raise error.at(position_of(value)) from None


def plan_create_index(statement: exp.Create, ctx: PlanContext) -> CreateIndexPlan:
    props = _properties(statement, (DefaultIndex, InCluster, WithOptions))
    retain_ms = _retain_history(props, "index")
    if statement.args.get("unique"):
        raise UnsupportedFeature("UNIQUE indexes are not supported", position_of(statement))
    default = any(isinstance(p, DefaultIndex) for p in props)
    cluster_prop = next((p for p in props if isinstance(p, InCluster)), None)
    cluster = ident_name(cluster_prop.this) if cluster_prop is not None else None
    index = statement.this
    table = index.args["table"]
    on = ctx.resolve(table_parts(table), table)
    if on.kind is ItemKind.INDEX:
        raise WrongObjectType(f"cannot create an index on index '{on.name}'", position_of(table))
    if on.kind is ItemKind.VIEW and on.expr is not None:
        plan_temporal_filters(on.expr)  # an indexed view is maintained: mz_now() as in one
    params = index.args.get("params")
    key_names: list[str] = []
    if default:
        key = on.desc.keys[0] if on.desc.keys else tuple(range(on.desc.arity))
    else:
        columns = []
        for column in params.args.get("columns") or []:
            node = column.this if isinstance(column, exp.Ordered) else column
            if not (isinstance(node, exp.Column) and not node.table):
                raise UnsupportedFeature(
                    "index keys must be column names (expressions are not supported yet)",
                    position_of(node),
                )
            column_name = ident_name(node.this)
            if column_name not in on.desc.names:
                raise UnknownColumn(
                    f"column \"{column_name}\" does not exist in '{on.name}'", position_of(node)
                )
            columns.append(on.desc.names.index(column_name))
            key_names.append(column_name)
        key = tuple(columns)
    if_not_exists = bool(statement.args.get("exists"))
    given = index.args.get("this")
    if given is not None:
        name = QualifiedName(on.name.database, on.name.schema, ident_name(given))
        check_new_name(ctx, name, given, if_not_exists=if_not_exists)
    else:
        base = (
            f"{on.name.item}_primary_idx"
            if default
            else f"{on.name.item}_{'_'.join(key_names)}_idx"
        )
        name = QualifiedName(on.name.database, on.name.schema, base)
        suffix = 0
        while existing_item(ctx, name) is not None:  # Materialize appends a number
            suffix += 1
            name = QualifiedName(on.name.database, on.name.schema, f"{base}{suffix}")
    return CreateIndexPlan(
        name=name,
        on=on.id,
        key=key,
        cluster=cluster,
        if_not_exists=if_not_exists,
        default=default,
        create_sql=item_create_sql(statement, ctx, None, name, index_name=name.item),
        retain_history_ms=retain_ms,
    )


def _option_value(option: MzOption) -> Any:
    value = option.args.get("value")
    if value is None:
        return True
    if isinstance(value, exp.Literal):
        if value.is_string:
            return value.this
        return int(value.this) if value.this.isdigit() else decimal.Decimal(value.this)
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return -int(value.this.this) if value.this.this.isdigit() else None
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    raise InvalidParameter(f"option {option.name} needs a constant value", position_of(option))


def plan_create_source(statement: CreateSource, ctx: PlanContext) -> CreateSourcePlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    cluster_prop = statement.args.get("cluster")
    cluster = ident_name(cluster_prop.this) if cluster_prop is not None else None
    generator = str(statement.args["generator"]).lower()
    generator_position = (statement.meta.get("generator_start") or 0) + 1
    tick_ms = None
    options: dict[str, object] = {}
    for option in statement.args.get("options") or []:
        if option.name == "TICK INTERVAL":
            tick_ms = interval_option(option)
            if tick_ms <= 0:
                raise InvalidParameter("TICK INTERVAL must be positive", position_of(option))
            continue
        key = option.name.lower().replace(" ", "_")
        if key in options:
            raise InvalidParameter(f"option {option.name} given twice", position_of(option))
        options[key] = _option_value(option)
    try:
        source = make_generator(generator, **options)
    except (ValueError, TypeError) as error:
        raise InvalidParameter(str(error), generator_position) from None
    outputs = source.outputs()
    for_all = bool(statement.args.get("for_all_tables"))
    subsources: dict[str, QualifiedName] = {}
    if len(outputs) == 1:
        if for_all:
            raise InvalidParameter(
                "FOR ALL TABLES is only valid for multi-output sources; "
                f"{generator} has one output",
                generator_position,
            )
        subsources[next(iter(outputs))] = name
    else:
        if not for_all:
            raise InvalidParameter(
                f"multi-output sources require FOR ALL TABLES ({generator} has outputs "
                f"{', '.join(sorted(outputs))})",
                generator_position,
            )
        for output in outputs:
            sub = QualifiedName(name.database, name.schema, output)
            if not if_not_exists:
                check_new_name(ctx, sub, table, if_not_exists=False)
            subsources[output] = sub
    return CreateSourcePlan(
        name=name,
        generator=generator,
        options=options,
        outputs=outputs,
        subsources=subsources,
        tick_interval_ms=tick_ms,
        cluster=cluster,
        if_not_exists=if_not_exists,
        create_sql=item_create_sql(statement, ctx, table, name),
        retain_history_ms=_retain_history(
            [statement.args["with_options"]] if statement.args.get("with_options") else [],
            "source",
        ),
    )


def writable_table(ctx: PlanContext, table: exp.Expr, verb: str) -> CatalogItem:
    if not isinstance(table, exp.Table):
        raise UnsupportedFeature(f"cannot {verb} {table.sql(dialect=Tidemark)}", position_of(table))
    item = ctx.resolve(table_parts(table), table)
    if item.kind is not ItemKind.TABLE:
        raise WrongObjectType(
            f"cannot {verb} {item.kind.sql_name} '{item.name}'", position_of(table)
        )
    return item


def _is_default(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Column | exp.Var)
        and not (isinstance(node, exp.Column) and node.table)
        and not (isinstance(node.this, exp.Identifier) and node.this.quoted)
        and node.name.upper() == "DEFAULT"
    )


def plan_insert(statement: exp.Insert, ctx: PlanContext) -> InsertPlan:
    source = statement.expression
    if isinstance(source, exp.Values) and not statement.args.get("default"):
        item, columns, table = insert_values_target(statement, ctx)
        return plan_insert_values(item, columns, table, source, ctx)
    item, columns, listed, table = _insert_target(statement, ctx)
    desc = item.desc
    rel: RelationExpr
    if statement.args.get("default") or source is None:
        rel = Constant(((tuple(None for _ in columns), 1),), _nullable(desc, columns))
    elif isinstance(source, exp.Query):
        bound: BoundQuery = plan_query(source, ctx)
        items: list[exp.Expr | None] = [source] * bound.arity
        if isinstance(source, exp.Select) and len(source.expressions) == bound.arity:
            items = [e.this if isinstance(e, exp.Alias) else e for e in source.expressions]
        columns = _insert_columns(columns, listed, items, source)
        rel = coerce_columns(
            bound,
            [desc.types[c].scalar_type for c in columns],
            True,
            items,
            "INSERT",
            [desc.names[c] for c in columns],
        )
    else:
        raise UnsupportedFeature("this INSERT source is not supported", position_of(source))
    return InsertPlan(item.id, _table_order(rel, item, columns, table), item.name)


def insert_values_target(
    statement: exp.Insert, ctx: PlanContext
) -> tuple[CatalogItem, list[int], exp.Expr]:
    """The table, target columns and table node of an INSERT ... VALUES
    (its DEFAULTs made NULL): what a cached INSERT keeps."""
    item, columns, listed, table = _insert_target(statement, ctx)
    source = statement.expression
    _replace_defaults(source)
    first = source.expressions[0]
    values = list(first.expressions) if isinstance(first, exp.Tuple) else [first]
    return item, _insert_columns(columns, listed, values, source), table


def plan_insert_values(
    item: CatalogItem, columns: list[int], table: exp.Expr, values: exp.Values, ctx: PlanContext
) -> InsertPlan:
    """The rows of VALUES into `columns` of `item`, with assignment casts
    and NOT NULL checked: all a cached INSERT plans per execution."""
    desc = item.desc
    targets = [(desc.names[c], desc.types[c]) for c in columns]
    rel = plan_values(values, ctx, targets).expr
    return InsertPlan(item.id, _table_order(rel, item, columns, table), item.name)


def plan_insert_rows(
    item: CatalogItem, columns: list[int], rows: list[list[exp.Expr]], ctx: PlanContext
) -> InsertPlan | None:
    """`plan_insert_values` for rows of values with no VALUES tree around
    them nor the table's node (a cached INSERT's): each value bound and cast
    to its column as `plan_values` does. None where planning them raises:
    the caller then plans the VALUES in full, which reports the error with
    its position."""
    desc = item.desc
    targets = [(desc.names[c], desc.types[c]) for c in columns]
    if any(len(row) != len(targets) for row in rows):
        return None
    binder = ScalarBinder(Scope(context=ctx), "VALUES")
    try:
        bound = [[binder.bind(value) for value in row] for row in rows]
        rel, _ = values_relation(assigned_columns(binder, rows, bound, targets))
        return InsertPlan(item.id, _table_order(rel, item, columns, None), item.name)
    except SqlError:
        return None


def _insert_target(
    statement: exp.Insert, ctx: PlanContext
) -> tuple[CatalogItem, list[int], list[exp.Expr], exp.Expr]:
    """The writable table, its listed (or all) columns, the list as written
    and the table node."""
    for unsupported, what in (("conflict", "ON CONFLICT"), ("returning", "RETURNING")):
        if statement.args.get(unsupported):
            raise UnsupportedFeature(f"INSERT ... {what} is not supported", position_of(statement))
    if statement.args.get("alternative"):  # SQLite's INSERT OR REPLACE / IGNORE
        raise ParseError('syntax error at or near "OR"', position_of(statement))
    target = statement.this
    listed: list[exp.Expr] = []
    if isinstance(target, exp.Schema):
        listed = list(target.expressions)
        target = target.this
    item = writable_table(ctx, target, "insert into")
    desc = item.desc
    if listed:
        columns: list[int] = []
        for ident in listed:
            column_name = ident_name(ident)
            if column_name not in desc.names:
                raise UnknownColumn(
                    f'column "{column_name}" of relation "{item.name.item}" does not exist',
                    position_of(ident),
                )
            index = desc.names.index(column_name)
            if index in columns:
                raise DuplicateColumn(
                    f'column "{column_name}" specified more than once', position_of(ident)
                )
            columns.append(index)
    else:
        columns = list(range(desc.arity))
    return item, columns, listed, target


def _insert_columns(
    columns: list[int],
    listed: list[exp.Expr],
    values: list[exp.Expr | None],
    source: exp.Expr,
) -> list[int]:
    """The target columns: the listed ones, or without a list the first N
    (PostgreSQL fills the rest with defaults). Counts must match."""
    if not listed:
        columns = columns[: len(values)]
    if len(values) > len(columns):
        raise ParseError(
            "INSERT has more expressions than target columns",
            position_of(values[len(columns)]) or position_of(source),
        )
    if len(values) < len(columns):
        raise ParseError(
            "INSERT has more target columns than expressions",
            position_of(listed[len(values)]) if listed else position_of(source),
        )
    return columns


def _nullable(desc: RelationDesc, columns: list[int]) -> RelationDesc:
    return RelationDesc(
        tuple(desc.names[c] for c in columns),
        tuple(ColumnType(desc.types[c].scalar_type, True) for c in columns),
    )


def _replace_defaults(values: exp.Values) -> None:
    """DEFAULT in VALUES means NULL (columns have no other default)."""
    for row in values.expressions:
        for item in list(row.expressions if isinstance(row, exp.Tuple) else [row]):
            if _is_default(item):
                item.replace(exp.Null())


def _table_order(
    rel: RelationExpr, item: CatalogItem, columns: list[int], node: exp.Expr | None
) -> RelationExpr:
    """Rows over `columns` as full table rows: the others are NULL, in table order."""
    desc = item.desc
    for c in range(desc.arity):
        if c not in columns and not desc.types[c].nullable:
            raise NotNullViolation(
                f'null value in column "{desc.names[c]}" of relation "{item.name.item}" '
                "violates not-null constraint",
                position_of(node),
            )
    if isinstance(rel, Constant):
        rows = []
        for row, diff in rel.rows:
            full = [None] * desc.arity
            for value, c in zip(row, columns, strict=True):
                if value is None and not desc.types[c].nullable:
                    raise NotNullViolation(
                        f'null value in column "{desc.names[c]}" of relation '
                        f'"{item.name.item}" violates not-null constraint',
                        position_of(node),
                    )
                full[c] = fit_value(value, desc.types[c])
            rows.append((tuple(full), diff))
        types = tuple(
            ColumnType(
                desc.types[c].scalar_type,
                c not in columns or any(r[0][c] is None for r in rows),
            )
            for c in range(desc.arity)
        )
        return Constant(tuple(rows), RelationDesc(desc.names, types))
    if any(has_modifier(desc.types[c]) for c in columns):
        fitted = tuple(fit_expr(Column(k), desc.types[c]) for k, c in enumerate(columns))
        rel = Project(
            Map(rel, fitted), tuple(range(len(columns), 2 * len(columns))), rel.desc.names
        )
    arity = rel.desc.arity
    missing = [c for c in range(desc.arity) if c not in columns]
    scalars = tuple(null_of(desc.types[c].scalar_type) for c in missing)
    if scalars:
        rel = Map(rel, scalars)
    outputs = tuple(
        columns.index(c) if c in columns else arity + missing.index(c) for c in range(desc.arity)
    )
    if outputs == tuple(range(rel.desc.arity)) and rel.desc.names == desc.names:
        return rel
    return Project(rel, outputs, desc.names)


def _table_scope(
    item: CatalogItem, table: exp.Table, ctx: PlanContext
) -> tuple[Scope, RelationExpr]:
    alias_node = table.args.get("alias")
    alias = ident_name(alias_node.this) if alias_node is not None and alias_node.this else None
    scope = Scope(context=ctx)
    scope.add(
        ScopeItem(
            alias or item.name.item,
            item.desc.names,
            item.desc.types,
            qualified=None if alias else item.name,
        )
    )
    return scope, Get(item.id, item.desc)


def _filtered(statement: exp.Expr, scope: Scope, rel: RelationExpr, verb: str) -> RelationExpr:
    where = statement.args.get("where")
    if where is None:
        return rel
    condition = ScalarBinder(scope, verb).bind_boolean(where.this, "WHERE")
    return lower_filter(rel, conjuncts(condition.expr))


def plan_delete(statement: exp.Delete, ctx: PlanContext) -> DeletePlan:
    tables = statement.args.get("tables")
    if tables:  # `DELETE t ...`: sqlglot reads MySQL's multi-table DELETE
        near = tables[0]
        raise ParseError(
            f'syntax error at or near "{near.sql(dialect=Tidemark)}"', position_of(near)
        )
    for unsupported, what in (("using", "USING"), ("returning", "RETURNING")):
        if statement.args.get(unsupported):
            raise UnsupportedFeature(f"DELETE ... {what} is not supported", position_of(statement))
    item = writable_table(ctx, statement.this, "delete from")
    scope, rel = _table_scope(item, statement.this, ctx)
    return DeletePlan(item.id, _filtered(statement, scope, rel, "DELETE"), item.name)


def plan_update(statement: exp.Update, ctx: PlanContext) -> UpdatePlan:
    for unsupported, what in (
        ("from_", "FROM"),
        ("returning", "RETURNING"),
        ("order", "ORDER BY"),
        ("limit", "LIMIT"),
    ):
        if statement.args.get(unsupported):
            raise UnsupportedFeature(f"UPDATE ... {what} is not supported", position_of(statement))
    item = writable_table(ctx, statement.this, "update")
    scope, rel = _table_scope(item, statement.this, ctx)
    retract = _filtered(statement, scope, rel, "UPDATE")
    binder = ScalarBinder(scope, "UPDATE")
    desc = item.desc
    assigned: dict[int, ScalarExpr] = {}
    for assignment in statement.expressions:
        if not isinstance(assignment, exp.EQ):  # `SET a` (sqlglot keeps the lone name)
            raise ParseError('syntax error: SET needs "column = value"', position_of(assignment))
        target, value_node = assignment.this, assignment.expression
        if not isinstance(target, exp.Column | exp.Identifier):
            raise UnsupportedFeature(
                "multiple-column assignment in UPDATE is not supported", position_of(target)
            )
        column_name = ident_name(target.this if isinstance(target, exp.Column) else target)
        if column_name not in desc.names:
            raise UnknownColumn(
                f'column "{column_name}" of relation "{item.name.item}" does not exist',
                position_of(target),
            )
        index = desc.names.index(column_name)
        if index in assigned:
            raise ParseError(
                f'multiple assignments to same column "{column_name}"', position_of(target)
            )
        st = desc.types[index].scalar_type
        if _is_default(value_node):
            value = Typed(null_of(st), ColumnType(st, True))
        else:
            value = binder.assign(
                binder.bind(value_node), desc.types[index], value_node, column_name
            )
        if (
            isinstance(value.expr, Literal)
            and value.expr.value is None
            and not desc.types[index].nullable
        ):
            raise NotNullViolation(
                f'null value in column "{column_name}" of relation "{item.name.item}" '
                "violates not-null constraint",
                position_of(value_node),
            )
        assigned[index] = fit_expr(value.expr, desc.types[index])
    order = list(assigned)
    # Subqueries in the new values become columns after the table's (sql/subquery.py).
    source, values = lower_subqueries(retract, [assigned[c] for c in order])
    mapped = Map(source, tuple(values))
    width = source.desc.arity
    outputs = tuple(width + order.index(c) if c in assigned else c for c in range(desc.arity))
    insert = Project(mapped, outputs, desc.names)
    return UpdatePlan(item.id, retract, insert, item.name)


# How statements spell item kinds (DROP, ALTER, SHOW CREATE).
ITEM_KINDS = {
    "TABLE": ItemKind.TABLE,
    "VIEW": ItemKind.VIEW,
    "MATERIALIZED VIEW": ItemKind.MATERIALIZED_VIEW,
    "INDEX": ItemKind.INDEX,
    "SOURCE": ItemKind.SOURCE,
    "SECRET": ItemKind.SECRET,
    "CONNECTION": ItemKind.CONNECTION,
    "SINK": ItemKind.SINK,
    "CONTINUAL TASK": ItemKind.CONTINUAL_TASK,
}


def plan_drop(statement: exp.Drop, ctx: PlanContext) -> DropPlan:
    kind_text = str(statement.args.get("kind") or "").upper()
    if statement.args.get("materialized"):
        kind_text = f"MATERIALIZED {kind_text}"
    kind = ITEM_KINDS.get(kind_text)
    if kind is None:
        raise UnsupportedFeature(f"DROP {kind_text} is not supported", position_of(statement))
    if_exists = bool(statement.args.get("exists"))
    names: list[QualifiedName] = []
    ids: list[GlobalId] = []
    missing: list[str] = []
    for table in statement.args.get("tables") or []:
        parts = table_parts(table)
        try:
            item = ctx.resolve(parts, table)
        except UnknownObject:
            if if_exists:
                missing.append(".".join(parts))
                continue
            raise
        if item.kind is not kind:
            raise WrongObjectType(
                f"'{item.name}' is a {item.kind.sql_name}, not a {kind.sql_name}",
                position_of(table),
                hint=f"Use DROP {item.kind.sql_name.upper()} to remove a {item.kind.sql_name}.",
            )
        if item.id not in ids:
            names.append(item.name)
            ids.append(item.id)
    return DropPlan(
        kind=kind,
        names=tuple(names),
        if_exists=if_exists,
        cascade=bool(statement.args.get("cascade")),
        ids=tuple(ids),
        missing=tuple(missing),
    )
