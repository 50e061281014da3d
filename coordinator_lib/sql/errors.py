"""Errors the SQL layer raises, each with its PostgreSQL SQLSTATE.

Clients see these over pgwire, so they carry what PostgreSQL sends: a code, a
message naming the problem, and where known the 1-based character `position`
into the statement text (PostgreSQL's error position). `str(error)` appends
"(at or near position N)" so a log line is useful on its own.
"""

from __future__ import annotations


def error_text(message: str, position: int | None, detail: str | None, hint: str | None) -> str:
    """An error as one log-friendly text: message, position, DETAIL, HINT."""
    text = message
    if position is not None:
        text += f" (at or near position {position})"
    if detail:
        text += f"\nDETAIL: {detail}"
    if hint:
        text += f"\nHINT: {hint}"
    return text


class SqlError(Exception):
    """Base of every error a statement can fail with while being parsed or planned."""

    code = "XX000"

    def __init__(
        self,
        message: str,
        position: int | None = None,
        *,
        detail: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.detail = detail
        self.hint = hint

    def at(self, position: int | None) -> SqlError:
        """Fill in the position if nobody did yet (errors raised below the binder,
        e.g. by the catalog, do not know where the name was written)."""
        if self.position is None and position is not None:
            self.position = position
        return self

    def __str__(self) -> str:
        return error_text(self.message, self.position, self.detail, self.hint)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, position={self.position!r})"


class ParseError(SqlError):
    """The text is not valid SQL (syntax_error)."""

    code = "42601"


class UnknownObject(SqlError):
    """A catalog item or FROM-clause entry that does not exist (undefined_table)."""

    code = "42P01"


class UnknownSchema(UnknownObject):
    """A schema that does not exist (invalid_schema_name). An UnknownObject too,
    so `IF EXISTS` and callers that catch unknown names treat it alike."""

    code = "3F000"


class UnknownDatabase(UnknownObject):
    """A database that does not exist (invalid_catalog_name)."""

    code = "3D000"


class UnknownType(SqlError):
    """A type name that names no type (undefined_object), as PostgreSQL
    answers `CAST(x AS foo)` and the typed literal `foo 'x'`."""

    code = "42704"


class UndefinedParameter(SqlError):
    """A `$n` with no value bound to it (undefined_parameter)."""

    code = "42P02"


class UnknownColumn(SqlError):
    """A column reference that matches nothing in scope (undefined_column)."""

    code = "42703"


class AmbiguousColumn(SqlError):
    """An unqualified column name that several FROM items provide (ambiguous_column)."""

    code = "42702"


class TypeMismatch(SqlError):
    """Types that do not fit together, e.g. CASE branches or a non-boolean WHERE
    (datatype_mismatch)."""

    code = "42804"


DatatypeMismatch = TypeMismatch


class UndefinedOperator(TypeMismatch):
    """No operator for these operand types, e.g. `text + integer` (undefined_function).
    A TypeMismatch too, since that is what the user got wrong. Worded as
    Materialize words it (`shown`: `interval - date`, `- text`)."""

    code = "42883"

    @classmethod
    def no_overload(
        cls, shown: str, position: int | None, hint: str | None = None
    ) -> UndefinedOperator:
        return cls(
            f"no overload for {shown}: arguments cannot be implicitly cast to any "
            "implementation's parameters; try providing explicit casts",
            position,
            hint=hint,
        )


class CannotCoerce(TypeMismatch):
    """An explicit cast PostgreSQL has no conversion for (cannot_coerce)."""

    code = "42846"


class IndeterminateDatatype(SqlError):
    """A value whose type nothing determines, e.g. `ARRAY[]` (indeterminate_datatype)."""

    code = "42P18"


class UndefinedFunction(SqlError):
    """A function name (with these argument types) that does not exist."""

    code = "42883"


class AmbiguousFunction(SqlError):
    """More than one overload fits an untyped argument (ambiguous_function)."""

    code = "42725"


class GroupingError(SqlError):
    """Ungrouped column outside an aggregate, or a misplaced/nested aggregate."""

    code = "42803"


class UnsupportedFeature(SqlError):
    """Valid SQL that Tidemark does not plan (yet) (feature_not_supported)."""

    code = "0A000"


