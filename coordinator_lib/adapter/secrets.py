"""Secrets: CREATE SECRET / ALTER SECRET, and reading a secret's value.

A secret is a catalog item (kind `secret`, no columns) whose value is kept
beside its catalog entry in the durable catalog record (key `secret`), so
creating, altering and dropping it are one compare-and-set with the rest of
the catalog, in every process. The value is encrypted with the secrets key
(AES-256-GCM, `adapter/secrets_key.py`; the key lives outside the data
directory), so the consensus database and its WAL hold only ciphertext,
also of values since altered or dropped. It is never printed: the entry's
`create_sql` says `AS '********'`, statement logs print the same, and
errors about a value never quote it. Materialize keeps secrets in a
separate secrets controller (Kubernetes secrets or a local directory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.catalog import CATALOG_KEY, Catalog, SessionCatalog
from coordinator_lib.adapter.catalog_ops import (
    SECRET_KEY,
    CreateSecret,
    ReencryptSecrets,
    UpdateSecret,
    catalog_transact,
    transact_offline,
)
from coordinator_lib.adapter.durable import read_record
from coordinator_lib.adapter.errors import AdapterError, AdapterNotice
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.adapter.responses import ExecuteResponse
from coordinator_lib.adapter.responses import ExecuteResponseKind as Kind
from coordinator_lib.adapter.secrets_key import (
    SecretsKeyError,
    configured_key,
    require_key,
    unseal,
)
from coordinator_lib.adapter.session import Session
from coordinator_lib.compute.local_scalar import EvalError, eval_scalar
from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.persist.consensus import Consensus
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.plan_webhook import AlterSecretPlan, CreateSecretPlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator


def secret_values(coord: Coordinator, ids: set[GlobalId]) -> dict[GlobalId, bytes]:
    """The current values of the secrets `ids` (as this process's catalog has them)."""
    return stored_secret_values(coord.catalog, configured_key(coord.config), ids)


def stored_secret_values(
    catalog: Catalog, key: bytes | None, ids: set[GlobalId]
) -> dict[GlobalId, bytes]:
    """The values of the secrets `ids` in the durable `catalog`, unsealed with
    `key` (a worker has no coordinator)."""
    _, state = catalog.snapshot()
    values: dict[GlobalId, bytes] = {}
    for raw in state["items"]:
        for id in ids:
            if str(id) in raw["ids"] and SECRET_KEY in raw:
                values[id] = unseal(key, str(id), raw[SECRET_KEY])
    missing = ids - set(values)
    if missing:
        raise AdapterError(f"unknown secret {sorted(missing)[0]}", code="42704")
    return values


def _value(expr: ScalarExpr) -> bytes:
    try:
        value = eval_scalar(expr, (), ())
    except EvalError:
        raise AdapterError("invalid secret value", code="22023") from None
    if not isinstance(value, bytes):
        raise AdapterError("a secret's value must not be NULL", code="22004")
    return value


def create_secret(
    coord: Coordinator,
    session: Session,
    plan: CreateSecretPlan,
    catalog: SessionCatalog,
    check: Any,
) -> ExecuteResponse:
    if plan.if_not_exists and coord.catalog.index.lookup(plan.name) is not None:
        notice = AdapterNotice(f"catalog item '{plan.name}' already exists, skipping", "42P07")
        return ExecuteResponse(Kind.CREATED_SECRET, "CREATE SECRET", notices=[notice])
    value = _value(plan.value)
    key = require_key(coord.config)
    catalog_transact(coord, session, [CreateSecret(plan.create_sql, key, value, wall_clock_ms())])
    return ExecuteResponse(Kind.CREATED_SECRET, "CREATE SECRET")


def alter_secret(
    coord: Coordinator, session: Session, plan: AlterSecretPlan, catalog: SessionCatalog, check: Any
) -> ExecuteResponse:
    if plan.id is None:
        notice = AdapterNotice(f'secret "{plan.name}" does not exist, skipping', "00000")
        return ExecuteResponse(Kind.ALTERED, "ALTER SECRET", notices=[notice])
    value = _value(plan.value)
    key = require_key(coord.config)
    catalog_transact(coord, session, [UpdateSecret(plan.id, key, value)])
    return ExecuteResponse(Kind.ALTERED, "ALTER SECRET")


def rotate_secrets_key(consensus: Consensus, old_key: bytes | None, new_key: bytes) -> int:
    """Re-encrypt every secret under `new_key` (values stored before
    encryption too) in one compare-and-set of the catalog record (retried if
    another process changed it meanwhile); returns how many."""
    if read_record(consensus, CATALOG_KEY)[1] is None:
        raise SecretsKeyError("no catalog here: is this the right data directory?")
    stored = transact_offline(consensus, [ReencryptSecrets(old_key, new_key)])
    return sum(1 for raw in stored["items"] if SECRET_KEY in raw)


HANDLERS = {CreateSecretPlan: create_secret, AlterSecretPlan: alter_secret}

__all__ = [
    "HANDLERS",
    "SECRET_KEY",
    "alter_secret",
    "create_secret",
    "rotate_secrets_key",
    "secret_values",
    "stored_secret_values",
]
