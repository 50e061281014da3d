"""Privileges: owners, GRANT / REVOKE, and the check before every statement.

The catalog record keeps one acl per object (`adapter/acl.py`: owner and
granted privileges per role, PostgreSQL's acl letters). The role that
creates an object owns it: every catalog transaction stamps owners on the
objects it adds and drops the acls of objects it removes, in the same
compare-and-set (`adapter/catalog_ops.py`).

`authorize` runs before a statement is sequenced: superusers may do
anything (`Authenticator.is_superuser`), owners anything with what they own;
everyone else needs the privilege (granted to them or to PUBLIC):

- naming an object at all: USAGE on its database and schema;
- reading a table, view, materialized view or source: SELECT on each one the
  statement names (a view's own inputs are checked against nobody, as
  PostgreSQL checks them against the view's owner, who had them to create it);
- INSERT / UPDATE / DELETE: that privilege on the target (SELECT on the others);
- naming a secret (a webhook source's CHECK): USAGE on it;
- creating an object: CREATE on its schema (a schema: on its database);
- DROP (of everything CASCADE takes along), ALTER, CREATE INDEX,
  GRANT / REVOKE: ownership.

Like Materialize, PUBLIC has USAGE on the `materialize` database and its
`public` schema; nobody but their owner has CREATE on a schema by default
(PostgreSQL 15). Denials are 42501 "permission denied for table t".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.acl import catalog_roles, has_privilege, owner_of, privilege_rows
from coordinator_lib.adapter.catalog_ops import Grant, catalog_transact
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.roles import InsufficientPrivilege
from coordinator_lib.adapter.session import Session
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql import plans as p
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.plan_cluster import CreateClusterPlan, DropClusterPlan
from coordinator_lib.sql.plan_continual_task import CreateContinualTaskPlan
from coordinator_lib.sql.plan_role import PRIVILEGE_NAMES, PUBLIC, GrantPlan
from coordinator_lib.sql.plan_webhook import (
    AlterSecretPlan,
    CreateSecretPlan,
    CreateWebhookSourcePlan,
)

if TYPE_CHECKING:
    from coordinator_lib.adapter.catalog import SessionCatalog
    from coordinator_lib.adapter.coordinator import Coordinator

_READ_NAMES = {
    ItemKind.TABLE: "table",
    ItemKind.VIEW: "view",
    ItemKind.MATERIALIZED_VIEW: "materialized view",
    ItemKind.SOURCE: "source",
    ItemKind.SECRET: "secret",
    ItemKind.CONTINUAL_TASK: "continual task",
    ItemKind.INDEX: "index",
    ItemKind.CONNECTION: "connection",
    ItemKind.SINK: "sink",
}


# ---------------------------------------------------------------- checking
class _Check:
    def __init__(self, coord: Coordinator, session: Session, catalog: SessionCatalog) -> None:
        self.coord = coord
        self.state = catalog.state
        self.catalog = catalog
        self.role = session.user

    def item(self, id: GlobalId, letter: str) -> None:
        if id.kind != "u":
            return
        item = self.catalog.get(id)
        self.usage(item.name.database, item.name.schema)
        if not has_privilege(self.state, self.role, f"item:{id}", letter):
            what = _READ_NAMES.get(item.kind, "object")
            raise InsufficientPrivilege(f"permission denied for {what} {item.name.item}")

    def usage(self, database: str, schema: str | None = None) -> None:
        """USAGE on the database (and schema) an object is named in."""
        if not has_privilege(self.state, self.role, f"database:{database}", "U"):
            raise InsufficientPrivilege(f"permission denied for database {database}")
        key = f"schema:{database}.{schema}"
        if schema is not None and not has_privilege(self.state, self.role, key, "U"):
            raise InsufficientPrivilege(f"permission denied for schema {schema}")

    def owns(self, key: str, what: str) -> None:
        if owner_of(self.state, key) != self.role:
            raise InsufficientPrivilege(f"must be owner of {what}")

    def owns_item(self, id: GlobalId) -> None:
        item = self.catalog.get(id)
        what = _READ_NAMES.get(item.kind, "object")
        self.owns(f"item:{id}", f"{what} {item.name.item}")

    def create_in(self, database: str, schema: str | None = None) -> None:
        key, what = (
            (f"database:{database}", f"database {database}")
            if schema is None
            else (f"schema:{database}.{schema}", f"schema {schema}")
        )
        if schema is not None:
            self.usage(database)
        if not has_privilege(self.state, self.role, key, "C"):
            raise InsufficientPrivilege(f"permission denied for {what}")

    def reads(self, ids: set[GlobalId], except_: GlobalId | None = None) -> None:
        for id in sorted(ids, key=str):
            if id == except_ or id.kind != "u":
                continue
            kind = self.catalog.get(id).kind
            if kind is ItemKind.INDEX:
                continue
            self.item(id, "U" if kind in (ItemKind.SECRET, ItemKind.CONNECTION) else "r")


_WRITES = {p.InsertPlan: "a", p.UpdatePlan: "w", p.DeletePlan: "d"}
_CREATES = (
    p.CreateTablePlan,
    p.CreateViewPlan,
    p.CreateSourcePlan,
    p.CreateIndexPlan,
    CreateWebhookSourcePlan,
    CreateContinualTaskPlan,
    CreateSecretPlan,
)
_SUPERUSER_ONLY = (p.CreateDatabasePlan, CreateClusterPlan, DropClusterPlan)


def authorize(coord: Coordinator, session: Session, plan: p.Plan, catalog: SessionCatalog) -> None:
    """Raise 42501 unless the session's role may run `plan` (see module doc)."""
    if coord.authenticator.is_superuser(session, catalog.state):
        return
    check = _Check(coord, session, catalog)
    resolved: set[GlobalId] = set(catalog.resolved)
    if isinstance(plan, _SUPERUSER_ONLY):
        raise InsufficientPrivilege(f"permission denied to {_verb(plan)}")
    if type(plan) in _WRITES:
        check.item(plan.id, _WRITES[type(plan)])  # type: ignore[attr-defined]
        check.reads(resolved, except_=plan.id)  # type: ignore[attr-defined]
    elif isinstance(plan, _CREATES):
        name = plan.name
        replaced: GlobalId | None = getattr(plan, "replace", None)  # CREATE OR REPLACE
        if replaced is not None:
            check.owns_item(replaced)
        check.create_in(name.database, name.schema)
        if isinstance(plan, p.CreateIndexPlan):
            check.owns_item(plan.on)
        check.reads(resolved)
    elif isinstance(plan, p.CreateSchemaPlan):
        check.create_in(plan.database)
    elif isinstance(plan, p.DropPlan):
        for id in plan.ids:
            check.owns_item(id)
        if plan.cascade:  # CASCADE drops only what the role owns too
            for id in sorted(coord.catalog.index.doomed(plan.ids, True), key=str):
                check.owns_item(id)
    elif isinstance(plan, p.DropSchemaPlan):
        if plan.schema is None:
            check.owns(f"database:{plan.database}", f"database {plan.database}")
        else:
            check.owns(f"schema:{plan.database}.{plan.schema}", f"schema {plan.schema}")
    elif isinstance(plan, p.AlterRenamePlan | p.AlterRetainHistoryPlan):
        check.owns_item(plan.id)
    elif isinstance(plan, AlterSecretPlan):
        if plan.id is not None:
            check.owns_item(plan.id)
    elif isinstance(plan, GrantPlan):
        for target in plan.targets:
            check.owns(target.key, f"{target.object_type} {target.display}")
    else:  # reads (SELECT, SUBSCRIBE, COPY, EXPLAIN, DECLARE, SHOW ...) and session statements
        check.reads(resolved)


