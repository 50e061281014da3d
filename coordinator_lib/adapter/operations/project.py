"""Project SQL: the CREATE statements a project declares, applied
idempotently (each runs as CREATE ... IF NOT EXISTS), with where each object
was defined (file, line, the comment above it) for code references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot.tokens import TokenType

from coordinator_lib.adapter.client import Client
from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.plan import parse_statements, plan_statement
from coordinator_lib.sql.plans import CreateSourcePlan


@dataclass(frozen=True)
class Defined:
    """Where a project SQL statement defined an object (for code references)."""

    name: str  # fully qualified, as catalog items print
    path: str
    line: int
    created: bool  # False: it existed already and was left as it is
    comment: str = ""  # the `--` comment lines right above the statement


def leading_comment(text: str, line: int) -> str:
    """The `--` comment block that ends right above `line` (1-based)."""
    lines = text.splitlines()
    out: list[str] = []
    index = line - 2
    while index >= 0 and lines[index].strip().startswith("--"):
        out.append(lines[index].strip()[2:].strip())
        index -= 1
    return " ".join(reversed(out)).strip()


def split_statements(text: str) -> list[tuple[str, int]]:
    """The `;`-separated statements of `text` with their first line (1-based)."""
    tokens = Tidemark().tokenize(text)
    out: list[tuple[str, int]] = []
    first = None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                out.append((text[first.start : token.start].strip(), first.line))
            first = None
        elif first is None:
            first = token
    if first is not None:
        out.append((text[first.start :].strip(), first.line))
    return out


def apply_sql(
    coordinator: Coordinator, text: str, path: str = "<sql>", user: str = "materialize"
) -> list[Defined]:
    """Apply `text`'s CREATE statements; objects that exist are left alone
    (each statement runs as CREATE ... IF NOT EXISTS), so applying a project
    twice changes nothing. Anything but CREATE is refused: a project file
    declares objects, it does not write data on every load."""
    session = Client(coordinator).startup(user, internal=True)
    defined: list[Defined] = []
    try:
        for sql, line in split_statements(text):
            (statement,) = parse_statements(sql)
            creates = type(statement).__name__.startswith("Create")
            if not (creates and "exists" in type(statement).arg_types):
                raise ValueError(f"{path}:{line}: project SQL holds CREATE statements only")
            if statement.args.get("replace"):
                raise ValueError(f"{path}:{line}: CREATE OR REPLACE is not idempotent; drop it")
            statement.set("exists", True)
            idempotent = statement.sql(dialect=Tidemark)
            catalog = coordinator.catalog.session_catalog(
                session.session.database, session.session.search_path
            )
            plan = plan_statement(idempotent, catalog)
            names = _created_names(plan)
            existed = all(coordinator.catalog.index.lookup(n) is not None for n in names)
            list(session.execute(idempotent))
            created = bool(names) and not existed
            comment = leading_comment(text, line)
            defined += [Defined(str(n), path, line, created, comment) for n in names]
    finally:
        session.terminate()
    return defined


def _created_names(plan: Any) -> list[Any]:
    if isinstance(plan, CreateSourcePlan):
        return [plan.name, *(n for n in plan.subsources.values() if n != plan.name)]
    name = getattr(plan, "name", None)
    return [name] if name is not None and hasattr(name, "schema") else []