class DuplicateObject(SqlError):
    """CREATE of a name that is taken (duplicate_table)."""

    code = "42P07"


class DuplicateSchema(DuplicateObject):
    """CREATE SCHEMA of a schema that exists (duplicate_schema)."""

    code = "42P06"


class DuplicateDatabase(DuplicateObject):
    """CREATE DATABASE of a database that exists (duplicate_database)."""

    code = "42P04"


class DuplicateColumn(SqlError):
    """A column name given twice where names must be unique (duplicate_column)."""

    code = "42701"


class DuplicateAlias(SqlError):
    """Two FROM items with the same name (duplicate_alias)."""

    code = "42712"


class DependentObjects(SqlError):
    """DROP without CASCADE of an object others depend on
    (dependent_objects_still_exist). Raised by the catalog, which knows the
    dependencies."""

    code = "2BP01"


class WrongObjectType(SqlError):
    """An object of another kind than the statement needs, e.g. DROP VIEW on a
    table (wrong_object_type)."""

    code = "42809"


class InvalidParameter(SqlError):
    """An option or parameter value that is not allowed (invalid_parameter_value)."""

    code = "22023"


class InvalidColumnReference(SqlError):
    """ORDER BY position out of range and similar (invalid_column_reference)."""

    code = "42P10"


class InvalidTextRepresentation(SqlError):
    """A string literal that does not parse as the type it is used as."""

    code = "22P02"


class InvalidDatetimeFormat(SqlError):
    """A date/time literal that does not parse."""

    code = "22007"


class IntervalFieldOverflowError(SqlError):
    """An interval field past its range ('1-13' YEAR TO MONTH)."""

    code = "22015"


class DatetimeFieldOverflow(SqlError):
    """A well-formed date/time literal naming no such date or time."""

    code = "22008"


class InvalidTimeZoneDisplacement(SqlError):
    """A time zone offset beyond PostgreSQL's 15:59:59."""

    code = "22009"


class NumericValueOutOfRange(SqlError):
    """A literal that does not fit its type."""

    code = "22003"


class StringDataRightTruncation(SqlError):
    """A value longer than its column's varchar(n) / char(n) (sql/typmod.py)."""

    code = "22001"


class CharacterNotInRepertoire(SqlError):
    """Bytes that are not UTF-8, or a NUL, where text is expected."""

    code = "22021"


class InvalidEscapeSequence(SqlError):
    """A malformed escape in an `E'...'` constant (`\\u12`)."""

    code = "22025"


class StackDepthExceeded(SqlError):
    """A statement nested deeper than the parser and planner can follow."""

    code = "54001"


class NotNullViolation(SqlError):
    """A NULL that is known at plan time to go into a NOT NULL column."""

    code = "23502"


class InvalidTableDefinition(SqlError):
    """A CREATE TABLE whose constraints contradict themselves (two primary keys)."""

    code = "42P16"


class DuplicateConstraint(SqlError):
    """Two constraints of one table with the same name."""

    code = "42710"


class ReservedName(SqlError):
    """A column name persist reserves for itself (`__time`, `__diff`)."""

    code = "42939"


__all__ = [
    "AmbiguousColumn",
    "CannotCoerce",
    "CharacterNotInRepertoire",
    "DatatypeMismatch",
    "DatetimeFieldOverflow",
    "DependentObjects",
    "DuplicateAlias",
    "DuplicateColumn",
    "DuplicateConstraint",
    "DuplicateDatabase",
    "DuplicateObject",
    "DuplicateSchema",
    "GroupingError",
    "IntervalFieldOverflowError",
    "InvalidColumnReference",
    "InvalidDatetimeFormat",
    "InvalidEscapeSequence",
    "InvalidParameter",
    "InvalidTableDefinition",
    "InvalidTextRepresentation",
    "NotNullViolation",
    "NumericValueOutOfRange",
    "ParseError",
    "ReservedName",
    "SqlError",
    "StackDepthExceeded",
    "StringDataRightTruncation",
    "TypeMismatch",
    "UndefinedFunction",
    "UndefinedOperator",
    "UndefinedParameter",
    "UnknownColumn",
    "UnknownDatabase",
    "UnknownObject",
    "UnknownSchema",
    "UnsupportedFeature",
    "WrongObjectType",
]
