"""Roles and privileges as the durable catalog record keeps them.

The record holds the roles (`roles`: name -> login, superuser, SCRAM-SHA-256
verifier) and one acl per object (`acl`: `item:<id>`, `schema:<db>.<schema>`
or `database:<db>` -> owner and granted privileges per role, PostgreSQL's acl
letters: r SELECT, a INSERT, w UPDATE, d DELETE, U USAGE, C CREATE). These
functions read that layout; the typed catalog operations
(`adapter/catalog_ops.py`) are the only ones that change it. The role that
creates an object owns it: every catalog transaction stamps owners on the
objects it adds and drops the acls of objects it removes (`stamp_owners`).
"""

from __future__ import annotations

import contextvars

from coordinator_lib.adapter.durable import Record
from coordinator_lib.sql.catalog import DEFAULT_DATABASE, DEFAULT_SCHEMA
from coordinator_lib.sql.plan_role import PUBLIC

ROLES_KEY = "roles"
ACL_KEY = "acl"
# Like Materialize, PUBLIC has USAGE on the `materialize` database and its `public` schema.
DEFAULT_GRANTS: dict[str, dict[str, str]] = {
    f"database:{DEFAULT_DATABASE}": {PUBLIC: "U"},
    f"schema:{DEFAULT_DATABASE}.{DEFAULT_SCHEMA}": {PUBLIC: "U"},
}
# The role a catalog change is made for: it becomes the new objects' owner.
current_role: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_role", default=None
)


def catalog_roles(state: Record) -> dict[str, Record]:
    return state.get(ROLES_KEY, {})


def object_keys(state: Record) -> set[str]:
    keys = {f"database:{d}" for d in state["databases"]}
    keys |= {f"schema:{d}.{s}" for d, s in state["schemas"]}
    keys |= {f"item:{i}" for raw in state["items"] for i in raw["ids"]}
    return keys


def stamp_owners(before: set[str], state: Record) -> None:
    """Give the objects `state` adds (since `before`) their owner, the
    current role, and forget the acls of objects it no longer has."""
    acl = state.setdefault(ACL_KEY, {})
    now = object_keys(state)
    for key in now - before:
        acl[key] = {"owner": current_role.get(), "grants": {}}
    for key in set(acl) - now:
        del acl[key]


def acl_of(state: Record, key: str) -> tuple[str | None, dict[str, str]]:
    """(owner, grants per role) of one object; the defaults if it has no entry."""
    entry = state.get(ACL_KEY, {}).get(key)
    if entry is None:
        return None, DEFAULT_GRANTS.get(key, {})
    return entry["owner"], entry["grants"]


def owner_of(state: Record, key: str) -> str | None:
    return acl_of(state, key)[0]


def has_privilege(state: Record, role: str, key: str, letter: str) -> bool:
    owner, grants = acl_of(state, key)
    return owner == role or letter in grants.get(role, "") or letter in grants.get(PUBLIC, "")


def owned_by(state: Record, role: str) -> list[str]:
    return sorted(k for k, v in state.get(ACL_KEY, {}).items() if v["owner"] == role)


def privilege_rows(state: Record) -> list[tuple[str, str | None, str]]:
    """(object key, grantee or None for the owner, acl letters) per grant."""
    rows: list[tuple[str, str | None, str]] = []
    for key in sorted(object_keys(state)):
        owner, grants = acl_of(state, key)
        if owner is not None:
            rows.append((key, owner, "owner"))
        rows.extend((key, role, letters) for role, letters in sorted(grants.items()) if letters)
    return rows
