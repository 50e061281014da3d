"""Tidemark's engine: incrementally maintained SQL views with Materialize's
timestamp discipline. Layers, bottom up: repr, persist, storage, (sql,
compute, scheduler), adapter, server. Nothing below imports anything above.
"""
