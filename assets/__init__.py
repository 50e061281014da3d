"""Dagster assets: one per source, table, index, materialized view and sink
(assets/external.py: PostgreSQL subsources are observed, sinks record their
Iceberg table), built
from the catalog and the project's SQL files (assets/project.py), with their
asset checks."""

from __future__ import annotations

import dagster as dg

from assets.checks import build_checks
from assets.factory import (
    ON_VIEW_PARENTS,
    TARGETS_TAG,
    VIEWS,
    build_asset,
    current_id,
    is_on_commit_view,
    planned_upper,
    reads_a_view,
    reads_storage,
)
from assets.keys import asset_key, group_name
from assets.project import Project, load_project
from coordinator_lib.sql.catalog import ItemKind

__all__ = [
    "ON_VIEW_PARENTS",
    "TARGETS_TAG",
    "VIEWS",
    "Project",
    "asset_key",
    "build_asset",
    "build_assets",
    "build_checks",
    "current_id",
    "group_name",
    "is_on_commit_view",
    "load_project",
    "planned_upper",
    "reads_a_view",
    "reads_storage",
]


def build_assets(
    project: Project,
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every object's asset, and the checks of every asset but a sink's (its
    state is the Iceberg table, which its materialization records)."""
    assets = [build_asset(obj, project) for obj in project.objects]
    checks = [
        check
        for obj in project.objects
        if obj.kind is not ItemKind.SINK
        for check in build_checks(obj, project)
    ]
    return assets, checks
