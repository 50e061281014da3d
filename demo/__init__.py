"""The demo Tidemark project: its SQL (sql/) and its dg definitions (defs/)."""
