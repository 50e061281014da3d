"""Errors raised by plain values (before any I/O happens)."""


class InvalidRow(ValueError):
    """A row does not match its RelationDesc: wrong arity, type or a NULL in
    a non-nullable column. Raised before anything is written."""