def _verb(plan: p.Plan) -> str:
    return {
        p.CreateDatabasePlan: "create database",
        CreateClusterPlan: "create cluster",
        DropClusterPlan: "drop cluster",
    }[type(plan)]


# ------------------------------------------------------------ GRANT/REVOKE
def grant(
    coord: Coordinator, session: Session, plan: GrantPlan, catalog: SessionCatalog, check: Any
) -> ExecuteResponse:
    known = set(catalog_roles(catalog.state)) | set(coord.config.users) | {PUBLIC}
    for role in plan.roles:
        if role not in known:
            raise AdapterError(f'role "{role}" does not exist', code="42704")
    keys = tuple(target.key for target in plan.targets)
    catalog_transact(coord, session, [Grant(keys, plan.roles, plan.privileges, plan.revoke)])
    if plan.revoke:
        return ExecuteResponse(Kind.REVOKED, "REVOKE")
    return ExecuteResponse(Kind.GRANTED, "GRANT")


HANDLERS = {GrantPlan: grant}


# ---------------------------------------------------------- system relations
ROLE_COLUMNS = (
    ("name", "text", False),
    ("rolcanlogin", "boolean", False),
    ("rolsuper", "boolean", False),
)
PG_ROLES_COLUMNS = (
    ("rolname", "text", False),
    ("rolsuper", "boolean", False),
    ("rolcanlogin", "boolean", False),
    ("rolpassword", "text"),
    ("oid", "integer", False),
)
PRIVILEGE_COLUMNS = (
    ("grantee", "text", False),
    ("database", "text"),
    ("schema", "text"),
    ("name", "text", False),
    ("object_type", "text", False),
    ("privilege_type", "text", False),
)


