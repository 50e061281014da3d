"""UNIQUE and PRIMARY KEY constraints of CREATE TABLE, as PostgreSQL has them.

Planning (`plan_unique_constraints`) turns the column constraints
(`a int PRIMARY KEY`, `b text UNIQUE`, `CONSTRAINT name UNIQUE`) and table
constraints (`PRIMARY KEY (a, b)`, `UNIQUE (a)`, `CONSTRAINT name UNIQUE (a)`)
into `UniqueConstraint`s named as PostgreSQL names them (`<table>_pkey`,
`<table>_<columns>_key`). PRIMARY KEY makes its columns NOT NULL.

Enforcement (`KeyCounts`, used by `adapter/group_commit.py`): the group
committer keeps, per constrained table, how many rows hold each key value at
the table's upper, and admits a writer's changes only if no key touched ends
up held by two rows; otherwise the writer gets `UniqueViolation` (SQLSTATE
23505) and nothing of its statement is written. As in PostgreSQL, rows with
a NULL in a key column never conflict (unless NULLS NOT DISTINCT).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from coordinator_lib.sql.errors import (
    DuplicateConstraint,
    InvalidTableDefinition,
    UnknownColumn,
    UnsupportedFeature,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.scope import ident_name


@dataclass(frozen=True)
class UniqueConstraint:
    """Rows of the table differ in `columns` (indexes into the table's columns)."""

    name: str
    columns: tuple[int, ...]
    primary: bool = False
    nulls_not_distinct: bool = False

    def key_of(self, row: Sequence[Any]) -> tuple[Any, ...] | None:
        """The row's key value; None when a NULL exempts it from the constraint."""
        key = tuple(row[i] for i in self.columns)
        if not self.nulls_not_distinct and any(v is None for v in key):
            return None
        return key


class UniqueViolation(Exception):
    """A write would give two rows one key value (SQLSTATE 23505)."""

    code = "23505"

    def __init__(self, constraint: str, detail: str) -> None:
        super().__init__(f'duplicate key value violates unique constraint "{constraint}"')
        self.message = str(self)
        self.constraint = constraint
        self.detail = detail


# --- planning ---------------------------------------------------------------------

_CONSTRAINT_KINDS = (exp.PrimaryKeyColumnConstraint, exp.UniqueColumnConstraint)


def is_key_constraint(constraint: exp.Expr) -> bool:
    """A column constraint this module plans (PRIMARY KEY or UNIQUE)."""
    return isinstance(constraint.args.get("kind"), _CONSTRAINT_KINDS)


def is_table_constraint(node: exp.Expr) -> bool:
    """A table constraint in a CREATE TABLE column list that this module plans."""
    if isinstance(node, exp.Constraint):
        return all(
            isinstance(e, exp.PrimaryKey | exp.UniqueColumnConstraint) for e in node.expressions
        )
    return isinstance(node, exp.PrimaryKey | exp.UniqueColumnConstraint)


def _check_unique_options(node: exp.Expr) -> None:
    for arg in ("index_type", "on_conflict", "options"):
        if node.args.get(arg):
            raise UnsupportedFeature(
                f"this form of {'PRIMARY KEY' if isinstance(node, exp.PrimaryKey) else 'UNIQUE'} "
                "is not supported",
                position_of(node),
            )
    include = node.args.get("include")
    if isinstance(include, exp.IndexParameters) and any(
        v for k, v in include.args.items() if k != "with_storage"
    ):
        raise UnsupportedFeature("index parameters are not supported", position_of(node))


def plan_unique_constraints(
    schema: exp.Schema, table: str, names: list[str]
) -> tuple[UniqueConstraint, ...]:
    """The UNIQUE / PRIMARY KEY constraints of a CREATE TABLE's column list
    (`names` are the table's columns, in order)."""
    # (explicit name or None, columns, primary, nulls not distinct, node)
    found: list[tuple[str | None, tuple[int, ...], bool, bool, exp.Expr]] = []

    def column_index(name: str, node: exp.Expr) -> int:
        if name not in names:
            raise UnknownColumn(f'column "{name}" named in key does not exist', position_of(node))
        return names.index(name)

    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            index = names.index(ident_name(item.this))
            for constraint in item.args.get("constraints") or []:
                kind = constraint.args.get("kind")
                if not isinstance(kind, _CONSTRAINT_KINDS):
                    continue
                _check_unique_options(kind)
                given = constraint.args.get("this")
                explicit = ident_name(given) if isinstance(given, exp.Identifier) else None
                primary = isinstance(kind, exp.PrimaryKeyColumnConstraint)
                nulls = bool(kind.args.get("nulls")) and not primary
                found.append((explicit, (index,), primary, nulls, constraint))
            continue
        explicit = None
        parts: list[exp.Expr] = [item]
        if isinstance(item, exp.Constraint):
            explicit = ident_name(item.this)
            parts = list(item.expressions)
        for part in parts:
            _check_unique_options(part)
            if isinstance(part, exp.PrimaryKey):
                idents = list(part.expressions)
                primary, nulls = True, False
            else:
                target = part.this
                if not isinstance(target, exp.Schema):
                    raise UnsupportedFeature("UNIQUE needs a column list", position_of(part))
                idents = list(target.expressions)
                primary, nulls = False, bool(part.args.get("nulls"))
            columns: list[int] = []
            for ident in idents:
                if not isinstance(ident, exp.Identifier):
                    raise UnsupportedFeature(
                        f"key part {ident.sql()} is not supported (only column names)",
                        position_of(ident) or position_of(part),
                    )
                index = column_index(ident_name(ident), ident)
                if index in columns:
                    raise InvalidTableDefinition(
                        f'column "{names[index]}" appears twice in '
                        f"{'primary key' if primary else 'unique'} constraint",
                        position_of(ident),
                    )
                columns.append(index)
            found.append((explicit, tuple(columns), primary, nulls, part))
    primaries = [f for f in found if f[2]]
    if len(primaries) > 1:
        raise InvalidTableDefinition(
            f'multiple primary keys for table "{table}" are not allowed',
            position_of(primaries[1][4]),
        )
    out: list[UniqueConstraint] = []
    taken: set[str] = set()
    for explicit, columns, primary, nulls, node in found:
        if any(c.columns == columns and c.nulls_not_distinct == nulls for c in out):
            continue  # PostgreSQL keeps one index for a repeated key
        if explicit is not None:
            if explicit in taken:
                raise DuplicateConstraint(
                    f'constraint "{explicit}" for relation "{table}" already exists',
                    position_of(node),
                )
            name = explicit
        elif primary:
            name = _unique_name(f"{table}_pkey", taken)
        else:
            joined = "_".join(names[c] for c in columns)
            name = _unique_name(f"{table}_{joined}_key", taken)
        taken.add(name)
        constraint = UniqueConstraint(name, columns, primary, nulls)
        if primary:
            out.insert(0, constraint)
        else:
            out.append(constraint)
    return tuple(out)


def _unique_name(base: str, taken: set[str]) -> str:
    base = base[:63]
    if base not in taken:
        return base
    n = 1
    while f"{base[:60]}{n}" in taken:
        n += 1
    return f"{base[:60]}{n}"


def not_null_columns(constraints: Iterable[UniqueConstraint]) -> set[int]:
    """Columns PRIMARY KEY makes NOT NULL."""
    return {c for constraint in constraints if constraint.primary for c in constraint.columns}


def relation_keys(
    constraints: Iterable[UniqueConstraint], nullable: Sequence[bool]
) -> tuple[tuple[int, ...], ...]:
    """The constraints that make a key of the relation (no row repeats its
    value): those whose columns are all NOT NULL, or NULLS NOT DISTINCT."""
    return tuple(
        c.columns
        for c in constraints
        if c.nulls_not_distinct or not any(nullable[i] for i in c.columns)
    )


# --- enforcement ------------------------------------------------------------------


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


class KeyCounts:
    """How many rows hold each key value, per constraint of one table."""

    def __init__(self, constraints: Sequence[UniqueConstraint], names: Sequence[str]) -> None:
        self.constraints = tuple(constraints)
        self.names = tuple(names)
        self.counts: list[Counter[tuple[Any, ...]]] = [Counter() for _ in self.constraints]

    @staticmethod
    def of_rows(
        constraints: Sequence[UniqueConstraint],
        names: Sequence[str],
        rows: Iterable[tuple[Sequence[Any], int]],
    ) -> KeyCounts:
        counts = KeyCounts(constraints, names)
        counts._apply(rows, counts.counts)
        return counts

    def _apply(
        self, rows: Iterable[tuple[Sequence[Any], int]], into: list[Counter[tuple[Any, ...]]]
    ) -> list[set[tuple[Any, ...]]]:
        touched: list[set[tuple[Any, ...]]] = [set() for _ in self.constraints]
        for row, diff in rows:
            for i, constraint in enumerate(self.constraints):
                key = constraint.key_of(row)
                if key is None:
                    continue
                into[i][key] += diff
                touched[i].add(key)
        return touched

    def check(self, rows: Sequence[tuple[Sequence[Any], int]]) -> list[Counter[tuple[Any, ...]]]:
        """The key changes of a writer's `rows`, if they keep every key
        unique; else UniqueViolation. Nothing changes until `apply`."""
        trial: list[Counter[tuple[Any, ...]]] = [Counter() for _ in self.constraints]
        touched = self._apply(rows, trial)
        for i, constraint in enumerate(self.constraints):
            for key in touched[i]:
                if self.counts[i][key] + trial[i][key] > 1:
                    columns = ", ".join(self.names[c] for c in constraint.columns)
                    values = ", ".join(_show(v) for v in key)
                    raise UniqueViolation(
                        constraint.name, f"Key ({columns})=({values}) already exists."
                    )
        return trial

    def apply(self, trial: list[Counter[tuple[Any, ...]]]) -> None:
        for counts, deltas in zip(self.counts, trial, strict=True):
            for key, delta in deltas.items():
                total = counts[key] + delta
                if total:
                    counts[key] = total
                else:
                    del counts[key]

    def admit(self, rows: Sequence[tuple[Sequence[Any], int]]) -> None:
        """`check` then `apply`."""
        self.apply(self.check(rows))

    def copy(self) -> KeyCounts:
        other = KeyCounts(self.constraints, self.names)
        other.counts = [Counter(c) for c in self.counts]
        return other


__all__ = [
    "KeyCounts",
    "UniqueConstraint",
    "UniqueViolation",
    "is_key_constraint",
    "is_table_constraint",
    "not_null_columns",
    "plan_unique_constraints",
    "relation_keys",
]
