"""Dagster assets: one per source, table, index and materialized view.

They are built from the catalog and the project's SQL files in a later issue;
none exist yet.
"""

__all__: list[str] = []
