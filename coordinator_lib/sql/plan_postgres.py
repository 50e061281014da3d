"""Plans of connections and PostgreSQL sources (syntax in `postgres_syntax.py`).

A PostgreSQL source's statement as a user writes it names upstream tables
(or all of a publication's) without their columns; the adapter asks the
upstream server and stores the *purified* statement (Materialize's word):
every table with its columns and subsource name, and the replication slot.
Only a purified plan goes into the catalog, so re-planning the stored SQL in
any process never needs the upstream server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc
from coordinator_lib.sql.catalog import CatalogItem, DictCatalog, ItemKind, QualifiedName
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.errors import DuplicateObject, InvalidParameter, WrongObjectType
from coordinator_lib.sql.plan_core import check_new_name, item_create_sql, qualify_name
from coordinator_lib.sql.plan_webhook import add_column, column_def
from coordinator_lib.sql.plans import Plan
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.postgres_syntax import CreateConnection, CreatePostgresSource
from coordinator_lib.sql.scope import ident_name, table_parts

SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


@dataclass(frozen=True)
class CreateConnectionPlan(Plan):
    """A connection to a PostgreSQL server; the password is the secret
    `password` (its value never enters the plan or the stored SQL)."""

    name: QualifiedName
    host: str
    port: int
    user: str
    database: str
    password: GlobalId | None = None
    ssl_mode: str = "prefer"
    if_not_exists: bool = False
    create_sql: str = ""

    @property
    def depends_on(self) -> frozenset[GlobalId]:
        return frozenset({self.password}) if self.password is not None else frozenset()


@dataclass(frozen=True)
class SourceTablePlan:
    """One upstream table: `upstream` as written ((schema,) table), the
    subsource's name, and (purified) its columns."""

    upstream: tuple[str, ...]
    name: QualifiedName | None
    desc: RelationDesc | None = None


@dataclass(frozen=True)
class CreatePostgresSourcePlan(Plan):
    name: QualifiedName
    connection: GlobalId
    publication: str
    slot: str | None = None
    all_tables: bool = False
    schemas: tuple[str, ...] = ()
    tables: tuple[SourceTablePlan, ...] = ()
    cluster: str | None = None
    if_not_exists: bool = False
    create_sql: str = ""
    statement: Any = field(default=None, compare=False, repr=False)

    @property
    def purified(self) -> bool:
        return self.slot is not None and all(t.desc is not None for t in self.tables)


def _literal(option: exp.Expr, want: type) -> Any:
    value = option.args["value"]
    text = value.this
    if want is int:
        if value.is_string or not str(text).isdigit():
            raise InvalidParameter(f"{option.name} must be an integer", position_of(option))
        return int(text)
    if not value.is_string:
        raise InvalidParameter(f"{option.name} must be a string", position_of(option))
    return str(text)


def plan_create_connection(statement: CreateConnection, ctx: PlanContext) -> CreateConnectionPlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    values: dict[str, Any] = {}
    password = None
    for option in statement.args.get("options") or []:
        if option.name in values or (option.name == "PASSWORD" and password is not None):
            raise InvalidParameter(f"option {option.name} given twice", position_of(option))
        if option.name == "PASSWORD":
            secret = option.args["value"]
            item = ctx.resolve(table_parts(secret), secret)
            if item.kind is not ItemKind.SECRET:
                raise WrongObjectType(
                    f"'{item.name}' is a {item.kind.sql_name}, not a secret", position_of(secret)
                )
            password = item.id
            continue
        values[option.name] = _literal(option, int if option.name == "PORT" else str)
    for required in ("HOST", "USER"):
        if required not in values:
            raise InvalidParameter(
                f"CREATE CONNECTION ... TO POSTGRES needs {required}", position_of(statement)
            )
    ssl_mode = values.get("SSL MODE", "prefer").lower()
    if ssl_mode not in SSL_MODES:
        raise InvalidParameter(
            f"invalid SSL MODE '{ssl_mode}' (one of {', '.join(SSL_MODES)})",
            position_of(statement),
        )
    statement.set("exists", False)
    return CreateConnectionPlan(
        name=name,
        host=values["HOST"],
        port=values.get("PORT", 5432),
        user=values["USER"],
        database=values.get("DATABASE", "postgres"),
        password=password,
        ssl_mode=ssl_mode,
        if_not_exists=if_not_exists,
        create_sql=item_create_sql(statement, ctx, table, name),
    )


