"""Plans of webhook sources and secrets (syntax in `webhook_syntax.py`).

A webhook source is a source whose rows arrive by HTTP POST. Its columns:
`body` (jsonb for JSON, text for TEXT, bytea for BYTES) or, with a typed
body schema, the declared columns; then `headers` (a map[text=>text] of the
lower-cased header names, INCLUDE HEADERS, as Materialize types it) and one column per INCLUDE
HEADER (text, or bytea with BYTES; NULL when the request lacks it).

The CHECK is planned as a boolean scalar expression over one row: the WITH
inputs in written order (`headers` map[text=>text], `body` text or bytea, each secret
text or bytea) and, last, the request's receipt time, which is what now()
means there. It is evaluated in-process (never on Spark).

A secret's value is a constant bytea expression; it is evaluated and stored
by the adapter, and printed nowhere (stored SQL says `AS '********'`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlglot import exp

from coordinator_lib.expr.scalar import Cast, ScalarExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc, ScalarType
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.coercion import scalar_type_of
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.errors import (
    DuplicateColumn,
    InvalidParameter,
    ParseError,
    SqlError,
    TypeMismatch,
    UnknownObject,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.function_binder import FunctionBinder
from coordinator_lib.sql.plan_core import check_new_name, item_create_sql, qualify_name
from coordinator_lib.sql.plans import Plan
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.query import check_column_name
from coordinator_lib.sql.scope import Scope, ScopeItem, ident_name, table_parts
from coordinator_lib.sql.webhook_syntax import (
    REDACTED,
    AlterSecret,
    CheckOption,
    CreateSecret,
    CreateWebhookSource,
    IncludeHeader,
    IncludeHeaders,
    WebhookCheck,
)

S = ScalarType


class WebhookBodyFormat(StrEnum):
    TEXT = "text"
    BYTES = "bytes"
    JSON = "json"
    JSON_ARRAY = "json-array"  # a top-level array is one row per element


@dataclass(frozen=True)
class WebhookHeaders:
    """Which request headers become columns. `column`: the `headers` jsonb
    column (None without INCLUDE HEADERS), holding the headers in `allow`
    (empty: all) and not in `block`. `mapped`: INCLUDE HEADER columns as
    (column index, header name, as bytea)."""

    column: int | None = None
    allow: tuple[str, ...] = ()
    block: tuple[str, ...] = ()
    mapped: tuple[tuple[int, str, bool], ...] = ()


@dataclass(frozen=True)
class WebhookCheckInput:
    """One WITH input of a CHECK: "headers" (jsonb), "body" or "secret"
    (`secret` its id); `bytes` makes body or secret a bytea, else text."""

    kind: str
    bytes: bool = False
    secret: GlobalId | None = None


@dataclass(frozen=True)
class WebhookValidation:
    """`expr` (boolean) over a row of `inputs` plus the receipt time; the
    row's column types are `types`."""

    expr: ScalarExpr
    inputs: tuple[WebhookCheckInput, ...]
    types: tuple[ColumnType, ...]


@dataclass(frozen=True)
class CreateWebhookSourcePlan(Plan):
    """`typed`: the first `body_columns` columns are the typed body schema's
    (each JSON object's fields); otherwise column 0 is `body`."""

    name: QualifiedName
    desc: RelationDesc
    body_format: WebhookBodyFormat
    headers: WebhookHeaders
    validation: WebhookValidation | None = None
    typed: bool = False
    body_columns: int = 1
    cluster: str | None = None
    if_not_exists: bool = False
    depends_on: frozenset[GlobalId] = field(default_factory=frozenset)
    create_sql: str = ""


@dataclass(frozen=True)
class CreateSecretPlan(Plan):
    """`value`: a constant bytea expression (evaluated by the adapter)."""

    name: QualifiedName
    value: ScalarExpr
    if_not_exists: bool = False
    create_sql: str = ""


@dataclass(frozen=True)
class AlterSecretPlan(Plan):
    """ALTER SECRET name AS value; `id` None: IF EXISTS named nothing."""

    name: str
    id: GlobalId | None
    value: ScalarExpr


# --- CREATE SOURCE ... FROM WEBHOOK ------------------------------------------------

_BODY_TYPES = {"TEXT": S.TEXT, "BYTES": S.BYTEA, "JSON": S.JSONB}