def _roles(coord: Coordinator) -> list[tuple[str, bool, bool, bool]]:
    """(name, login, superuser, has a password): configured users, then catalog roles."""
    rows = [(name, True, True, True) for name in sorted(coord.config.users)]
    for name, role in sorted(catalog_roles(coord.catalog.state).items()):
        rows.append((name, bool(role["login"]), bool(role["superuser"]), bool(role["password"])))
    return rows


def mz_roles_rows(coord: Coordinator) -> list[tuple[Any, ...]]:
    return [(name, login, superuser) for name, login, superuser, _ in _roles(coord)]


_ROLE_OID_BASE = 30000


def role_oids(coord: Coordinator) -> dict[str, int]:
    """An OID per role (pg_roles.oid, pg_class.relowner): the roles, then
    owners that are none of them (a user of a server without authentication)."""
    names = [row[0] for row in _roles(coord)]
    owners = {role for _, role, what in privilege_rows(coord.catalog.state) if what == "owner"}
    names += sorted(o for o in owners if o is not None and o not in names)
    return {name: _ROLE_OID_BASE + n for n, name in enumerate(names)}


def pg_roles_rows(coord: Coordinator) -> list[tuple[Any, ...]]:
    """PostgreSQL's pg_roles: the password column is '********' when set."""
    oids = role_oids(coord)
    return [
        (name, superuser, login, "********" if password else None, oids[name])
        for name, login, superuser, password in _roles(coord)
    ]


def mz_privileges_rows(coord: Coordinator) -> list[tuple[Any, ...]]:
    """Materialize's mz_show_all_privileges: one row per role and privilege
    (the owner's row says OWNER)."""
    state = coord.catalog.state
    rows: list[tuple[Any, ...]] = []
    for key, grantee, letters in privilege_rows(state):
        kind, _, name = key.partition(":")
        if kind == "database":
            place: tuple[Any, ...] = (None, None, name, "database")
        elif kind == "schema":
            database, _, schema = name.partition(".")
            place = (database, None, schema, "schema")
        else:
            item = coord.catalog.get(GlobalId.parse(name))
            type_name = _READ_NAMES.get(item.kind, "object")
            place = (item.name.database, item.name.schema, item.name.item, type_name)
        privileges = ["OWNER"] if letters == "owner" else [PRIVILEGE_NAMES[c] for c in letters]
        rows.extend((grantee or "", *place, privilege) for privilege in privileges)
    return rows
