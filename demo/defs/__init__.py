"""The demo's Dagster components (one folder each, a defs.yaml apiece)."""