def plan_create_webhook_source(
    statement: CreateWebhookSource, ctx: PlanContext
) -> CreateWebhookSourcePlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    cluster_prop = statement.args.get("cluster")
    cluster = ident_name(cluster_prop.this) if cluster_prop is not None else None
    text_format = statement.args["format"]
    array = bool(statement.args.get("array"))
    body_format = WebhookBodyFormat.JSON_ARRAY if array else WebhookBodyFormat(text_format.lower())
    names: list[str] = []
    types: list[ColumnType] = []
    columns = statement.args.get("columns")
    typed = columns is not None
    if typed:
        for column in columns.expressions:
            column_name, column_type = column_def(column)
            add_column(names, types, column_name, column_type, column)
        if not names:
            raise ParseError("a typed body schema needs at least one column", position_of(columns))
    else:
        names.append("body")
        types.append(ColumnType(_BODY_TYPES[text_format], False))
    body_columns = len(names)
    headers = _plan_headers(statement.args.get("includes") or [], names, types)
    check = statement.args.get("check")
    validation, secrets = _plan_check(check, ctx) if check is not None else (None, frozenset())
    statement.set("exists", False)  # the stored statement creates; it never skips
    return CreateWebhookSourcePlan(
        name=name,
        desc=RelationDesc(tuple(names), tuple(types)),
        body_format=body_format,
        headers=headers,
        validation=validation,
        typed=typed,
        body_columns=body_columns,
        cluster=cluster,
        if_not_exists=if_not_exists,
        depends_on=secrets,
        create_sql=item_create_sql(statement, ctx, table, name),
    )


def column_def(column: exp.Expr) -> tuple[str, ColumnType]:
    if not isinstance(column, exp.ColumnDef):
        raise UnsupportedFeature(
            "a typed body schema lists columns only", position_of(column) or None
        )
    column_name = check_column_name(ident_name(column.this), column)
    kind = column.args.get("kind")
    if kind is None:
        raise ParseError(f'column "{column_name}" needs a type', position_of(column))
    try:
        scalar = scalar_type_of(kind)
    except SqlError as error:
        raise error.at(position_of(kind) or position_of(column)) from None
    nullable = True
    for constraint in column.args.get("constraints") or []:
        inner = constraint.args.get("kind")
        if not isinstance(inner, exp.NotNullColumnConstraint):
            raise UnsupportedFeature(
                "only NOT NULL is supported in a typed body schema", position_of(constraint)
            )
        nullable = bool(inner.args.get("allow_null"))
    return column_name, ColumnType(scalar, nullable)


def add_column(
    names: list[str], types: list[ColumnType], name: str, type: ColumnType, node: Any
) -> int:
    if name in names:
        raise DuplicateColumn(f'column "{name}" specified more than once', position_of(node))
    names.append(name)
    types.append(type)
    return len(names) - 1


def _plan_headers(
    includes: list[exp.Expr], names: list[str], types: list[ColumnType]
) -> WebhookHeaders:
    column: int | None = None
    allow: list[str] = []
    block: list[str] = []
    mapped: list[tuple[int, str, bool]] = []
    for include in includes:
        if isinstance(include, IncludeHeaders):
            if column is not None:
                raise ParseError("INCLUDE HEADERS given twice", position_of(include))
            column = add_column(names, types, "headers", ColumnType(S.MAP_TEXT, False), include)
            for header in include.expressions:
                (block if header.args.get("negated") else allow).append(header.name)
        elif isinstance(include, IncludeHeader):
            alias = include.args["alias"]
            as_bytes = bool(include.args.get("bytes"))
            column_type = ColumnType(S.BYTEA if as_bytes else S.TEXT, True)
            index = add_column(
                names, types, check_column_name(ident_name(alias), alias), column_type, alias
            )
            mapped.append((index, include.name, as_bytes))
    return WebhookHeaders(column, tuple(allow), tuple(block), tuple(mapped))


