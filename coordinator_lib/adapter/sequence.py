"""Sequencing: one plan in, one ExecuteResponse out (Materialize's
`sequence_plan`). DDL turns into typed catalog operations applied in one
compare-and-set (`catalog_ops.catalog_transact`), which then reconciles;
writes go through group commit; reads through `Coordinator.peek`.

A catalog change that loses a race with another process raises
`CatalogConflict`; the session client plans the statement again.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter import (
    clusters,
    connections,
    iceberg_sink,
    postgres_source,
    privileges,
    roles,
    secrets,
)
from coordinator_lib.adapter.catalog import SYSTEM_SCHEMAS, SessionCatalog
from coordinator_lib.adapter.catalog_ops import (
    AlterRetainHistory,
    CatalogOp,
    CreateDatabase,
    CreateItem,
    CreateSchema,
    DropDatabase,
    DropItems,
    DropSchema,
    RenameItem,
    catalog_transact,
)
from coordinator_lib.adapter.copy_from import CopyIn
from coordinator_lib.adapter.cursor import Cursor
from coordinator_lib.adapter.errors import (
    AdapterError,
    AdapterNotice,
    InvalidTransactionState,
    UnknownCursor,
)
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.adapter.responses import ExecuteResponse, ResultColumn
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.session import Session, Transaction
from coordinator_lib.adapter.subscribe import start_subscribe, subscribe_columns
from coordinator_lib.adapter.verify import verify_datum_desc
from coordinator_lib.compute.explain import explain_steps, view_annotator
from coordinator_lib.expr.relation import Constant
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql import plans as p
from coordinator_lib.sql.catalog import ItemKind, QualifiedName
from coordinator_lib.sql.create_sql import with_cluster
from coordinator_lib.sql.errors import DuplicateObject, UnknownObject
from coordinator_lib.sql.explain import explain_plan
from coordinator_lib.sql.plan_continual_task import CreateContinualTaskPlan
from coordinator_lib.sql.plan_webhook import CreateWebhookSourcePlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

Row = tuple[Any, ...]
Check = Callable[[], None]
TEXT = ScalarType.TEXT


def _ok(kind: Kind, tag: str, notices: list[AdapterNotice] | None = None) -> ExecuteResponse:
    return ExecuteResponse(kind, tag, notices=notices or [])


def _rows(
    columns: list[tuple[str, ScalarType]], rows: list[Row], kind: Kind = Kind.SENDING_ROWS
) -> ExecuteResponse:
    cols = tuple(ResultColumn(name, t) for name, t in columns)
    return ExecuteResponse(kind, f"SELECT {len(rows)}", cols, iter(rows))


def sequence(
    coord: Coordinator,
    session: Session,
    plan: p.Plan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    handler = _HANDLERS.get(type(plan))
    if handler is None:
        raise AdapterError(f"{type(plan).__name__} is not supported yet", code="0A000")
    return handler(coord, session, plan, catalog, check)


# --------------------------------------------------------------- catalog DDL
_CREATED = {
    p.CreateTablePlan: (Kind.CREATED_TABLE, "CREATE TABLE"),
    p.CreateIndexPlan: (Kind.CREATED_INDEX, "CREATE INDEX"),
    p.CreateSourcePlan: (Kind.CREATED_SOURCE, "CREATE SOURCE"),
    CreateWebhookSourcePlan: (Kind.CREATED_SOURCE, "CREATE SOURCE"),
    CreateContinualTaskPlan: (Kind.CREATED_CONTINUAL_TASK, "CREATE CONTINUAL TASK"),
}


def _create_item(
    coord: Coordinator, session: Session, plan: Any, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    if isinstance(plan, p.CreateViewPlan):
        kind, tag = (
            (Kind.CREATED_MATERIALIZED_VIEW, "CREATE MATERIALIZED VIEW")
            if plan.materialized
            else (Kind.CREATED_VIEW, "CREATE VIEW")
        )
    else:
        kind, tag = _CREATED[type(plan)]
    name: QualifiedName = plan.name
    if plan.if_not_exists and coord.catalog.index.lookup(name) is not None:
        notice = AdapterNotice(f"catalog item '{name}' already exists, skipping", "42P07")
        return _ok(kind, tag, [notice])
    count = 1
    if isinstance(plan, p.CreateSourcePlan):
        count += sum(1 for n in plan.subsources.values() if n != plan.name)
    replace = getattr(plan, "replace", None)
    create_sql = _on_session_cluster(coord, session, plan)
    create = CreateItem(
        create_sql, count, getattr(plan, "retain_history_ms", None), wall_clock_ms()
    )
    ops: list[CatalogOp] = [create]
    if replace is not None:  # CREATE OR REPLACE: the old item goes in the same transaction
        ops.insert(0, DropItems(frozenset({replace})))
    catalog_transact(coord, session, ops)
    return _ok(kind, tag)


def _on_session_cluster(coord: Coordinator, session: Session, plan: Any) -> str:
    """The create_sql to record: a materialized view, index or load
    generator source without IN CLUSTER runs on the session's `cluster`
    (as in Materialize), pinned in its create_sql so that a restart or
    another process puts it there too (the default cluster is left implicit)."""
    runs_on_cluster = isinstance(plan, p.CreateIndexPlan | p.CreateSourcePlan) or (
        isinstance(plan, p.CreateViewPlan) and plan.materialized
    )
    if not runs_on_cluster or plan.cluster is not None:
        return plan.create_sql
    cluster = session.get("cluster")
    if cluster not in coord.catalog.clusters():
        raise AdapterError(
            f"unknown cluster '{cluster}'",
            code="42704",
            hint="SET cluster to an existing cluster (SHOW CLUSTERS), or name one with IN CLUSTER.",
        )
    if cluster == clusters.DEFAULT_CLUSTER:
        return plan.create_sql
    return with_cluster(plan.create_sql, cluster)


def _drop(
    coord: Coordinator, session: Session, plan: p.DropPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    notices = [
        AdapterNotice(f'{plan.kind.sql_name} "{name}" does not exist, skipping', "00000")
        for name in plan.missing
    ]
    if plan.ids:
        doomed = frozenset(coord.catalog.index.doomed(plan.ids, plan.cascade))
        catalog_transact(coord, session, [DropItems(doomed)])
    return _ok(Kind.DROPPED, f"DROP {plan.kind.sql_name.upper()}", notices)


def _create_database(
    coord: Coordinator,
    session: Session,
    plan: p.CreateDatabasePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if plan.name in coord.catalog.databases():
        if plan.if_not_exists:
            notice = AdapterNotice(f'database "{plan.name}" already exists, skipping')
            return _ok(Kind.CREATED_DATABASE, "CREATE DATABASE", [notice])
        raise AdapterError(f"database '{plan.name}' already exists", code="42P04")
    catalog_transact(coord, session, [CreateDatabase(plan.name)])
    return _ok(Kind.CREATED_DATABASE, "CREATE DATABASE")


def _create_schema(
    coord: Coordinator,
    session: Session,
    plan: p.CreateSchemaPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if (plan.database, plan.name) in coord.catalog.schemas() or plan.name in SYSTEM_SCHEMAS:
        if plan.if_not_exists:
            notice = AdapterNotice(f'schema "{plan.name}" already exists, skipping')
            return _ok(Kind.CREATED_SCHEMA, "CREATE SCHEMA", [notice])
        raise AdapterError(f"schema '{plan.name}' already exists", code="42P06")
    catalog_transact(coord, session, [CreateSchema(plan.database, plan.name)])
    return _ok(Kind.CREATED_SCHEMA, "CREATE SCHEMA")


def _drop_schema(
    coord: Coordinator,
    session: Session,
    plan: p.DropSchemaPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    what = "DATABASE" if plan.schema is None else "SCHEMA"
    exists = (
        plan.database in coord.catalog.databases()
        if plan.schema is None
        else (plan.database, plan.schema) in coord.catalog.schemas()
    )
    if not exists:
        label = plan.database if plan.schema is None else f"{plan.database}.{plan.schema}"
        if plan.if_exists:
            notice = AdapterNotice(f'{what.lower()} "{label}" does not exist, skipping')
            return _ok(Kind.DROPPED, f"DROP {what}", [notice])
        code = "3D000" if plan.schema is None else "3F000"
        raise AdapterError(f"unknown {what.lower()} '{label}'", code=code)
    inside = [
        item
        for item in coord.catalog.items()
        if item.name.database == plan.database
        and (plan.schema is None or item.name.schema == plan.schema)
    ]
    if inside and not plan.cascade:
        raise AdapterError(
            f"{what.lower()} '{plan.schema or plan.database}' cannot be dropped without "
            f"CASCADE while it contains objects",
            code="2BP01",
        )
    doomed = frozenset(coord.catalog.index.doomed(tuple(item.id for item in inside), True))
    ops: list[CatalogOp] = [DropItems(doomed)] if doomed else []
    if plan.schema is None:
        ops.append(DropDatabase(plan.database))
    else:
        ops.append(DropSchema(plan.database, plan.schema))
    catalog_transact(coord, session, ops)
    return _ok(Kind.DROPPED, f"DROP {what}")


def _alter_rename(
    coord: Coordinator,
    session: Session,
    plan: p.AlterRenamePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if coord.catalog.index.lookup(plan.new_name) is not None:
        raise DuplicateObject(f"catalog item '{plan.new_name}' already exists")
    catalog_transact(coord, session, [RenameItem(plan.name, plan.new_name)])
    return _ok(Kind.ALTERED, f"ALTER {plan.kind.sql_name.upper()}")


def _alter_retain_history(
    coord: Coordinator,
    session: Session,
    plan: p.AlterRetainHistoryPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    catalog_transact(coord, session, [AlterRetainHistory(plan.id, plan.retain_history_ms)])
    return _ok(Kind.ALTERED, f"ALTER {plan.kind.sql_name.upper()}")


# --------------------------------------------------------------------- SHOW
_SHOW_KINDS = {
    p.ShowKind.TABLES: ItemKind.TABLE,
    p.ShowKind.SOURCES: ItemKind.SOURCE,
    p.ShowKind.SINKS: ItemKind.SINK,
    p.ShowKind.VIEWS: ItemKind.VIEW,
    p.ShowKind.MATERIALIZED_VIEWS: ItemKind.MATERIALIZED_VIEW,
    p.ShowKind.INDEXES: ItemKind.INDEX,
    p.ShowKind.CONTINUAL_TASKS: ItemKind.CONTINUAL_TASK,
    p.ShowKind.CONNECTIONS: ItemKind.CONNECTION,
    p.ShowKind.SECRETS: ItemKind.SECRET,
}

# Kinds whose SHOW list has Materialize's `comment` column ('': no COMMENT ON here).
_WITH_COMMENT = {ItemKind.TABLE, ItemKind.SECRET}


def _like(pattern: str | None, name: str) -> bool:
    if pattern is None:
        return True
    glob = pattern.replace("*", "[*]").replace("?", "[?]").replace("%", "*").replace("_", "?")
    return fnmatch.fnmatchcase(name, glob)


def _show_objects(
    coord: Coordinator,
    session: Session,
    plan: p.ShowObjectsPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if plan.kind is p.ShowKind.DATABASES:
        rows = [(d,) for d in coord.catalog.databases() if _like(plan.like, d)]
        return _rows([("name", TEXT)], sorted(rows))
    if plan.kind is p.ShowKind.SCHEMAS:
        database = plan.database or session.database
        names = [s for d, s in coord.catalog.schemas() if d == database] + list(SYSTEM_SCHEMAS)
        return _rows([("name", TEXT)], sorted((s,) for s in names if _like(plan.like, s)))
    if plan.kind is p.ShowKind.CLUSTERS:
        rows = [
            (name, str(spec.get("replication_factor", 1)))
            for name, spec in coord.catalog.clusters().items()
            if _like(plan.like, name)
        ]
        return _rows([("name", TEXT), ("replicas", TEXT)], sorted(rows))
    database = plan.database or session.database
    schema = plan.schema or (session.search_path[0] if session.search_path else "public")
    items = [
        item
        for item in coord.catalog.items()
        if (plan.on is not None or (item.name.database, item.name.schema) == (database, schema))
        and _like(plan.like, item.name.item)
    ]
    if plan.kind is p.ShowKind.OBJECTS:
        rows = [(i.name.item, i.kind.sql_name) for i in items]
        return _rows([("name", TEXT), ("type", TEXT)], sorted(rows))
    kind = _SHOW_KINDS[plan.kind]
    items = [i for i in items if i.kind is kind and (plan.on is None or i.on == plan.on)]
    if kind is ItemKind.INDEX:
        rows = []
        for item in items:
            on = coord.catalog.get(item.on) if item.on is not None else None
            key = ", ".join(on.desc.names[k] for k in item.key or ()) if on else ""
            cluster = clusters.item_cluster(coord, item.id)
            rows.append((item.name.item, on.name.item if on else "", cluster, f"{{{key}}}"))
        return _rows([("name", TEXT), ("on", TEXT), ("cluster", TEXT), ("key", TEXT)], sorted(rows))
    if kind in (ItemKind.MATERIALIZED_VIEW, ItemKind.SOURCE, ItemKind.CONTINUAL_TASK):
        rows = [(i.name.item, clusters.item_cluster(coord, i.id)) for i in items]
        return _rows([("name", TEXT), ("cluster", TEXT)], sorted(rows))
    if kind is ItemKind.SINK:  # Materialize's columns; Iceberg is the only sink type
        rows = [(i.name.item, "iceberg", clusters.item_cluster(coord, i.id), "") for i in items]
        columns = [("name", TEXT), ("type", TEXT), ("cluster", TEXT), ("comment", TEXT)]
        return _rows(columns, sorted(rows))
    if kind is ItemKind.CONNECTION:  # the only connection type
        rows = [(i.name.item, connections.connection_type(coord, i.id)) for i in items]
        return _rows([("name", TEXT), ("type", TEXT)], sorted(rows))
    if kind in _WITH_COMMENT:
        rows = [(i.name.item, "") for i in items]
        return _rows([("name", TEXT), ("comment", TEXT)], sorted(rows))
    return _rows([("name", TEXT)], sorted((i.name.item,) for i in items))


def _show_columns(
    coord: Coordinator,
    session: Session,
    plan: p.ShowColumnsPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    desc = catalog.get(plan.id).desc
    rows = [
        (name, column.nullable, column.scalar_type.value)
        for name, column in zip(desc.names, desc.types, strict=True)
    ]
    return _rows([("name", TEXT), ("nullable", ScalarType.BOOLEAN), ("type", TEXT)], rows)


def _show_create(
    coord: Coordinator,
    session: Session,
    plan: p.ShowCreatePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    entry = coord.catalog.entry(plan.id)
    return _rows([("name", TEXT), ("create_sql", TEXT)], [(str(plan.name), entry.create_sql)])


def _show_variable(
    coord: Coordinator,
    session: Session,
    plan: p.ShowVariablePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if plan.name == "all":
        rows = [(name, value, "") for name, value in session.all_vars()]
        return _rows([("name", TEXT), ("setting", TEXT), ("description", TEXT)], rows)
    name = session.canonical(plan.name)
    return _rows([(name, TEXT)], [(session.get(name),)])


def _set_variable(
    coord: Coordinator,
    session: Session,
    plan: p.SetVariablePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    """SET / RESET. SET LOCAL (and SET TRANSACTION) lasts for the current
    transaction only; outside one it does nothing but warn, as in PostgreSQL."""
    tag = "SET" if plan.value is not None else "RESET"
    if plan.name == "all":
        session.reset_all()
        return _ok(Kind.SET_VARIABLE, tag)
    name = session.canonical(plan.name)
    transaction = session.transaction
    if plan.local:
        if transaction is None:
            notice = AdapterNotice(
                "SET LOCAL can only be used in transaction blocks", "25P01", severity="WARNING"
            )
            return _ok(Kind.SET_VARIABLE, tag, [notice])
        if name == "transaction_isolation":
            if transaction.timestamp is not None:
                raise InvalidTransactionState(
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                    code="25001",
                )
            transaction.isolation = _checked_isolation(session, plan.value)
        elif name == "transaction_read_only":
            transaction.read_only = (plan.value or "off").lower() == "on"
        return _ok(Kind.SET_VARIABLE, tag)
    session.set(name, plan.value)
    notices = []
    if name == "database" and plan.value and plan.value not in coord.catalog.databases():
        notices.append(AdapterNotice(f'database "{plan.value}" does not exist', "3D000"))
    return _ok(Kind.SET_VARIABLE, tag, notices)


def _checked_isolation(session: Session, value: str | None) -> str:
    from coordinator_lib.adapter.session import VARS

    return VARS["transaction_isolation"].check(value or VARS["transaction_isolation"].default)


# ------------------------------------------------------------- transactions
def _begin(
    coord: Coordinator,
    session: Session,
    plan: p.StartTransactionPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    if session.transaction is not None:
        notice = AdapterNotice(
            "there is already a transaction in progress", "25001", severity="WARNING"
        )
        return _ok(Kind.STARTED_TRANSACTION, "BEGIN", [notice])
    isolation = _checked_isolation(session, plan.isolation) if plan.isolation else session.isolation
    session.transaction = Transaction(isolation, read_only=bool(plan.read_only))
    return _ok(Kind.STARTED_TRANSACTION, "BEGIN")


def end_transaction(coord: Coordinator, session: Session, commit: bool) -> ExecuteResponse:
    transaction = session.transaction
    if transaction is None:
        notice = AdapterNotice("there is no transaction in progress", "25P01", severity="WARNING")
        tag = "COMMIT" if commit else "ROLLBACK"
        return _ok(Kind.COMMITTED if commit else Kind.ROLLED_BACK, tag, [notice])
    session.transaction = None
    try:
        for cursor in session.cursors.values():
            cursor.close()
        session.cursors.clear()
        if commit and not transaction.failed:
            if transaction.writes:
                with coord.write_lock.shared():
                    coord.commit_writes(transaction.writes)
            return _ok(Kind.COMMITTED, "COMMIT")
        return _ok(Kind.ROLLED_BACK, "ROLLBACK")
    finally:
        transaction.release()


def _commit_plan(
    coord: Coordinator,
    session: Session,
    plan: p.CommitTransactionPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    return end_transaction(coord, session, commit=True)


def _abort_plan(
    coord: Coordinator,
    session: Session,
    plan: p.AbortTransactionPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    return end_transaction(coord, session, commit=False)


def _savepoint(
    coord: Coordinator,
    session: Session,
    plan: p.SavepointPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    """Savepoints inside a transaction: ROLLBACK TO drops the writes buffered
    since, and clears the failed state (what client libraries use them for)."""
    transaction = session.transaction
    verb = {"savepoint": "SAVEPOINT", "release": "RELEASE", "rollback": "ROLLBACK"}[plan.action]
    if transaction is None:
        raise InvalidTransactionState(
            f"{verb} can only be used in transaction blocks", code="25P01"
        )
    if plan.action == "savepoint":
        transaction.savepoints[plan.name] = {id: len(r) for id, r in transaction.writes.items()}
        return _ok(Kind.SET_VARIABLE, "SAVEPOINT")
    if plan.name not in transaction.savepoints:
        raise AdapterError(f'savepoint "{plan.name}" does not exist', code="3B001")
    if plan.action == "release":
        del transaction.savepoints[plan.name]
        return _ok(Kind.SET_VARIABLE, "RELEASE")
    marks = transaction.savepoints[plan.name]
    transaction.writes = {
        id: rows[: marks[id]] for id, rows in transaction.writes.items() if marks.get(id)
    }
    transaction.failed = False
    return _ok(Kind.ROLLED_BACK, "ROLLBACK")


def _read_allowed(session: Session) -> None:
    transaction = session.transaction
    if transaction is not None and transaction.writes:
        raise InvalidTransactionState(
            "transaction in write-only mode: reads cannot follow writes", code="25000"
        )


def _write_allowed(session: Session) -> None:
    transaction = session.transaction
    if transaction is None:
        return
    if transaction.read_only:
        raise InvalidTransactionState(
            "cannot execute INSERT in a read-only transaction", code="25006"
        )
    if transaction.timestamp is not None:
        raise InvalidTransactionState(
            "transaction in read-only mode: writes cannot follow reads", code="25000"
        )


# ------------------------------------------------------------------- writes
def _expanded(rows: list[tuple[Row, int]]) -> list[Row]:
    return [row for row, count in rows for _ in range(max(count, 0))]


def _insert(
    coord: Coordinator, session: Session, plan: p.InsertPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    _write_allowed(session)
    desc = catalog.get(plan.id).desc
    reads = coord.storage_inputs(plan.expr)
    if reads and session.transaction is not None:
        raise InvalidTransactionState(
            "INSERT ... SELECT cannot run inside a transaction block", code="25000"
        )
    # INSERT ... SELECT reads then writes: nothing else of this process
    # writes in between. A blind INSERT shares the lock with other blind
    # writes, so they share group commits (UNIQUE keys are checked by the
    # group-commit leader, which needs no lock).
    lock = coord.write_lock.exclusive() if reads else coord.write_lock.shared()
    with lock:
        if reads:
            rows, _ = coord.peek(session, plan.expr, p.RowSetFinishing(), None, check)
        elif isinstance(plan.expr, Constant) and all(diff > 0 for _, diff in plan.expr.rows):
            rows = _expanded(list(plan.expr.rows))  # VALUES of constants: no dataflow
        else:
            rows = _expanded(coord.compute.peek_expr(coord.with_system_relations(plan.expr), 0))
        verify_datum_desc(desc, rows)
        changes = {plan.id: [(row, 1) for row in rows]}
        if session.transaction is not None:
            written = session.transaction.writes.get(plan.id, [])
            # A value that cannot be stored, or a duplicate UNIQUE key, fails
            # this statement now, as in PostgreSQL (COMMIT checks again).
            coord.group_commit.encode(changes)
            coord.group_commit.check({plan.id: written + changes[plan.id]})
            session.transaction.writes.setdefault(plan.id, []).extend(changes[plan.id])
        elif rows:
            coord.commit_writes(changes)
    return _ok(Kind.INSERTED, f"INSERT 0 {len(rows)}")


def _copy_from(
    coord: Coordinator,
    session: Session,
    plan: p.CopyFromPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    """COPY ... FROM STDIN: the server streams the client's data into the
    CopyIn, whose `finish` writes it (adapter/copy_from.py)."""
    _write_allowed(session)
    return ExecuteResponse(Kind.COPY_IN, "COPY", copy_in=CopyIn(coord, session, plan))


def _read_then_write(coord: Coordinator, session: Session, plan: Any, check: Check) -> int:
    """DELETE / UPDATE: read the rows to change at the latest time, write
    the changes, all under the write lock (no other write in between here)."""
    if session.transaction is not None:
        raise InvalidTransactionState(
            f"{type(plan).__name__.removesuffix('Plan').upper()} cannot run inside a "
            "transaction block",
            code="25000",
        )
    with coord.write_lock.exclusive():
        retract, _ = coord.peek(session, plan.retract, p.RowSetFinishing(), None, check)
        changes: list[tuple[Row, int]] = [(row, -1) for row in retract]
        if isinstance(plan, p.UpdatePlan):
            insert, _ = coord.peek(session, plan.insert, p.RowSetFinishing(), None, check)
            verify_datum_desc(plan.insert.desc, insert)
            changes += [(row, 1) for row in insert]
        if changes:
            coord.commit_writes({plan.id: changes})
    return len(retract)


def _delete(
    coord: Coordinator, session: Session, plan: p.DeletePlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    return _ok(Kind.DELETED, f"DELETE {_read_then_write(coord, session, plan, check)}")


def _update(
    coord: Coordinator, session: Session, plan: p.UpdatePlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    return _ok(Kind.UPDATED, f"UPDATE {_read_then_write(coord, session, plan, check)}")


# -------------------------------------------------------------------- reads
def select_columns(plan: p.SelectPlan) -> tuple[ResultColumn, ...]:
    desc = plan.desc
    names = plan.column_names or desc.names
    return tuple(
        ResultColumn.of(name, column) for name, column in zip(names, desc.types, strict=True)
    )


def _run_select(
    coord: Coordinator, session: Session, plan: p.SelectPlan, check: Check
) -> Iterator[Row]:
    """The rows as they are finished: the front door sends them as they come."""
    _read_allowed(session)
    rows, _ = coord.peek_stream(session, plan.expr, plan.finishing, plan.as_of, check)
    return rows


def _select(
    coord: Coordinator, session: Session, plan: p.SelectPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    rows = _run_select(coord, session, plan, check)
    return ExecuteResponse(Kind.SENDING_ROWS, "SELECT", select_columns(plan), rows)


def _explain(
    coord: Coordinator, session: Session, plan: p.ExplainPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    if plan.stage == "PHYSICAL":  # the step plan the delta rules run
        text = explain_plan(plan, draw=explain_steps)
        return _rows([("Physical Plan", TEXT)], [(text,)])
    text = explain_plan(plan, view_annotator(plan.expr))
    return _rows([("Optimized Plan", TEXT)], [(text,)])


def _explain_timestamp(
    coord: Coordinator,
    session: Session,
    plan: p.ExplainTimestampPlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    determination = coord.determine_timestamp(session, plan.select.expr, plan.select.as_of)
    text = determination.explain_json() if plan.format == "json" else determination.explain()
    return _rows([("Timestamp", TEXT)], [(text,)])


def _subscribe(
    coord: Coordinator,
    session: Session,
    plan: p.SubscribePlan,
    catalog: SessionCatalog,
    check: Check,
) -> ExecuteResponse:
    _read_allowed(session)
    stream = start_subscribe(coord, session, plan, check)
    return ExecuteResponse(Kind.SENDING_ROWS, "SUBSCRIBE", subscribe_columns(plan), iter(stream))


# ------------------------------------------------------------------ cursors
def _declare(
    coord: Coordinator, session: Session, plan: p.DeclarePlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    if session.transaction is None:
        raise InvalidTransactionState(
            "DECLARE CURSOR can only be used in transaction blocks", code="25P01"
        )
    if plan.name in session.cursors:
        raise AdapterError(f'cursor "{plan.name}" already exists', code="42P03")
    inner = plan.plan
    if isinstance(inner, p.SubscribePlan):
        stream = start_subscribe(coord, session, inner, session_check(session))
        cursor = Cursor(plan.name, subscribe_columns(inner), stream=stream)
    elif isinstance(inner, p.SelectPlan):
        rows = _run_select(coord, session, inner, check)
        cursor = Cursor(plan.name, select_columns(inner), rows=iter(rows))
    else:
        raise AdapterError("DECLARE needs a SELECT or SUBSCRIBE", code="42601")
    session.cursors[plan.name] = cursor
    return _ok(Kind.DECLARED_CURSOR, "DECLARE CURSOR")


def session_check(session: Session) -> Check:
    """Cancellation for work that outlives its statement (a cursor's
    SUBSCRIBE): only FETCH's own check applies, so nothing here."""
    return lambda: None