def plan_create_postgres_source(
    statement: CreatePostgresSource, ctx: PlanContext
) -> CreatePostgresSourcePlan:
    table = statement.this
    name = qualify_name(ctx, table)
    if_not_exists = bool(statement.args.get("exists"))
    check_new_name(ctx, name, table, if_not_exists=if_not_exists)
    connection_node = statement.args["connection"]
    connection = ctx.resolve(table_parts(connection_node), connection_node)
    if connection.kind is not ItemKind.CONNECTION:
        raise WrongObjectType(
            f"'{connection.name}' is a {connection.kind.sql_name}, not a connection",
            position_of(connection_node),
        )
    options: dict[str, str] = {}
    for option in statement.args.get("options") or []:
        if option.name in options:
            raise InvalidParameter(f"option {option.name} given twice", position_of(option))
        options[option.name] = _literal(option, str)
    if "PUBLICATION" not in options:
        raise InvalidParameter(
            "CREATE SOURCE ... FROM POSTGRES needs (PUBLICATION '...')", position_of(statement)
        )
    cluster_prop = statement.args.get("cluster")
    tables: list[SourceTablePlan] = []
    seen: set[QualifiedName] = set()
    for entry in statement.args.get("tables") or []:
        upstream = table_parts(entry.this)
        alias = entry.args.get("alias")
        sub_node = alias if alias is not None else exp.to_table(upstream[-1])
        sub = qualify_name(ctx, sub_node) if alias is not None else _sibling(name, upstream[-1])
        if sub in seen or sub == name:
            raise DuplicateObject(f"subsource '{sub}' named twice", position_of(entry))
        seen.add(sub)
        if not if_not_exists:
            check_new_name(ctx, sub, entry, if_not_exists=False)
        desc = None
        columns = entry.args.get("columns")
        if columns is not None:
            names: list[str] = []
            types: list[ColumnType] = []
            for column in columns:
                column_name, column_type = column_def(column)
                add_column(names, types, column_name, column_type, column)
            desc = RelationDesc(tuple(names), tuple(types))
        tables.append(SourceTablePlan(upstream, sub, desc))
    return CreatePostgresSourcePlan(
        name=name,
        connection=connection.id,
        publication=options["PUBLICATION"],
        slot=options.get("SLOT"),
        all_tables=bool(statement.args.get("all_tables")),
        schemas=tuple(ident_name(s) for s in statement.args.get("schemas") or []),
        tables=tuple(tables),
        cluster=ident_name(cluster_prop.this) if cluster_prop is not None else None,
        if_not_exists=if_not_exists,
        create_sql=item_create_sql(statement, ctx, table, name),
        statement=statement,
    )


def _sibling(source: QualifiedName, item: str) -> QualifiedName:
    """A subsource named after its upstream table, beside its source."""
    return QualifiedName(source.database, source.schema, item)


def apply_to_catalog(catalog: DictCatalog, plan: Plan) -> list[CatalogItem] | None:
    """The items these plans create (`memory_catalog.InMemoryCatalog.apply`); None for others."""
    if isinstance(plan, CreateConnectionPlan):
        if plan.if_not_exists and plan.name in catalog._by_name:
            return []
        return [
            catalog._new(
                plan.name, ItemKind.CONNECTION, RelationDesc((), ()), depends_on=plan.depends_on
            )
        ]
    if isinstance(plan, CreatePostgresSourcePlan):
        if plan.if_not_exists and plan.name in catalog._by_name:
            return []
        if not plan.purified:
            raise InvalidParameter("a PostgreSQL source must be purified before it is created")
        source = catalog._new(
            plan.name,
            ItemKind.SOURCE,
            RelationDesc((), ()),
            depends_on=frozenset({plan.connection}),
        )
        created = [source]
        for entry in plan.tables:
            assert entry.name is not None and entry.desc is not None
            created.append(
                catalog._new(
                    entry.name, ItemKind.SOURCE, entry.desc, depends_on=frozenset({source.id})
                )
            )
        return created
    return None


PLANNERS: dict[type, Callable[[Any, PlanContext], Plan]] = {
    CreateConnection: plan_create_connection,
    CreatePostgresSource: plan_create_postgres_source,
}

__all__ = [
    "PLANNERS",
    "SSL_MODES",
    "CreateConnectionPlan",
    "CreatePostgresSourcePlan",
    "SourceTablePlan",
    "apply_to_catalog",
]