def _plan_check(
    check: WebhookCheck, ctx: PlanContext
) -> tuple[WebhookValidation, frozenset[GlobalId]]:
    inputs: list[WebhookCheckInput] = []
    aliases: list[str] = []
    types: list[ColumnType] = []
    secrets: set[GlobalId] = set()
    for option in check.args.get("options") or []:
        assert isinstance(option, CheckOption)
        kind = option.args["kind"]
        as_bytes = bool(option.args.get("bytes"))
        secret: CatalogItem | None = None
        if kind == "HEADERS":
            if as_bytes:
                raise UnsupportedFeature(
                    "HEADERS ... BYTES is not supported (headers is a map[text=>text])",
                    position_of(option),
                )
            default, column_type = "headers", ColumnType(S.MAP_TEXT, False)
        elif kind == "BODY":
            default, column_type = "body", ColumnType(S.BYTEA if as_bytes else S.TEXT, False)
        else:
            secret = _secret(ctx, option.this)
            secrets.add(secret.id)
            default = table_parts(option.this)[-1]
            column_type = ColumnType(S.BYTEA if as_bytes else S.TEXT, False)
        alias_node = option.args.get("alias")
        alias = ident_name(alias_node) if alias_node is not None else default
        if alias in aliases:
            raise DuplicateColumn(
                f'CHECK input "{alias}" given more than once; give each an alias with AS',
                position_of(option),
            )
        if kind != "SECRET" and any(i.kind == kind.lower() for i in inputs):
            raise ParseError(f"{kind} given twice in CHECK (WITH ...)", position_of(option))
        aliases.append(alias)
        types.append(column_type)
        inputs.append(
            WebhookCheckInput(kind.lower(), as_bytes, secret.id if secret is not None else None)
        )
    scope = Scope()
    scope.add(ScopeItem(None, tuple(aliases), tuple(types)))
    row_types = (*types, ColumnType(S.TIMESTAMPTZ, False))
    binder = FunctionBinder(scope, "CHECK", types=row_types, now_column=len(types))
    condition = binder.bind_boolean(check.this, "CHECK")
    return WebhookValidation(condition.expr, tuple(inputs), row_types), frozenset(secrets)


def _secret(ctx: PlanContext, node: exp.Expr) -> CatalogItem:
    item = ctx.resolve(table_parts(node), node)
    if item.kind is not ItemKind.SECRET:
        raise WrongObjectType(
            f"'{item.name}' is a {item.kind.sql_name}, not a secret", position_of(node)
        )
    return item


# --- secrets ----------------------------------------------------------------------


def _secret_value(node: exp.Expr) -> ScalarExpr:
    """The value as a constant bytea expression. Errors never quote it."""
    binder = FunctionBinder(Scope(), "CREATE SECRET")
    try:
        value = binder.bind(node)
        if value.unknown:
            value = binder.resolve_unknown(value, S.BYTEA, node)
    except SqlError as error:
        raise InvalidParameter(
            f"invalid secret value ({type(error).__name__})", position_of(node)
        ) from None
    if value.scalar is S.TEXT:
        return Cast(value.expr, S.BYTEA)
    if value.scalar is not S.BYTEA:
        raise TypeMismatch(
            f"a secret's value must be bytea or text, not {value.scalar.value}", position_of(node)
        )
    return value.expr


def plan_create_secret(statement: CreateSecret, ctx: PlanContext) -> CreateSecretPlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    value = _secret_value(statement.args["value"])
    statement.set("exists", False)
    return CreateSecretPlan(
        name, value, if_not_exists, item_create_sql(statement, ctx, table, name)
    )


def plan_alter_secret(statement: AlterSecret, ctx: PlanContext) -> AlterSecretPlan:
    table = statement.this
    shown = ".".join(table_parts(table))
    try:
        item = _secret(ctx, table)
    except UnknownObject:
        if not statement.args.get("exists"):
            raise
        return AlterSecretPlan(shown, None, _secret_value(statement.args["value"]))
    return AlterSecretPlan(str(item.name), item.id, _secret_value(statement.args["value"]))


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {
    CreateWebhookSource: plan_create_webhook_source,
    CreateSecret: plan_create_secret,
    AlterSecret: plan_alter_secret,
}


__all__ = [
    "PLANNERS",
    "REDACTED",
    "AlterSecretPlan",
    "CreateSecretPlan",
    "CreateWebhookSourcePlan",
    "WebhookBodyFormat",
    "WebhookCheckInput",
    "WebhookHeaders",
    "WebhookValidation",
]
