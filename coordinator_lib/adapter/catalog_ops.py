"""Typed catalog operations: every change of the durable catalog record.

DDL never edits the record itself. A statement becomes a list of these
operations, and `catalog_transact` applies the whole list to a copy of the
record and stores it with one compare-and-set (Materialize's
`catalog_transact`), then reconciles the runtime state once. A statement
with several effects (DROP CLUSTER ... CASCADE drops the items on the
cluster, then the cluster; CREATE OR REPLACE drops the old item and adds the
new) therefore lands whole or not at all, in every process.

Each operation's `apply` edits the record (a JSON dict) and does no I/O and
reads no clock, so an operation built once applies again to a newer record.
One that cannot apply (a name taken meanwhile, a subsource dropped without
its source) raises, and nothing is stored. The record's layout:
`adapter/catalog.py` (items, databases, schemas, clusters) and
`adapter/acl.py` (roles, acls).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from coordinator_lib.adapter.acl import (
    ACL_KEY,
    ROLES_KEY,
    acl_of,
    catalog_roles,
    object_keys,
    stamp_owners,
)
from coordinator_lib.adapter.catalog import CATALOG_KEY, CatalogEntry
from coordinator_lib.adapter.durable import Record, update_record
from coordinator_lib.adapter.errors import AdapterError, InvalidTransactionState
from coordinator_lib.adapter.secrets_key import seal, unseal
from coordinator_lib.persist.consensus import Consensus
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.catalog import QualifiedName
from coordinator_lib.sql.create_sql import rename_in_create_sql

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session

SECRET_KEY = "secret"  # a secret's sealed value, beside its entry's ids and create_sql


class CatalogConflict(Exception):
    """Another process changed the catalog between planning and commit."""


class CatalogOp(Protocol):
    def apply(self, state: Record) -> None:
        """Change `state` (the whole catalog record) in place."""


def apply_ops(state: Record, ops: Iterable[CatalogOp]) -> Record:
    """The record after `ops`, in order, with owners stamped on what they
    added (the current role's, `acl.current_role`); `state` is not changed."""
    new = copy.deepcopy(state)
    before = object_keys(new)
    for op in ops:
        op.apply(new)
    stamp_owners(before, new)
    return new


def catalog_transact(coord: Coordinator, session: Session, ops: Sequence[CatalogOp]) -> None:
    """The one way DDL changes the catalog: `ops` in one compare-and-set
    (`Catalog.transact`; a lost race raises CatalogConflict and the statement
    is planned again), then the runtime state follows (`reconcile`)."""
    ddl_allowed(session)
    if not ops:
        return
    seqno, state = coord.catalog.snapshot()
    if not coord.catalog.commit(seqno, apply_ops(state, ops)):
        raise CatalogConflict()
    coord.reconcile()


def transact_offline(consensus: Consensus, ops: Sequence[CatalogOp]) -> Record:
    """`ops` in one compare-and-set of the record with no coordinator running
    (`tidemark rotate-secrets-key`), retried on a lost race (the operations
    are applied again to the newer record). Returns the stored record."""

    def change(state: Record | None) -> Record:
        if state is None:
            raise AdapterError("no catalog here: is this the right data directory?")
        return apply_ops(state, ops)

    return update_record(consensus, CATALOG_KEY, change)[1]


def ddl_allowed(session: Session) -> None:
    """DDL inside BEGIN runs (and stays, whatever the transaction's end) only
    before the transaction has written: SQLAlchemy and pandas' `to_sql` send
    BEGIN, a catalog lookup, CREATE TABLE, then the INSERTs."""
    transaction = session.transaction
    if transaction is not None and any(transaction.writes.values()):
        raise InvalidTransactionState(
            "DDL cannot run inside a transaction block after it has written", code="25001"
        )


def _holding(state: Record, id: GlobalId) -> Record:
    for raw in state["items"]:
        if str(id) in raw["ids"]:
            return raw
    raise AdapterError(f"unknown catalog item {id}", code="42704")


# -------------------------------------------------------------------- items
@dataclass(frozen=True)
class CreateItem:
    """Store a CREATE statement; its `id_count` ids (a source's subsources
    take the ones after its own) come from the record's counter."""

    create_sql: str
    id_count: int = 1
    retain_history_ms: int | None = None
    created_at: int | None = None

    def apply(self, state: Record) -> None:
        self.add(state)

    def add(self, state: Record) -> Record:
        first = state["next_id"]
        state["next_id"] = first + self.id_count
        ids = tuple(GlobalId.user(first + i) for i in range(self.id_count))
        raw = CatalogEntry(ids, self.create_sql, self.retain_history_ms, self.created_at).to_json()
        state["items"].append(raw)
        return raw


@dataclass(frozen=True)
class CreateSecret:
    """A secret item with its value sealed under `key` (bound to its id)."""

    create_sql: str
    key: bytes
    value: bytes
    created_at: int | None = None

    def apply(self, state: Record) -> None:
        raw = CreateItem(self.create_sql, created_at=self.created_at).add(state)
        raw[SECRET_KEY] = seal(self.key, raw["ids"][0], self.value)


@dataclass(frozen=True)
class UpdateSecret:
    id: GlobalId
    key: bytes
    value: bytes

    def apply(self, state: Record) -> None:
        _holding(state, self.id)[SECRET_KEY] = seal(self.key, str(self.id), self.value)


@dataclass(frozen=True)
class ReencryptSecrets:
    """Every secret's value sealed again under `new_key` (`old_key` None:
    values stored before encryption)."""

    old_key: bytes | None
    new_key: bytes

    def apply(self, state: Record) -> None:
        for raw in state["items"]:
            if SECRET_KEY in raw:
                id = raw["ids"][0]
                raw[SECRET_KEY] = seal(self.new_key, id, unseal(self.old_key, id, raw[SECRET_KEY]))


@dataclass(frozen=True)
class DropItems:
    """Remove the entries of `ids` (a source's entry with its subsources);
    a subsource alone cannot go."""

    ids: frozenset[GlobalId]

    def apply(self, state: Record) -> None:
        names = {str(i) for i in self.ids}
        kept = []
        for raw in state["items"]:
            hit = names & set(raw["ids"])
            if hit and raw["ids"][0] not in names:
                raise AdapterError(
                    f"cannot drop subsource {sorted(hit)[0]}: drop its source instead",
                    code="2BP01",
                )
            if not hit:
                kept.append(raw)
        state["items"] = kept


@dataclass(frozen=True)
class RenameItem:
    """Rename an item in every create_sql that names it (its own too)."""

    old: QualifiedName
    new: QualifiedName

    def apply(self, state: Record) -> None:
        for raw in state["items"]:
            raw["create_sql"] = rename_in_create_sql(raw["create_sql"], self.old, self.new)


@dataclass(frozen=True)
class AlterRetainHistory:
    id: GlobalId
    retain_history_ms: int | None

    def apply(self, state: Record) -> None:
        _holding(state, self.id)["retain_history_ms"] = self.retain_history_ms


# ------------------------------------------------------ databases, schemas
@dataclass(frozen=True)
class CreateDatabase:
    """A database with its `public` schema."""

    name: str

    def apply(self, state: Record) -> None:
        if self.name in state["databases"]:
            raise AdapterError(f"database '{self.name}' already exists", code="42P04")
        state["databases"].append(self.name)
        state["schemas"].append([self.name, "public"])


@dataclass(frozen=True)
class DropDatabase:
    """A database and its schemas (their items go first, by DropItems)."""

    name: str

    def apply(self, state: Record) -> None:
        if self.name not in state["databases"]:
            raise AdapterError(f"unknown database '{self.name}'", code="3D000")
        state["databases"].remove(self.name)
        state["schemas"] = [s for s in state["schemas"] if s[0] != self.name]


@dataclass(frozen=True)
class CreateSchema:
    database: str
    name: str

    def apply(self, state: Record) -> None:
        if [self.database, self.name] in state["schemas"]:
            raise AdapterError(f"schema '{self.name}' already exists", code="42P06")
        state["schemas"].append([self.database, self.name])


@dataclass(frozen=True)
class DropSchema:
    database: str
    name: str

    def apply(self, state: Record) -> None:
        if [self.database, self.name] not in state["schemas"]:
            raise AdapterError(f"unknown schema '{self.database}.{self.name}'", code="3F000")
        state["schemas"].remove([self.database, self.name])


# ----------------------------------------------------------------- clusters
@dataclass(frozen=True)
class CreateCluster:
    name: str
    replication_factor: int
    size: str | None = None

    def apply(self, state: Record) -> None:
        if self.name in state["clusters"]:
            raise AdapterError(f"cluster '{self.name}' already exists", code="42710")
        spec: Record = {"replication_factor": self.replication_factor}
        if self.size is not None:
            spec["size"] = self.size
        state["clusters"][self.name] = spec


@dataclass(frozen=True)
class DropCluster:
    """A cluster (what runs on it goes first, by DropItems in the same list)."""

    name: str

    def apply(self, state: Record) -> None:
        state["clusters"].pop(self.name, None)


# -------------------------------------------------------- roles and grants
@dataclass(frozen=True)
class CreateRole:
    """A role; `attributes` are its stored fields (login, superuser and a
    SCRAM verifier, made before the operation: applying it draws no salt)."""

    name: str
    attributes: tuple[tuple[str, Any], ...]

    def apply(self, state: Record) -> None:
        roles = state.setdefault(ROLES_KEY, {})
        if self.name in roles:
            raise AdapterError(f'role "{self.name}" already exists', code="42710")
        roles[self.name] = {"login": False, "superuser": False, "password": None}
        roles[self.name].update(self.attributes)


@dataclass(frozen=True)
class AlterRole:
    name: str
    attributes: tuple[tuple[str, Any], ...]

    def apply(self, state: Record) -> None:
        role = catalog_roles(state).get(self.name)
        if role is None:
            raise AdapterError(f'role "{self.name}" does not exist', code="42704")
        role.update(self.attributes)


@dataclass(frozen=True)
class DropRole:
    """A role, and every privilege granted to it."""

    name: str

    def apply(self, state: Record) -> None:
        catalog_roles(state).pop(self.name, None)
        for entry in state.get(ACL_KEY, {}).values():
            entry["grants"].pop(self.name, None)


@dataclass(frozen=True)
class Grant:
    """GRANT (or, with `revoke`, REVOKE) `privileges` (acl letters) on the
    objects `keys` (acl keys) to `roles`."""

    keys: tuple[str, ...]
    roles: tuple[str, ...]
    privileges: str
    revoke: bool = False

    def apply(self, state: Record) -> None:
        acl = state.setdefault(ACL_KEY, {})
        for key in self.keys:
            if key not in acl:
                owner, grants = acl_of(state, key)
                acl[key] = {"owner": owner, "grants": dict(grants)}
            grants = acl[key]["grants"]
            for role in self.roles:
                have = set(grants.get(role, ""))
                change = set(self.privileges)
                have = have - change if self.revoke else have | change
                grants[role] = "".join(sorted(have))
                if not grants[role]:
                    del grants[role]


__all__ = [
    "SECRET_KEY",
    "AlterRetainHistory",
    "AlterRole",
    "CatalogConflict",
    "CatalogOp",
    "CreateCluster",
    "CreateDatabase",
    "CreateItem",
    "CreateRole",
    "CreateSchema",
    "CreateSecret",
    "DropCluster",
    "DropDatabase",
    "DropItems",
    "DropRole",
    "DropSchema",
    "Grant",
    "ReencryptSecrets",
    "RenameItem",
    "UpdateSecret",
    "apply_ops",
    "catalog_transact",
    "ddl_allowed",
    "transact_offline",
]
