"""Name resolution: which column of the FROM clause a column reference means.

A Scope lists the FROM items of one SELECT in order, each with the name it
can be qualified by and its columns; their columns are concatenated (that is
the row a Join produces). Rules follow PostgreSQL: an unqualified name must
match exactly one column; a qualified one is looked up in the item with that
alias (or, unaliased, that table name); columns merged by `JOIN ... USING`
answer to their unqualified name without ambiguity. In a subquery, a name
no FROM item of its own has resolves in the enclosing query (`outer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from coordinator_lib.repr.relation import ColumnType
from coordinator_lib.sql.catalog import QualifiedName
from coordinator_lib.sql.errors import (
    AmbiguousColumn,
    DuplicateAlias,
    UnknownColumn,
    UnknownObject,
)
from coordinator_lib.sql.positions import position_of
from coordinator_lib.sql.row_comparison import no_record_values

if TYPE_CHECKING:
    from coordinator_lib.sql.context import PlanContext
    from coordinator_lib.sql.scalar import ScalarBinder


def ident_name(ident: exp.Expr | str | None) -> str:
    """An identifier as PostgreSQL folds it: unquoted names to lower case."""
    if ident is None:
        return ""
    if isinstance(ident, str):
        return ident.lower()
    if isinstance(ident, exp.Identifier):
        return ident.this if ident.quoted else ident.this.lower()
    return ident.name.lower()


def table_parts(table: exp.Table) -> tuple[str, ...]:
    """The 1-3 name parts of a table reference, folded."""
    parts = [table.args.get("catalog"), table.args.get("db"), table.this]
    return tuple(ident_name(p) for p in parts if p is not None and ident_name(p) != "")


# Prefix of the hidden columns that hold a FULL JOIN's merged USING columns
# (coalesce of both sides): no name lookup finds them, `*` shows the name.
MERGED_USING = "?using?"


@dataclass
class ScopeItem:
    """One FROM item: `alias` is what qualifies its columns (None for an
    unaliased subquery); `qualified` its catalog name when it has no alias
    (so `schema.table.column` works)."""

    alias: str | None
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    offset: int = 0
    qualified: QualifiedName | None = None
    # The alias as a column reference means the one column (PostgreSQL's
    # whole-row reference of a function returning a scalar: `SELECT e FROM
    # jsonb_array_elements(j) AS e`, whose column is `value`).
    whole_row: bool = False

    @property
    def arity(self) -> int:
        return len(self.names)

    def matches(self, qualifier: tuple[str, ...]) -> bool:
        if len(qualifier) == 1:
            return self.alias == qualifier[0]
        if self.qualified is None or self.alias != self.qualified.item:
            return False
        return self.qualified.parts[-len(qualifier) :] == qualifier


@dataclass
class Scope:
    items: list[ScopeItem] = field(default_factory=list)
    # Unqualified names merged by JOIN USING -> the column they mean.
    merged: dict[str, int] = field(default_factory=dict)
    # Column order of `*` (JOIN USING puts merged columns first); None: natural.
    star_order: list[int] | None = None
    # The enclosing query's binder, for names this scope lacks (subqueries).
    outer: ScalarBinder | None = None
    # Where subqueries in expressions are planned; None: they are not allowed.
    context: PlanContext | None = None

    @property
    def arity(self) -> int:
        return sum(item.arity for item in self.items)

    @property
    def types(self) -> tuple[ColumnType, ...]:
        return tuple(t for item in self.items for t in item.types)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for item in self.items for n in item.names)

    def add(self, item: ScopeItem, node: exp.Expr | None = None) -> ScopeItem:
        """Append a FROM item (at the end of the row); aliases must be unique."""
        if item.alias is not None:
            for other in self.items:
                # PostgreSQL allows the same name twice only for two different
                # unaliased tables (`FROM a.t, b.t`).
                both_tables = other.qualified is not None and item.qualified is not None
                if other.alias == item.alias and not (
                    both_tables and other.qualified != item.qualified
                ):
                    raise DuplicateAlias(
                        f'table name "{item.alias}" specified more than once',
                        position_of(node),
                    )
        if self.star_order is not None:
            self.star_order += list(range(self.arity, self.arity + item.arity))
        item.offset = self.arity
        self.items.append(item)
        return item

    def item_of(self, column: int) -> int:
        """Index of the FROM item that provides concatenated column `column`."""
        for i, item in enumerate(self.items):
            if item.offset <= column < item.offset + item.arity:
                return i
        raise IndexError(column)

    def describe(self, column: int) -> str:
        """`alias.name` of a column, for messages."""
        item = self.items[self.item_of(column)]
        name = item.names[column - item.offset]
        return f"{item.alias}.{name}" if item.alias else name

    def can_resolve(self, parts: tuple[str, ...]) -> bool:
        """Whether a column reference finds a FROM item here (or else is
        looked up in the enclosing query)."""
        if len(parts) == 1:
            return (
                parts[0] in self.merged
                or any(parts[0] in item.names for item in self.items)
                or any(item.whole_row and item.alias == parts[0] for item in self.items)
            )
        return any(item.matches(parts[:-1]) for item in self.items)

    def resolve(self, parts: tuple[str, ...], node: exp.Expr | None = None) -> int:
        """The concatenated index of the column `parts` names (1 part: column;
        more: qualifier then column)."""
        column = parts[-1]
        if len(parts) == 1:
            if column in self.merged:
                return self.merged[column]
            found = [
                item.offset + i
                for item in self.items
                for i, name in enumerate(item.names)
                if name == column
            ]
            if not found:  # a column's name first, then a scalar function's alias
                found = [
                    item.offset for item in self.items if item.whole_row and item.alias == column
                ]
            if not found and any(item.alias == column for item in self.items):
                raise no_record_values(node)  # `SELECT t FROM t`: the row as one value
            if not found:
                raise UnknownColumn(f'column "{column}" does not exist', position_of(node))
            if len(found) > 1:
                candidates = ", ".join(self.describe(i) for i in found)
                raise AmbiguousColumn(
                    f'column reference "{column}" is ambiguous',
                    position_of(node),
                    detail=f"It could refer to any of: {candidates}.",
                )
            return found[0]
        item = self.find_item(parts[:-1], node)
        if column not in item.names:
            # Materialize's words: the qualified name quoted as one
            # (PostgreSQL's are `column t.c does not exist`)
            written = ".".join((*parts[:-1], column))
            raise UnknownColumn(f'column "{written}" does not exist', position_of(node))
        return item.offset + item.names.index(column)

    def find_item(self, qualifier: tuple[str, ...], node: exp.Expr | None = None) -> ScopeItem:
        matching = [item for item in self.items if item.matches(qualifier)]
        if not matching:
            name = ".".join(qualifier)
            raise UnknownObject(f'missing FROM-clause entry for table "{name}"', position_of(node))
        if len(matching) > 1:
            name = ".".join(qualifier)
            raise AmbiguousColumn(f'table reference "{name}" is ambiguous', position_of(node))
        return matching[0]

    def star(self, qualifier: tuple[str, ...] | None, node: exp.Expr | None = None) -> list[int]:
        """Columns `*` (qualifier None) or `t.*` expands to."""
        if qualifier is None:
            if self.star_order is not None:
                return list(self.star_order)
            return list(range(self.arity))
        item = self.find_item(qualifier, node)
        return list(range(item.offset, item.offset + item.arity))

    def column_name(self, column: int) -> str:
        """The name `*` shows for `column` (a merged USING column its own name)."""
        item = self.items[self.item_of(column)]
        return item.names[column - item.offset].removeprefix(MERGED_USING)
