"""Errors raised by plain values (before any I/O happens)."""

from __future__ import annotations


class InvalidRow(ValueError):
    """A row does not match its RelationDesc: wrong arity, type, a NULL in a
    non-nullable column, or a value its column's storage type cannot hold.
    Raised before anything is written. `sqlstate` is PostgreSQL's code for
    the problem (22000 data exception unless a narrower one applies), so a
    front door can report it; `message` and `detail` are what it shows."""

    def __init__(self, message: str, *, sqlstate: str = "22000", detail: str | None = None) -> None:
        super().__init__(message if detail is None else f"{message}: {detail}")
        self.message = message
        self.sqlstate = sqlstate
        self.detail = detail