def _fetch(
    coord: Coordinator, session: Session, plan: p.FetchPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    cursor = session.cursors.get(plan.name)
    if cursor is None:
        raise UnknownCursor(f'cursor "{plan.name}" does not exist')
    if cursor.stream is not None:
        cursor.stream.check_cancel = check
    rows = cursor.fetch(plan.count, plan.timeout_ms)
    return ExecuteResponse(Kind.FETCHED, f"FETCH {len(rows)}", cursor.columns, iter(rows))


def _close(
    coord: Coordinator, session: Session, plan: p.ClosePlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    cursor = session.cursors.pop(plan.name, None)
    if cursor is None:
        raise UnknownCursor(f'cursor "{plan.name}" does not exist')
    cursor.close()
    return _ok(Kind.CLOSED_CURSOR, "CLOSE CURSOR")


def _copy_to(
    coord: Coordinator, session: Session, plan: p.CopyToPlan, catalog: SessionCatalog, check: Check
) -> ExecuteResponse:
    inner = plan.plan
    if isinstance(inner, p.SubscribePlan):
        _read_allowed(session)
        stream = start_subscribe(coord, session, inner, check)
        columns, rows = subscribe_columns(inner), iter(stream)
    elif isinstance(inner, p.SelectPlan):
        columns, rows = select_columns(inner), _run_select(coord, session, inner, check)
    else:
        raise AdapterError("COPY TO needs a SELECT or SUBSCRIBE", code="42601")
    return ExecuteResponse(Kind.COPY_TO, "COPY", columns, rows, copy_format=plan.format)


_HANDLERS: dict[type, Callable[..., ExecuteResponse]] = {
    p.CreateTablePlan: _create_item,
    p.CreateViewPlan: _create_item,
    p.CreateIndexPlan: _create_item,
    p.CreateSourcePlan: _create_item,
    CreateWebhookSourcePlan: _create_item,
    CreateContinualTaskPlan: _create_item,
    **secrets.HANDLERS,
    **connections.HANDLERS,
    **postgres_source.HANDLERS,
    **iceberg_sink.HANDLERS,
    **clusters.HANDLERS,
    **roles.HANDLERS,
    **privileges.HANDLERS,
    p.DropPlan: _drop,
    p.CreateDatabasePlan: _create_database,
    p.CreateSchemaPlan: _create_schema,
    p.DropSchemaPlan: _drop_schema,
    p.AlterRenamePlan: _alter_rename,
    p.AlterRetainHistoryPlan: _alter_retain_history,
    p.ShowObjectsPlan: _show_objects,
    p.ShowColumnsPlan: _show_columns,
    p.ShowCreatePlan: _show_create,
    p.ShowVariablePlan: _show_variable,
    p.SetVariablePlan: _set_variable,
    p.StartTransactionPlan: _begin,
    p.CommitTransactionPlan: _commit_plan,
    p.AbortTransactionPlan: _abort_plan,
    p.SavepointPlan: _savepoint,
    p.InsertPlan: _insert,
    p.DeletePlan: _delete,
    p.UpdatePlan: _update,
    p.SelectPlan: _select,
    p.ExplainPlan: _explain,
    p.ExplainTimestampPlan: _explain_timestamp,
    p.SubscribePlan: _subscribe,
    p.DeclarePlan: _declare,
    p.FetchPlan: _fetch,
    p.ClosePlan: _close,
    p.CopyToPlan: _copy_to,
    p.CopyFromPlan: _copy_from,
}

__all__ = ["UnknownObject", "end_transaction", "select_columns", "sequence"]
