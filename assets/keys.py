"""Asset keys and groups of catalog objects: key = database / schema / name,
one group per schema."""

from __future__ import annotations

import re

import dagster as dg

from coordinator_lib.adapter.operations.describe import CatalogObject
from coordinator_lib.sql.catalog import DEFAULT_DATABASE

__all__ = ["asset_key", "group_name", "safe_name"]


def asset_key(obj: CatalogObject) -> dg.AssetKey:
    return dg.AssetKey([obj.database, obj.schema, obj.name])


def safe_name(text: str) -> str:
    """A Dagster name (letters, digits, underscores) for any identifier."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def group_name(obj: CatalogObject) -> str:
    """The schema (prefixed with its database outside the default one)."""
    if obj.database == DEFAULT_DATABASE:
        return safe_name(obj.schema)
    return safe_name(f"{obj.database}_{obj.schema}")
