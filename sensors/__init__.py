"""Dagster sensors: timestamp assignment, compaction and upstream progress.

Added in later issues; sensors must not start Spark (ticks time out at 60 s).
"""

__all__: list[str] = []
