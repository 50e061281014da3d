"""Roles: who may connect, and CREATE / ALTER / DROP ROLE.

Roles live in the durable catalog record (`roles`: name -> login, superuser,
SCRAM-SHA-256 verifier), so every process sees the same ones. The users in
`Config.users` are superusers configured outside the catalog (the
environment's bootstrap accounts; their passwords never reach consensus).

Authentication (`Authenticator`): once any user has a password (a
`Config.users` entry or a role created WITH PASSWORD) every connection must
authenticate with one (SCRAM-SHA-256 over pgwire, HTTP basic over HTTP);
unknown users and roles without a password or LOGIN fail as a wrong password
does (28P01). Until then connections on loopback are trusted (PostgreSQL's
`trust` method): any user name connects and, unless it names a role, acts as
a superuser. Connections from elsewhere always need a password.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.acl import catalog_roles, owned_by
from coordinator_lib.adapter.catalog_ops import AlterRole, CreateRole, DropRole, catalog_transact
from coordinator_lib.adapter.durable import Record
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.scram import make_verifier, verify_password
from coordinator_lib.adapter.session import Session
from coordinator_lib.sql.plan_role import (
    AlterRolePlan,
    CreateRolePlan,
    DropRolePlan,
    RoleAttributes,
)

if TYPE_CHECKING:
    from coordinator_lib.adapter.catalog import SessionCatalog
    from coordinator_lib.adapter.coordinator import Coordinator


class InsufficientPrivilege(AdapterError):
    """PostgreSQL's insufficient_privilege (42501)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="42501")


class Authenticator:
    """Answers who may connect, from `Config.users` and the catalog's roles."""

    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self._lock = threading.Lock()
        self._configured: dict[str, str] = {}  # Config.users' verifiers, made once

    def _state(self) -> Record:
        self.coord.refresh_catalog()
        return self.coord.catalog.state

    def enabled(self, state: Record | None = None) -> bool:
        """Whether every connection must give a password (in `state`, else
        in the newest catalog)."""
        if self.coord.config.users:
            return True
        roles = catalog_roles(self._state() if state is None else state)
        return any(role.get("password") for role in roles.values())

    def password_required(self, user: str, loopback: bool) -> bool:
        return not loopback or self.enabled()

    def verifier(self, user: str) -> str | None:
        """The SCRAM verifier `user` logs in with; None: may not log in."""
        users = self.coord.config.users
        if user in users:
            with self._lock:
                if user not in self._configured:
                    self._configured[user] = make_verifier(users[user])
                return self._configured[user]
        role = catalog_roles(self._state()).get(user)
        if role is None or not role.get("login"):
            return None
        return role.get("password")

    def check_password(self, user: str, password: str | None) -> bool:
        verifier = self.verifier(user)
        return verifier is not None and password is not None and verify_password(verifier, password)

    def is_superuser(self, session: Session, state: Record) -> bool:
        """A session acts as a superuser if it is internal, its user is a
        configured one or a SUPERUSER role, or it names no role while
        connections are trusted."""
        if session.internal or session.user in self.coord.config.users:
            return True
        role = catalog_roles(state).get(session.user)
        if role is not None:
            return bool(role.get("superuser"))
        return not self.enabled(state)


def _require_superuser(coord: Coordinator, session: Session, what: str) -> None:
    if not coord.authenticator.is_superuser(session, coord.catalog.state):
        raise InsufficientPrivilege(f"permission denied to {what}")


def _stored(attributes: RoleAttributes) -> tuple[tuple[str, Any], ...]:
    """The role fields the statement sets, as the catalog stores them (a
    password as its SCRAM verifier; PASSWORD NULL removes it)."""
    fields: list[tuple[str, Any]] = []
    if attributes.login is not None:
        fields.append(("login", attributes.login))
    if attributes.superuser is not None:
        fields.append(("superuser", attributes.superuser))
    if attributes.password is not None:
        verifier = make_verifier(attributes.password) if attributes.password else None
        fields.append(("password", verifier))
    return tuple(fields)


def create_role(
    coord: Coordinator, session: Session, plan: CreateRolePlan, catalog: SessionCatalog, check: Any
) -> ExecuteResponse:
    _require_superuser(coord, session, "create role")
    if plan.name in coord.config.users or plan.name in catalog_roles(coord.catalog.state):
        if plan.if_not_exists:
            notice = AdapterNotice(f'role "{plan.name}" already exists, skipping', "42710")
            return ExecuteResponse(Kind.CREATED_ROLE, "CREATE ROLE", notices=[notice])
        raise AdapterError(f'role "{plan.name}" already exists', code="42710")
    catalog_transact(coord, session, [CreateRole(plan.name, _stored(plan.attributes))])
    return ExecuteResponse(Kind.CREATED_ROLE, "CREATE ROLE")


def alter_role(
    coord: Coordinator, session: Session, plan: AlterRolePlan, catalog: SessionCatalog, check: Any
) -> ExecuteResponse:
    only_own_password = (
        plan.name == session.user
        and plan.attributes.login is None
        and plan.attributes.superuser is None
    )
    if not only_own_password:  # PostgreSQL: anyone may change their own password
        _require_superuser(coord, session, "alter role")
    if plan.name not in catalog_roles(coord.catalog.state):
        raise AdapterError(f'role "{plan.name}" does not exist', code="42704")
    catalog_transact(coord, session, [AlterRole(plan.name, _stored(plan.attributes))])
    return ExecuteResponse(Kind.ALTERED, "ALTER ROLE")


def drop_role(
    coord: Coordinator, session: Session, plan: DropRolePlan, catalog: SessionCatalog, check: Any
) -> ExecuteResponse:
    _require_superuser(coord, session, "drop role")
    roles = catalog_roles(coord.catalog.state)
    notices = []
    doomed = []
    for name in plan.names:
        if name not in roles:
            if not plan.if_exists:
                raise AdapterError(f'role "{name}" does not exist', code="42704")
            notices.append(AdapterNotice(f'role "{name}" does not exist, skipping', "00000"))
            continue
        if name == session.user:
            raise AdapterError("current role cannot be dropped", code="55006")
        owned = owned_by(coord.catalog.state, name)
        if owned:
            raise AdapterError(
                f'role "{name}" cannot be dropped because some objects depend on it',
                code="2BP01",
                detail=f"owner of {owned[0].replace(':', ' ', 1)}",
            )
        doomed.append(name)
    if doomed:
        catalog_transact(coord, session, [DropRole(name) for name in doomed])
    return ExecuteResponse(Kind.DROPPED, "DROP ROLE", notices=notices)


HANDLERS = {CreateRolePlan: create_role, AlterRolePlan: alter_role, DropRolePlan: drop_role}
