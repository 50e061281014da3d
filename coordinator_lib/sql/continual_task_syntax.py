"""Syntax of continual tasks, in Materialize's grammar:

    CREATE CONTINUAL TASK [IF NOT EXISTS] name (column type, ...)
      ON INPUT input AS ( statement; ... )

where each statement is `INSERT INTO name ...` or `DELETE FROM name ...`.
The statements sit inside the parentheses separated by semicolons, so the
dialect splits statements only at semicolons outside parentheses
(`TidemarkParser._parse`). `TidemarkParser` calls `parse_create_continual_task`
after CREATE CONTINUAL TASK; `TRANSFORMS` prints the node back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.tokens import TokenType


class CreateContinualTask(exp.Expression):
    """`this` an `exp.Schema` (the name and the column definitions), `input`
    the input's `exp.Table`, `statements` the body in order."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "input": True,
        "statements": True,
        "exists": False,
    }


def parse_create_continual_task(parser: Any) -> CreateContinualTask:
    """After CREATE CONTINUAL TASK."""
    exists = parser._parse_exists(not_=True)
    name = parser._parse_table_parts(schema=True)
    this = parser._parse_schema(this=name)
    if not isinstance(this, exp.Schema) or not this.expressions:
        parser.raise_error("Expecting ( and the continual task's columns")
    if not parser._match_text_seq("ON", "INPUT"):
        parser.raise_error("Expecting ON INPUT")
    input_ = parser._parse_table_parts(schema=True)
    if not parser._match(TokenType.ALIAS):
        parser.raise_error("Expecting AS")
    if not parser._match(TokenType.L_PAREN):
        parser.raise_error("Expecting ( and the continual task's statements")
    statements: list[exp.Expr] = []
    while not parser._match(TokenType.R_PAREN):
        if parser._match(TokenType.SEMICOLON):
            continue
        if parser._curr is None:
            parser.raise_error("Expecting )")
        start = parser._curr
        statement = parser._parse_statement()
        if statement is None:
            parser.raise_error("Expecting INSERT or DELETE", start)
        statement.meta["start"] = start.start
        statements.append(statement)
        if not (
            parser._match(TokenType.SEMICOLON, advance=False)
            or parser._match(TokenType.R_PAREN, advance=False)
        ):
            parser.raise_error("Expecting ; or )")
    return parser.expression(
        CreateContinualTask(this=this, input=input_, statements=statements, exists=exists)
    )


def _create_continual_task_sql(g: Any, e: CreateContinualTask) -> str:
    exists = " IF NOT EXISTS" if e.args.get("exists") else ""
    body = " ".join(f"{g.sql(s)};" for s in e.args["statements"])
    return (
        f"CREATE CONTINUAL TASK{exists} {g.sql(e, 'this')} ON INPUT {g.sql(e, 'input')} AS ({body})"
    )


TRANSFORMS: dict[type[exp.Expr], Callable[..., str]] = {
    CreateContinualTask: _create_continual_task_sql,
}
