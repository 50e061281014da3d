"""Connections: CREATE CONNECTION ... TO POSTGRES, checked when created.

A connection is a catalog item (kind `connection`) whose stored SQL names
its password's secret, never the value, so SHOW CREATE CONNECTION and the
statement log print no password. CREATE CONNECTION connects to the server
with the given settings and refuses, with the server's own SQLSTATE where
it has one, a server it cannot reach (08001), a bad password (28P01), a
missing database (3D000), a role without REPLICATION (42501) and a server
whose wal_level is not `logical` (55000): a connection that exists can feed
a source.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.catalog import Catalog, SessionCatalog
from coordinator_lib.adapter.catalog_ops import CreateItem, catalog_transact
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.secrets import stored_secret_values
from coordinator_lib.adapter.secrets_key import configured_key
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.plan_postgres import CreateConnectionPlan

if TYPE_CHECKING:
    import psycopg

    from coordinator_lib.adapter.coordinator import Coordinator

CONNECT_TIMEOUT_S = 5

# libpq's connection failures carry no SQLSTATE: the server's words say which.
_FAILURES = (
    (re.compile(r"password authentication failed|no password supplied"), "28P01"),
    (re.compile(r"database \".*\" does not exist"), "3D000"),
    (re.compile(r"role \".*\" does not exist"), "28000"),
    (re.compile(r"no pg_hba.conf entry"), "28000"),
)


def store_item(coord: Coordinator, session: Session, create_sql: str, id_count: int = 1) -> None:
    """One catalog entry for `create_sql` taking `id_count` new ids."""
    catalog_transact(coord, session, [CreateItem(create_sql, id_count, created_at=wall_clock_ms())])


def connection_type(coord: Coordinator, id: GlobalId) -> str:
    """What SHOW CONNECTIONS says a connection is."""
    from coordinator_lib.sql.plan_iceberg import CreateIcebergConnectionPlan

    plan = coord.catalog.index.plans.get(id)
    return "iceberg-catalog" if isinstance(plan, CreateIcebergConnectionPlan) else "postgres"


def conninfo_of(coord: Coordinator, plan: CreateConnectionPlan) -> dict[str, Any]:
    """libpq keywords for `plan` (with the password's current value)."""
    return stored_conninfo(coord.catalog, configured_key(coord.config), plan)


def stored_conninfo(
    catalog: Catalog, key: bytes | None, plan: CreateConnectionPlan
) -> dict[str, Any]:
    """libpq keywords for `plan`, its password read from the durable
    `catalog` with the secrets `key`."""
    info: dict[str, Any] = {
        "host": plan.host,
        "port": plan.port,
        "user": plan.user,
        "dbname": plan.database,
        "sslmode": plan.ssl_mode,
    }
    if plan.password is not None:
        values = stored_secret_values(catalog, key, {plan.password})
        info["password"] = values[plan.password].decode()
    return info


def connection_plan(coord: Coordinator, id: GlobalId) -> CreateConnectionPlan:
    plan = coord.catalog.index.plans.get(id)
    if not isinstance(plan, CreateConnectionPlan):
        raise AdapterError(f"unknown connection {id}", code="42704")
    return plan


def connect(conninfo: dict[str, Any]) -> psycopg.Connection[Any]:
    """A connection to the upstream server, or AdapterError saying why not."""
    import psycopg

    where = f"{conninfo['host']}:{conninfo['port']}"
    try:
        return psycopg.connect(**conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as error:
        text = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        code = getattr(error, "sqlstate", None) or next(
            (c for pattern, c in _FAILURES if pattern.search(str(error))), "08001"
        )
        raise AdapterError(f"cannot connect to PostgreSQL at {where}: {text}", code=code) from None


def check_server(conninfo: dict[str, Any]) -> None:
    """The server takes connections with these settings and can replicate."""
    with connect(conninfo) as conn:
        row = conn.execute(
            "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        if not row or not row[0]:
            raise AdapterError(
                f'role "{conninfo["user"]}" lacks the REPLICATION attribute',
                code="42501",
                hint=f'ALTER ROLE "{conninfo["user"]}" WITH REPLICATION; upstream.',
            )
        level = conn.execute("SHOW wal_level").fetchone()
        if not level or level[0] != "logical":
            raise AdapterError(
                f"the server's wal_level is {level[0] if level else 'unknown'}, not logical",
                code="55000",
                hint="Set wal_level = logical upstream and restart it.",
            )


def create_connection(
    coord: Coordinator,
    session: Session,
    plan: CreateConnectionPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.if_not_exists and coord.catalog.index.lookup(plan.name) is not None:
        notice = AdapterNotice(f"catalog item '{plan.name}' already exists, skipping", "42P07")
        return ExecuteResponse(Kind.CREATED_CONNECTION, "CREATE CONNECTION", notices=[notice])
    check_server(conninfo_of(coord, plan))
    store_item(coord, session, plan.create_sql)
    return ExecuteResponse(Kind.CREATED_CONNECTION, "CREATE CONNECTION")


HANDLERS = {CreateConnectionPlan: create_connection}

__all__ = [
    "HANDLERS",
    "check_server",
    "connect",
    "connection_plan",
    "connection_type",
    "conninfo_of",
    "create_connection",
    "store_item",
    "stored_conninfo",
]
