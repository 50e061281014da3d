"""The Dagster code location (`dagster dev -f definitions.py`).

A thin shell over coordinator_lib: assets come from the catalog in a later
issue; for now it only wires the coordinator resource.
"""

from __future__ import annotations

import dagster as dg

from resources import CoordinatorResource

defs = dg.Definitions(
    assets=[],
    resources={"coordinator": CoordinatorResource()},
)
