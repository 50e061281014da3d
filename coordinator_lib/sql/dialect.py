"""The Tidemark SQL dialect: sqlglot's Materialize dialect plus the statements
Materialize users write that sqlglot 30 does not parse.

Added on top of `sqlglot.dialects.materialize.Materialize`:

- `CREATE [OR REPLACE] MATERIALIZED VIEW [IF NOT EXISTS] name [(cols)]
  [IN CLUSTER c] [WITH (RETAIN HISTORY FOR '1h', ...)] AS query` -> `exp.Create`
  (kind VIEW) whose properties hold `MaterializedProperty`, `InCluster` and
  `WithOptions`;
- `CREATE INDEX [IF NOT EXISTS] [name] [IN CLUSTER c] ON obj [USING m] (expr, ...)`
  and `CREATE DEFAULT INDEX [IN CLUSTER c] ON obj` -> `exp.Create` (kind
  INDEX) around `exp.Index`, with `DefaultIndex` / `InCluster` properties;
- `CREATE SOURCE [IF NOT EXISTS] name [IN CLUSTER c] FROM LOAD GENERATOR kind
  [(option value, ...)] [FOR ALL TABLES]` -> `CreateSource`;
- `<query> AS OF [AT LEAST] expr` -> the query's `as_of` arg holds `AsOf`;
- `DROP <kind> [IF EXISTS] name [, ...] [CASCADE | RESTRICT]` for Materialize's
  kinds (SOURCE, SINK, MATERIALIZED VIEW, INDEX lists, ...) -> `exp.Drop`;
- `EXPLAIN [stage PLAN] [FOR] <statement | MATERIALIZED VIEW name | ...>` -> `Explain`,
  `EXPLAIN TIMESTAMP [AS TEXT|JSON] FOR <select>` -> `ExplainTimestamp`;
- `CREATE DATABASE [IF NOT EXISTS] d`, `CREATE SCHEMA [IF NOT EXISTS] [d.]s` ->
  `exp.Create` (kind DATABASE / SCHEMA) around an `exp.Table` (`this` the
  name, `db` the database of a schema);
- `WITH (RETAIN HISTORY FOR ...)` on CREATE TABLE / INDEX / SOURCE -> `WithOptions`.

The session statements (SHOW, SET, BEGIN, SUBSCRIBE, DECLARE, FETCH, COPY,
ALTER ...) and the clauses statements share live in `statements.py`, which
`TidemarkParser` builds on. A new statement goes the same way: a node class,
a branch in the parser, a TRANSFORMS entry for the generator.

The parser also records positions sqlglot leaves out, so errors can point at
them like PostgreSQL does: every operand gets the start of its first token
(`meta["start"]`), and binary operators, BETWEEN and IN get their operator's
offset in `meta["op_start"]` (see `positions.py`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.materialize import Materialize
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.generators.materialize import MaterializeGenerator
from sqlglot.tokenizer_core import TokenizerCore
from sqlglot.tokens import Token, TokenType

from coordinator_lib.repr.interval import QUALIFIERS
from coordinator_lib.sql.aggregate_syntax import FUNCTIONS as AGGREGATE_FUNCTIONS
from coordinator_lib.sql.cluster_syntax import TRANSFORMS as CLUSTER_TRANSFORMS
from coordinator_lib.sql.cluster_syntax import parse_create_cluster
from coordinator_lib.sql.continual_task_syntax import TRANSFORMS as CONTINUAL_TASK_TRANSFORMS
from coordinator_lib.sql.continual_task_syntax import parse_create_continual_task
from coordinator_lib.sql.depth import too_deep
from coordinator_lib.sql.errors import ParseError, SqlError
from coordinator_lib.sql.escape_string import scan_escape_string
from coordinator_lib.sql.iceberg_syntax import TRANSFORMS as ICEBERG_TRANSFORMS
from coordinator_lib.sql.iceberg_syntax import parse_create_sink
from coordinator_lib.sql.postgres_syntax import TRANSFORMS as POSTGRES_TRANSFORMS
from coordinator_lib.sql.postgres_syntax import parse_create_connection, parse_postgres_source
from coordinator_lib.sql.query_hints import at_query_hints, skip_query_hints
from coordinator_lib.sql.statements import (
    TRANSFORMS as STATEMENT_TRANSFORMS,
)
from coordinator_lib.sql.statements import (
    AsOf,
    ExplainTimestamp,
    InCluster,
    MzOption,
    StatementParser,
    WithOptions,
)
from coordinator_lib.sql.webhook_syntax import TRANSFORMS as WEBHOOK_TRANSFORMS
from coordinator_lib.sql.webhook_syntax import (
    parse_alter_secret,
    parse_create_secret,
    parse_webhook_source,
)

# --- syntax tree nodes for what sqlglot does not have -------------------------


class DefaultIndex(exp.Property):
    """Marks `CREATE DEFAULT INDEX`."""

    arg_types: ClassVar[dict[str, bool]] = {}


class CreateSource(exp.Expression):
    """`CREATE SOURCE ... FROM LOAD GENERATOR ...`; `generator` is the upper-cased
    generator name, `options` a list of MzOption."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "cluster": False,
        "generator": True,
        "options": False,
        "for_all_tables": False,
        "with_options": False,
    }


class Explain(exp.Expression):
    """`EXPLAIN ...`: `this` is a statement, or a table name when `kind` names an
    existing object ("MATERIALIZED VIEW", "VIEW", "INDEX")."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "stage": False,
        "kind": False,
        "options": False,
    }


# The meta key of the name a function call was written with (figure_colname).
WRITTEN_NAME = "written_name"

# Longest first, so MATERIALIZED VIEW wins over VIEW.
_DROP_KINDS: tuple[tuple[str, ...], ...] = (
    ("MATERIALIZED", "VIEW"),
    ("CONTINUAL", "TASK"),
    ("CLUSTER", "REPLICA"),
    ("TABLE",),
    ("VIEW",),
    ("INDEX",),
    ("SOURCE",),
    ("SINK",),
    ("TYPE",),
    ("SECRET",),
    ("CONNECTION",),
    ("SCHEMA",),
    ("DATABASE",),
    ("CLUSTER",),
    ("ROLE",),
)

_EXPLAIN_STAGES: tuple[tuple[str, ...], ...] = (
    ("RAW",),
    ("DECORRELATED",),
    ("LOCALLY", "OPTIMIZED"),
    ("OPTIMIZED",),
    ("PHYSICAL",),
)

_EXPLAIN_OBJECTS: tuple[tuple[str, ...], ...] = (("MATERIALIZED", "VIEW"), ("VIEW",), ("INDEX",))


def _subtree_start(node: exp.Expr | None) -> int | None:
    """Smallest known start offset in a subtree (sqlglot puts positions on leaves)."""
    if node is None:
        return None
    best: int | None = None
    for child in node.walk():
        meta = child._meta
        if meta and meta.get("start") is not None and (best is None or meta["start"] < best):
            best = meta["start"]
    return best


# PostgreSQL's interval field keywords after an interval string.
_INTERVAL_FIELDS = frozenset({"YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND"})


class TidemarkParser(StatementParser):
    """Materialize's parser with the statements listed in the module docstring."""

    # TO_CHAR stays a plain call with its template text: sqlglot would turn
    # the template into strftime codes (exp.TimeToStr), which cannot be read
    # back reliably (sql/builtins_extra.py binds it). VERSION stays a plain
    # call too, the session's function (adapter/session_functions.py), as
    # pg_catalog.version() is: sqlglot makes it exp.CurrentVersion.
    FUNCTIONS: ClassVar[dict[str, Any]] = {
        **StatementParser.FUNCTIONS,
        "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args),
        "VERSION": lambda args: exp.Anonymous(this="version", expressions=args),
        **AGGREGATE_FUNCTIONS,
    }

    # PostgreSQL has no lambdas: `f(body -> 'k')` is the jsonb operator
    # (sqlglot would read `body -> 'k'` in a call's arguments as a lambda).
    LAMBDAS: ClassVar[dict[TokenType, Any]] = {}

    # A dollar-quoted string is a string constant like any other (sqlglot
    # makes it a RawString, which the planner does not know).
    PRIMARY_PARSERS: ClassVar[dict[TokenType, Any]] = {
        **StatementParser.PRIMARY_PARSERS,
        TokenType.HEREDOC_STRING: lambda self, token: self.expression(
            exp.Literal(this=token.text, is_string=True), token
        ),
    }

    def _parse_is(self, this: exp.Expr | None) -> exp.Expr | None:
        """`x IS NOT NULL` is marked (meta `is_not_null`): sqlglot gives it the
        same tree as `NOT x IS NULL`, which differs for a row constructor
        (sql/row_comparison.py)."""
        parsed = super()._parse_is(this)
        is_test = isinstance(parsed, exp.Not) and isinstance(parsed.this, exp.Is)
        if is_test and isinstance(parsed.this.expression, exp.Null):
            parsed.meta["is_not_null"] = True
        return parsed

    def _parse_primary(self) -> exp.Expr | None:
        """Adjacent quoted strings concatenate only across a newline, as in
        PostgreSQL (`'a' 'b'` on one line is a syntax error); sqlglot joins
        them always."""
        tokens, i = self._tokens, self._index
        while (
            i + 1 < len(tokens)
            and tokens[i].token_type == TokenType.STRING
            and tokens[i + 1].token_type == TokenType.STRING
        ):
            if "\n" not in (self.sql or "")[tokens[i].end + 1 : tokens[i + 1].start]:
                self.raise_error("syntax error", tokens[i + 1])
            i += 1
        return super()._parse_primary()

    def _parse_id_var(self, any_token: bool = True, tokens: Any = None) -> exp.Expr | None:
        """`OVER (GROUPS BETWEEN ...)` and `OVER (GROUPS n PRECEDING)`: GROUPS
        opens a frame (which the planner refuses), not the name of a window
        (sqlglot read it as one when no PARTITION BY or ORDER BY came first)."""
        after = self._next
        if (
            tokens is self.WINDOW_ALIAS_TOKENS
            and self._curr is not None
            and self._curr.text.upper() == "GROUPS"
            and after is not None
            and (
                after.text.upper() in ("BETWEEN", "UNBOUNDED", "CURRENT")
                or after.token_type == TokenType.NUMBER
            )
        ):
            return None
        return super()._parse_id_var(any_token, tokens)

    def _parse_lateral(self) -> exp.Lateral | None:
        """`LATERAL ROWS FROM (...)` is `ROWS FROM (...)`: a function item may
        read the items before it anyway (PostgreSQL's implicit LATERAL), and
        sqlglot parses ROWS FROM only as a table."""
        index = self._index
        if self._match(TokenType.LATERAL):
            if self._match_text_seq("ROWS", "FROM", advance=False):
                return None
            self._retreat(index)
        return super()._parse_lateral()

    def _parse_map(self) -> exp.ToMap:
        """MAP[key => value, ...] (Materialize's; `=>` is no lambda here) or
        MAP(subquery), which the binder refuses."""
        if self._match(TokenType.L_PAREN):
            to_map = self.expression(exp.ToMap(this=self._parse_select()))
            self._match_r_paren()
            return to_map
        if not self._match(TokenType.L_BRACKET):
            self.raise_error("Expecting [")
        entries: list[exp.Expr] = []
        while not self._match(TokenType.R_BRACKET):
            if entries and not self._match(TokenType.COMMA):
                self.raise_error("Expecting , or ]")
            key = self._parse_assignment()
            if not self._match(TokenType.FARROW):
                self.raise_error("Expecting =>")
            value = self._parse_assignment()
            entries.append(exp.PropertyEQ(this=key, expression=value))
        return self.expression(exp.ToMap(this=self.expression(exp.Struct(expressions=entries))))

    def _parse_function_call(
        self,
        functions: dict[str, Any] | None = None,
        anonymous: bool = False,
        optional_parens: bool = True,
        any_token: bool = False,
    ) -> exp.Expr | None:
        """Remember the name a plain call was written with: PostgreSQL names
        an unaliased column after it (`substr`, which sqlglot makes a
        Substring). Calls with a syntax of their own (SUBSTRING(x FROM y),
        TRIM, EXTRACT, ...) are named after their node."""
        token = self._curr
        call = super()._parse_function_call(functions, anonymous, optional_parens, any_token)
        if (
            isinstance(call, exp.Func)
            and not isinstance(call, exp.Anonymous)
            and token is not None
            and token.text.upper() not in self.FUNCTION_PARSERS
        ):
            quoted = token.token_type == TokenType.IDENTIFIER
            call.meta[WRITTEN_NAME] = token.text if quoted else token.text.lower()
        return call

    def _parse_interval_span(
        self, this: exp.Expr, parse_function_unit: bool = True
    ) -> exp.Interval:
        """`INTERVAL '1 day 02:03:04'` keeps its whole string, as PostgreSQL
        reads it (sqlglot keeps the first number and unit only), with an
        optional field keyword (`INTERVAL '1' YEAR`)."""
        if this is None or not this.is_string:
            return super()._parse_interval_span(this, parse_function_unit)
        unit = None
        if self._curr is not None and self._curr.text.upper() in _INTERVAL_FIELDS:
            qualifier = self._curr.text.upper()
            self._advance()
            if (
                self._curr is not None
                and self._curr.text.upper() == "TO"
                and self._next is not None
                and f"{qualifier} TO {self._next.text.upper()}" in QUALIFIERS
            ):
                qualifier = f"{qualifier} TO {self._next.text.upper()}"
                self._advance(2)
            if qualifier.endswith("SECOND") and self._match(TokenType.L_PAREN):
                digits = self._parse_number()
                self._match_r_paren()
                qualifier += f"({digits.name if digits else ''})"
            unit = exp.Var(this=qualifier)
        return self.expression(exp.Interval(this=this, unit=unit))

    def _parse_types(
        self,
        check_func: bool = False,
        schema: bool = False,
        allow_identifiers: bool = True,
        with_collation: bool = False,
    ) -> exp.Expr | None:
        """The type `interval <fields> SECOND(p)` keeps its precision as the
        DataType's parameter, as `interval(p)` does (sqlglot stops at `(`).
        A word after `interval` that is no SQL field (`'1'::interval week`)
        is not its qualifier but, as in PostgreSQL, what follows the type."""
        index = self._index
        this = super()._parse_types(check_func, schema, allow_identifiers, with_collation)
        if isinstance(this, exp.DataType) and isinstance(this.this, exp.Interval):
            fields = this.this.args["unit"].sql().upper().split(" TO ")
            if not set(fields) <= _INTERVAL_FIELDS:
                self._retreat(index)
                self._advance()
                return exp.DataType(this=exp.DType.INTERVAL)
        if (
            isinstance(this, exp.DataType)
            and isinstance(this.this, exp.Interval)
            and this.this.args["unit"].sql().upper().endswith("SECOND")
            and self._match(TokenType.L_PAREN)
        ):
            digits = self._parse_number()
            self._match_r_paren()
            this.set("expressions", [exp.DataTypeParam(this=digits)])
        return this

    def _parse_type(
        self, parse_interval: bool = True, fallback_to_identifier: bool = False
    ) -> exp.Expr | None:
        if not fallback_to_identifier:
            typed = self._parse_generic_typed_literal()
            if typed is not None:
                return self._parse_column_ops(typed)
        return super()._parse_type(parse_interval, fallback_to_identifier)

    def _parse_generic_typed_literal(self) -> exp.Expr | None:
        """`name 'text'` is PostgreSQL's typed literal for any type name
        (`a$ $$x$$` too): a cast the binder resolves, so an unknown name is
        "type does not exist", not a syntax error. Known type keywords
        (`date '...'`) are sqlglot's own tokens and never reach here."""
        tokens, i = self._tokens, self._index
        if not (
            i + 1 < len(tokens)
            and tokens[i].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and tokens[i + 1].token_type in (TokenType.STRING, TokenType.HEREDOC_STRING)
        ):
            return None
        name, text = tokens[i], tokens[i + 1]
        self._advance(2)
        to = exp.DataType(
            this=exp.DataType.Type.USERDEFINED,
            kind=exp.Identifier(this=name.text, quoted=name.token_type == TokenType.IDENTIFIER),
        )
        return self.expression(exp.Cast(this=exp.Literal.string(text.text), to=to), name)

    def _parse_csv(self, parse_method: Any, sep: TokenType = TokenType.COMMA) -> list[Any]:
        """A list may not hold an empty item (`SELECT 1,,2`, `f(,1)`), as in
        PostgreSQL; sqlglot skips one."""
        tokens, index = self._tokens, self._index
        items = super()._parse_csv(parse_method, sep)
        if sep is TokenType.COMMA:
            for i in range(index, self._index - 1):
                # A comma right after the list's opening or another comma:
                # an empty item (the list's tokens lie between the two indexes).
                if tokens[i].token_type == TokenType.COMMA and (
                    i == index or tokens[i - 1].token_type == TokenType.COMMA
                ):
                    self.raise_error("syntax error", tokens[i])
        return items

    def _parse_expressions(self) -> list[exp.Expr]:
        """An expression list (a select list) may not end in a comma, as in
        PostgreSQL; sqlglot drops a trailing one."""
        items = super()._parse_expressions()
        if self._prev is not None and self._prev.token_type == TokenType.COMMA:
            self.raise_error("syntax error", self._curr or self._prev)
        return items

    def _parse_date_part(self) -> exp.Expr:
        """date_part stays itself: sqlglot reads it as EXTRACT, whose result
        type differs (numeric, not double precision)."""
        part = self._parse_bitwise()
        self._match(TokenType.COMMA)
        value = self._parse_bitwise()
        return self.expression(exp.Anonymous(this="date_part", expressions=[part, value]))

    # --- positions -----------------------------------------------------------

    def expression(
        self, instance: Any, token: Token | None = None, comments: list[str] | None = None
    ) -> Any:
        if token is None and isinstance(instance, exp.Binary | exp.Between | exp.In):
            op = self._operator_token(instance)
            if op is not None:
                instance.meta["op_start"] = op.start
        return super().expression(instance, token, comments)

    def _operator_token(self, node: exp.Expr) -> Token | None:
        """The token just before the second operand (skipping open parens)."""
        if isinstance(node, exp.Between):
            second = node.args.get("low")
        elif isinstance(node, exp.In):
            items = node.expressions
            second = items[0] if items else node.args.get("query")
        else:
            second = node.args.get("expression")
        start = _subtree_start(second)
        if start is None:
            return None
        i = self._index - 1
        while i >= 0 and self._tokens[i].start > start:
            i -= 1
        if i < 0 or self._tokens[i].start != start:
            return None
        i -= 1
        while i >= 0 and self._tokens[i].token_type == TokenType.L_PAREN:
            i -= 1
        return self._tokens[i] if i >= 0 else None

    def _parse_unary(self) -> exp.Expr | None:
        first = self._curr
        node = super()._parse_unary()
        if node is not None and first and not (node._meta and "start" in node._meta):
            node.meta["start"] = first.start
        return node

    def raise_error(self, message: str, token: Token | None = None) -> None:
        token = token or self._curr or self._prev
        count = len(self.errors)
        try:
            super().raise_error(message, token)  # type: ignore[arg-type]
        except SqlglotParseError as error:
            if token is not None:
                error.errors[0]["start"] = token.start
            raise
        if token is not None and len(self.errors) > count:
            self.errors[-1].errors[0]["start"] = token.start

    def _parse(self, parse_method: Any, raw_tokens: list[Token], sql: str | None = None) -> Any:
        """sqlglot's, but a semicolon inside parentheses does not end the
        statement (the body of CREATE CONTINUAL TASK)."""
        self.reset()
        self.sql = sql or ""
        total = len(raw_tokens)
        chunks: list[list[Token]] = [[]]
        depth = 0
        for i, token in enumerate(raw_tokens):
            if token.token_type == TokenType.L_PAREN:
                depth += 1
            elif token.token_type == TokenType.R_PAREN:
                depth = max(depth - 1, 0)
            if token.token_type == TokenType.SEMICOLON and depth == 0:
                if token.comments:
                    chunks.append([token])
                if i < total - 1:
                    chunks.append([])
            else:
                chunks[-1].append(token)
        self._chunks = chunks
        return self._parse_batch_statements(parse_method=parse_method, sep_first_statement=False)

    def _warn_unsupported(self) -> None:
        """Unsupported statements become exp.Command and the planner says so; no log noise."""

    # --- statements -----------------------------------------------------------

    def _parse_statement(self) -> exp.Expr | None:
        curr = self._curr
        if curr and curr.token_type == TokenType.VAR and curr.text.upper() == "EXPLAIN":
            self._advance()
            return self._parse_explain()
        session = self._parse_session_statement()
        if session is not None:
            return session
        statement = super()._parse_statement()
        if isinstance(statement, exp.Query) and self._match_text_seq("AS", "OF"):
            statement.set("as_of", self._parse_as_of())
        return statement

    def _parse_query_modifiers(self, this: Any) -> Any:
        """Materialize's query hints (`OPTIONS (...)`, sql/query_hints.py)
        may stand between GROUP BY and HAVING or after HAVING."""
        this = super()._parse_query_modifiers(this)
        if isinstance(this, exp.Select) and at_query_hints(self):
            skip_query_hints(self)
            this = super()._parse_query_modifiers(this)
        return this

    def _parse_table_alias(
        self, alias_tokens: Any = None
    ) -> exp.TableAlias | None:  # `FROM t AS OF 5` is not an alias, nor `t OPTIONS (`
        if self._match_text_seq("AS", "OF", advance=False) or at_query_hints(self):
            return None
        return super()._parse_table_alias(alias_tokens)

    def _parse_alias(self, this: exp.Expr | None, explicit: bool = False) -> exp.Expr | None:
        if self._match_text_seq("AS", "OF", advance=False) or at_query_hints(self):
            return this
        if self._curr is not None and self._curr.token_type in (
            TokenType.PARAMETER,
            TokenType.STRING,
        ):
            return this  # `'a' $1`, `1 'b'`: syntax errors in PostgreSQL, not aliases
        return super()._parse_alias(this, explicit)

    def _parse_create(self) -> exp.Expr:  # type: ignore[override]
        index = self._index
        replace = self._match_pair(TokenType.OR, TokenType.REPLACE)
        if self._match_text_seq("MATERIALIZED", "VIEW"):
            return self._parse_create_materialized_view(bool(replace))
        if not replace:
            if self._match_text_seq("CONTINUAL", "TASK"):
                return parse_create_continual_task(self)
            if self._match_text_seq("DEFAULT", "INDEX"):
                return self._parse_create_index(default=True)
            if self._match(TokenType.INDEX):
                return self._parse_create_index(default=False)
            if self._match_text_seq("SOURCE"):
                return self._parse_create_source()
            if self._match_text_seq("SECRET"):
                return parse_create_secret(self)
            if self._match_text_seq("CONNECTION"):
                return parse_create_connection(self)
            if self._match_text_seq("SINK"):
                return parse_create_sink(self)
            if self._match_text_seq("CLUSTER"):
                return parse_create_cluster(self)
            if self._match(TokenType.SCHEMA):
                return self._parse_create_namespace("SCHEMA")
            if self._match(TokenType.DATABASE):
                return self._parse_create_namespace("DATABASE")
        self._retreat(index)
        return super()._parse_create()

    def _parse_create_namespace(self, kind: str) -> exp.Create:
        exists = self._parse_exists(not_=True)
        name = self._parse_object_name(f"a {kind.lower()} name")
        return self.expression(exp.Create(this=name, kind=kind, exists=exists))

    def _parse_with_property(self) -> Any:
        """`WITH (RETAIN HISTORY ...)` after CREATE TABLE's columns is Materialize's."""
        if (
            self._match(TokenType.L_PAREN, advance=False)
            and self._next
            and self._next.text.upper() == "RETAIN"
        ):
            return WithOptions(expressions=self._parse_mz_options())
        return super()._parse_with_property()

    def _parse_create_materialized_view(self, replace: bool) -> exp.Create:
        exists = self._parse_exists(not_=True)
        name = self._parse_table_parts(schema=True)
        this = self._parse_schema(this=name)
        properties: list[exp.Expr] = [exp.MaterializedProperty()]
        cluster = self._parse_in_cluster()
        if cluster is not None:
            properties.append(cluster)
        if self._match(TokenType.WITH):
            properties.append(WithOptions(expressions=self._parse_mz_options()))
        if not self._match(TokenType.ALIAS):
            self.raise_error("Expecting AS")
        query = self._parse_ddl_select()
        return self.expression(
            exp.Create(
                this=this,
                kind="VIEW",
                replace=replace,
                exists=exists,
                expression=query,
                properties=exp.Properties(expressions=properties),
            )
        )

    def _parse_create_index(self, default: bool) -> exp.Create:
        exists = self._parse_exists(not_=True)
        name = None
        if self._curr.token_type != TokenType.ON and not self._match_text_seq(
            "IN", "CLUSTER", advance=False
        ):
            name = self._parse_id_var()  # Tidemark also reads back a default index's name
        properties: list[exp.Expr] = [DefaultIndex()] if default else []
        cluster = self._parse_in_cluster()
        if cluster is not None:
            properties.append(cluster)
        if not self._match(TokenType.ON):
            self.raise_error("Expecting ON")
        table = self._parse_table_parts(schema=True)
        using = self._parse_var(any_token=True) if self._match(TokenType.USING) else None
        columns = None
        if self._match(TokenType.L_PAREN, advance=False):
            columns = self._parse_wrapped_csv(self._parse_with_operator)
        params = self.expression(exp.IndexParameters(using=using, columns=columns))
        if default and params.args.get("columns"):
            self.raise_error("CREATE DEFAULT INDEX takes no column list")
        if not default and not params.args.get("columns"):
            self.raise_error("Expecting ( and the index's key columns")
        if self._match(TokenType.WITH):
            properties.append(WithOptions(expressions=self._parse_mz_options()))
        index = self.expression(exp.Index(this=name, table=table, params=params))
        return self.expression(
            exp.Create(
                this=index,
                kind="INDEX",
                exists=exists,
                properties=exp.Properties(expressions=properties) if properties else None,
            )
        )

    def _parse_create_source(self) -> exp.Expr:
        exists = self._parse_exists(not_=True)
        name = self._parse_table_parts(schema=True)
        cluster = self._parse_in_cluster()
        if self._match_text_seq("FROM", "WEBHOOK"):
            return parse_webhook_source(self, name, exists, cluster)
        if self._match_text_seq("FROM", "POSTGRES"):
            return parse_postgres_source(self, name, exists, cluster)
        if not self._match_text_seq("FROM", "LOAD", "GENERATOR"):
            self.raise_error("Expecting FROM LOAD GENERATOR, FROM WEBHOOK or FROM POSTGRES")
        generator_token = self._curr
        generator = self._parse_var(any_token=True, upper=True)
        if generator is None:
            self.raise_error("Expecting a load generator name")
        options = self._parse_mz_options() if self._match(TokenType.L_PAREN, advance=False) else []
        for_all_tables = self._match_text_seq("FOR", "ALL", "TABLES")
        with_options = None
        if self._match(TokenType.WITH):
            with_options = WithOptions(expressions=self._parse_mz_options())
        node = CreateSource(
            this=name,
            exists=exists,
            cluster=cluster,
            generator=generator.name if generator else "",
            options=options,
            for_all_tables=for_all_tables,
            with_options=with_options,
        )
        if generator_token:
            node.meta["generator_start"] = generator_token.start
        return self.expression(node)

    def _parse_alter(self) -> exp.Expr:
        if self._match_text_seq("SECRET"):
            return parse_alter_secret(self)
        return super()._parse_alter()

    def _parse_drop(self, exists: bool = False, kind: str | None = None) -> exp.Expr:  # type: ignore[override]
        if kind is None:
            for words in _DROP_KINDS:
                if self._match_text_seq(*words):
                    return self._parse_mz_drop(" ".join(words), exists)
        return super()._parse_drop(exists, kind)

    def _parse_mz_drop(self, kind: str, exists: bool) -> exp.Drop:
        if_exists = exists or self._parse_exists()
        names = self._parse_csv(lambda: self._parse_table_parts(schema=True))
        cascade = self._match_text_seq("CASCADE")
        restrict = not cascade and self._match_text_seq("RESTRICT")
        materialized = kind == "MATERIALIZED VIEW"
        return self.expression(
            exp.Drop(
                kind="VIEW" if materialized else kind,
                materialized=materialized,
                tables=names,
                exists=if_exists,
                cascade=cascade,
                restrict=restrict,
            )
        )

    def _parse_explain(self) -> exp.Expr:
        start = self._prev
        if self._match(TokenType.TIMESTAMP):
            return self._parse_explain_timestamp(start)
        stage = None
        for words in _EXPLAIN_STAGES:
            if self._match_text_seq(*words):
                stage = " ".join(words)
                if not self._match_text_seq("PLAN"):
                    self.raise_error("Expecting PLAN")
                break
        else:
            self._match_text_seq("PLAN")
        options = self._parse_explain_options()
        if self._match_text_seq("AS"):
            self._parse_var(any_token=True)  # AS TEXT / AS JSON: we only print text
        self._match(TokenType.FOR)
        for words in _EXPLAIN_OBJECTS:
            if self._match_text_seq(*words):
                name = self._parse_table_parts()
                return self.expression(
                    Explain(this=name, stage=stage, kind=" ".join(words), options=options), start
                )
        statement = self._parse_statement()
        if statement is None:
            self.raise_error("Expecting a statement to explain")
        return self.expression(Explain(this=statement, stage=stage, options=options), start)

    def _parse_explain_options(self) -> list[exp.Var]:
        """Materialize's `WITH (<modifier> [= value], ...)`: each modifier its
        words joined by a blank, lowercased (`join implementations`), at its
        position; a value (`= false`) is in its meta["value"]. `WITH` without a
        parenthesis is a CTE's."""
        if not (self._curr and self._curr.token_type == TokenType.WITH):
            return []
        following = self._next
        if not (following and following.token_type == TokenType.L_PAREN):
            return []
        self._advance(2)
        options: list[exp.Var] = []
        while True:
            first = self._curr
            words: list[str] = []
            while self._curr and self._curr.token_type not in (
                TokenType.COMMA,
                TokenType.R_PAREN,
                TokenType.EQ,
            ):
                words.append(self._curr.text.lower())
                self._advance()
            if not words or first is None:
                self.raise_error("Expecting an EXPLAIN option")
            option = exp.Var(this=" ".join(words))
            option.meta["start"] = first.start
            if self._match(TokenType.EQ) and self._curr:
                option.meta["value"] = self._curr.text.lower()
                self._advance()
            options.append(option)
            if self._match(TokenType.R_PAREN):
                return options
            if not self._match(TokenType.COMMA):
                self.raise_error("Expecting , or ) after an EXPLAIN option")

    def _parse_explain_timestamp(self, start: Token) -> ExplainTimestamp:
        fmt = "TEXT"
        if self._match_text_seq("AS"):
            if self._match_text_seq("JSON"):
                fmt = "JSON"
            elif not self._match_text_seq("TEXT"):
                self.raise_error("Expecting TEXT or JSON")
        if not self._match(TokenType.FOR):
            self.raise_error("Expecting FOR")
        statement = self._parse_inner_statement()
        if statement is None:
            self.raise_error("Expecting a SELECT to explain")
        return self.expression(ExplainTimestamp(this=statement, format=fmt), start)


class TidemarkGenerator(MaterializeGenerator):
    """Prints the added nodes back in Materialize's syntax (round trips).
    Unlike sqlglot's Materialize, it keeps UNIQUE and PRIMARY KEY (Tidemark
    tables have them, `sql/constraints.py`)."""

    TRANSFORMS: ClassVar[dict[type[exp.Expr], Any]] = {
        **{
            k: v
            for k, v in MaterializeGenerator.TRANSFORMS.items()
            if k not in (exp.Create, exp.PrimaryKeyColumnConstraint)
        },
        **STATEMENT_TRANSFORMS,
        **WEBHOOK_TRANSFORMS,
        **POSTGRES_TRANSFORMS,
        **ICEBERG_TRANSFORMS,
        **CLUSTER_TRANSFORMS,
        **CONTINUAL_TASK_TRANSFORMS,
        AsOf: lambda self, e: (
            f"AS OF {'AT LEAST ' if e.args.get('at_least') else ''}{self.sql(e, 'this')}"
        ),
        InCluster: lambda self, e: f"IN CLUSTER {self.sql(e, 'this')}",
        DefaultIndex: lambda self, e: "",
        MzOption: lambda self, e: TidemarkGenerator._option_sql(self, e),
        WithOptions: lambda self, e: f"WITH ({self.expressions(e, flat=True)})",
        CreateSource: lambda self, e: TidemarkGenerator._create_source_sql(self, e),
        Explain: lambda self, e: TidemarkGenerator._explain_sql(self, e),
    }

    def datatype_sql(self, expression: exp.DataType) -> str:
        """`INTERVAL(p)` and `INTERVAL DAY TO SECOND(p)`: the precision
        after the fields (sqlglot prints `INTERVAL p`)."""
        this, params = expression.this, expression.expressions
        if params and (this is exp.DType.INTERVAL or isinstance(this, exp.Interval)):
            bare = super().datatype_sql(exp.DataType(this=this))
            return f"{bare}({self.expressions(expression, flat=True)})"
        return super().datatype_sql(expression)

    def not_sql(self, expression: exp.Not) -> str:
        """`x IS NOT NULL` as written (the parser marks it, `_parse_is`): a
        stored view is re-read from this text, and for a row constructor it
        differs from `NOT x IS NULL`."""
        if expression.meta.get("is_not_null"):
            return f"{self.sql(expression.this, 'this')} IS NOT NULL"
        return super().not_sql(expression)

    def schema_sql(self, expression: exp.Schema) -> str:
        """A table without columns keeps its `()` (`CREATE TABLE t ()`, as
        PostgreSQL and Materialize take it): without them the stored text
        would read back as `CREATE TABLE t`, which has no column list."""
        if not expression.expressions and isinstance(expression.parent, exp.Create):
            return f"{self.sql(expression, 'this')} ()"
        return super().schema_sql(expression)

    def interval_sql(self, expression: exp.Interval) -> str:
        """`INTERVAL '1-2' YEAR TO MONTH` as written (a stored view is
        re-read from this text): the qualifier changes how the string reads,
        so it stays outside it."""
        unit, value = expression.args.get("unit"), expression.this
        if isinstance(unit, exp.Var) and isinstance(value, exp.Literal) and value.is_string:
            return f"INTERVAL {self.sql(value)} {unit.name}"
        return super().interval_sql(expression)

    def query_modifiers(self, expression: exp.Expr, *sqls: str) -> str:
        sql = super().query_modifiers(expression, *sqls)
        as_of = expression.args.get("as_of")
        return f"{sql} {self.sql(as_of)}" if as_of else sql

    def create_sql(self, expression: exp.Create) -> str:
        properties = expression.args.get("properties")
        props = list(properties.expressions) if properties else []
        kind = expression.args.get("kind")
        materialized = any(isinstance(p, exp.MaterializedProperty) for p in props)
        if kind == "INDEX" or (kind == "VIEW" and materialized):
            return self._mz_create_sql(expression, props)
        with_options = [p for p in props if isinstance(p, WithOptions)]
        if with_options:  # CREATE TABLE ... WITH (RETAIN HISTORY ...) goes last
            bare = expression.copy()
            props = bare.args["properties"].expressions
            rest = [p for p in props if not isinstance(p, WithOptions)]
            bare.set("properties", exp.Properties(expressions=rest) if rest else None)
            return f"{super().create_sql(bare)} {self.sql(with_options[0])}"
        return super().create_sql(expression)

    def _mz_create_sql(self, expression: exp.Create, props: list[exp.Expr]) -> str:
        exists = " IF NOT EXISTS" if expression.args.get("exists") else ""
        cluster = next((p for p in props if isinstance(p, InCluster)), None)
        cluster_sql = f" {self.sql(cluster)}" if cluster is not None else ""
        if expression.args.get("kind") == "INDEX":
            index = expression.this
            default = any(isinstance(p, DefaultIndex) for p in props)
            name = self.sql(index, "this")
            name_sql = f" {name}" if name else ""
            params = index.args.get("params")
            using = self.sql(params, "using") if params else ""
            using_sql = f" USING {using}" if using else ""
            columns = self.expressions(params, key="columns", flat=True) if params else ""
            columns_sql = f" ({columns})" if columns else ""
            head = "CREATE DEFAULT INDEX" if default else "CREATE INDEX"
            table = self.sql(index, "table")
            with_options = next((p for p in props if isinstance(p, WithOptions)), None)
            with_sql = f" {self.sql(with_options)}" if with_options is not None else ""
            return (
                f"{head}{exists}{name_sql}{cluster_sql} ON {table}{using_sql}{columns_sql}"
                f"{with_sql}"
            )
        replace = " OR REPLACE" if expression.args.get("replace") else ""
        with_options = next((p for p in props if isinstance(p, WithOptions)), None)
        with_sql = f" {self.sql(with_options)}" if with_options is not None else ""
        this = self.sql(expression, "this")
        query = self.sql(expression, "expression")
        return f"CREATE{replace} MATERIALIZED VIEW{exists} {this}{cluster_sql}{with_sql} AS {query}"

    def _option_sql(self, e: MzOption) -> str:
        name = e.name
        value = e.args.get("value")
        if value is None:
            return name
        joiner = {"RETAIN HISTORY": " FOR ", "REFRESH EVERY": " "}.get(name, " = ")
        return f"{name}{joiner}{self.sql(value)}"

    def _create_source_sql(self, e: CreateSource) -> str:
        exists = " IF NOT EXISTS" if e.args.get("exists") else ""
        cluster = self.sql(e, "cluster")
        cluster_sql = f" {cluster}" if cluster else ""
        options = self.expressions(e, key="options", flat=True)
        options_sql = f" ({options})" if options else ""
        tables = " FOR ALL TABLES" if e.args.get("for_all_tables") else ""
        with_options = self.sql(e, "with_options")
        with_sql = f" {with_options}" if with_options else ""
        generator = e.args["generator"]
        return (
            f"CREATE SOURCE{exists} {self.sql(e, 'this')}{cluster_sql} "
            f"FROM LOAD GENERATOR {generator}{options_sql}{tables}{with_sql}"
        )

    def _explain_sql(self, e: Explain) -> str:
        stage = e.args.get("stage")
        options = e.args.get("options") or []
        listed = f" WITH ({', '.join(o.name for o in options)})" if options else ""
        head = f"EXPLAIN {stage or 'OPTIMIZED'} PLAN{listed} FOR" if stage or options else "EXPLAIN"
        kind = e.args.get("kind")
        target = f"{kind} {self.sql(e, 'this')}" if kind else self.sql(e, "this")
        return f"{head} {target}"


# PostgreSQL's scan.l: a dollar-quote delimiter is `$tag$` with an optional tag
# that starts like an identifier and has no `$`; a parameter is `$` and digits.
_DOLLAR_DELIMITER = re.compile(r"\$(?:[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)?\$")
_PARAMETER = re.compile(r"\$([0-9]+)")
_IDENT_START = re.compile(r"[A-Za-z_\x80-\U0010ffff]")


class _PostgresDollarTokenizer(TokenizerCore):
    """sqlglot's tokenizer with `$` read as PostgreSQL reads it.

    Upstream takes everything up to the next `$` as a dollar-quote tag unless
    it is all digits, so `$1,$2` opened a string (`$1,$ ... `) that never
    closed. Here `$` followed by digits is a parameter (a PARAMETER token,
    then the number), `$tag$` / `$$` opens a dollar-quoted string closed by
    the same delimiter, and any other `$` is a syntax error, as in
    PostgreSQL (`$1abc` is its "trailing junk after parameter")."""

    __slots__ = ()

    def _scan_number(self) -> None:
        """A number run into a name (`1a`, `1_000`) is PostgreSQL's (15)
        "trailing junk after numeric literal", not a number and an alias."""
        at = self._start
        super()._scan_number()
        end = self._current
        if end < self.size and _IDENT_START.match(self.sql, end):
            raise TokenError(
                f'trailing junk after numeric literal at or near "{self.sql[at : end + 1]}"'
                f" from 1:{at}"
            )

    def _scan_string(self, start: str) -> bool:
        if start in ("e'", "E'"):
            text, end = scan_escape_string(self.sql, self._current + 1)
            body = self.sql[self._current + 1 : end - 1]
            self._advance(end - self._current)
            self._line += body.count("\n")
            self._add(TokenType.BYTE_STRING, text)
            return True
        if start != "$":
            return super()._scan_string(start)
        sql = self.sql
        at = self._current - 1
        parameter = _PARAMETER.match(sql, at)
        if parameter is not None:
            end = parameter.end()
            if end < self.size and _IDENT_START.match(sql, end):
                raise TokenError(
                    f'trailing junk after parameter at or near "{sql[at : end + 1]}" from 1:{at}'
                )
            self._add(TokenType.PARAMETER)
            self._start = self._current
            self._advance(end - self._current)
            self._add(TokenType.NUMBER)
            return True
        delimiter = _DOLLAR_DELIMITER.match(sql, at)
        if delimiter is None:
            raise TokenError(f'syntax error at or near "$" from 1:{at}')
        close = sql.find(delimiter.group(0), delimiter.end())
        if close < 0:
            raise TokenError(f"Missing {delimiter.group(0)} from 1:{at}")
        text = sql[delimiter.end() : close]
        self._advance(close + len(delimiter.group(0)) - self._current)
        self._line += text.count("\n")
        self._add(TokenType.HEREDOC_STRING, text)
        return True


class Tidemark(Materialize):
    """sqlglot dialect `tidemark`: Materialize plus the statements above."""

    # Subscripts stay as written (1-based, bound in sql/array_syntax.py):
    # sqlglot would shift integer-typed ones, and only those, to 0-based.
    INDEX_OFFSET = 0

    class Tokenizer(Materialize.Tokenizer):
        def _init_core(self) -> TokenizerCore:
            core = super()._init_core()
            core.__class__ = _PostgresDollarTokenizer  # same slots, PostgreSQL's `$`
            return core

        # EXPLAIN, DECLARE, RESET, SHOW and FETCH are COMMAND words upstream (the
        # rest of the statement becomes one string); as plain words or keywords our
        # parser can parse what follows them.
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            k: v
            for k, v in Materialize.Tokenizer.KEYWORDS.items()
            if k not in ("EXPLAIN", "DECLARE", "RESET")
        }
        COMMANDS: ClassVar[set[TokenType]] = Materialize.Tokenizer.COMMANDS - {
            TokenType.SHOW,
            TokenType.FETCH,
        }

    Parser = TidemarkParser
    Generator = TidemarkGenerator


def unqualified_call(call: exp.Anonymous) -> exp.Expr:
    """`pg_catalog.f(args)`'s call built as the parser builds `f(args)`:
    sqlglot parses a qualified call as a plain Anonymous, so `pg_catalog.abs`
    would not be `abs` (exp.Abs)."""
    name = str(call.this)
    builder = TidemarkParser.FUNCTIONS.get(name.upper())
    if builder is None:
        return call
    args = [arg.copy() for arg in call.expressions]
    try:
        node = builder(args)
    except TypeError:
        node = builder(args, dialect=Tidemark())
    if isinstance(node, exp.Expr):
        node.meta.update(call.meta)
        node.meta[WRITTEN_NAME] = name.lower()
        return node
    return call


_TOKEN_AT = re.compile(r"from (\d+):(\d+)")


def parse_sql(text: str) -> list[exp.Expr]:
    """Parse `text` (one or more `;`-separated statements) with the Tidemark
    dialect. Syntax errors become `ParseError` with a 1-based position."""
    try:
        statements = Tidemark().parse(text)
    except SqlglotParseError as error:
        raise _convert_parse_error(error, text) from None
    except TokenError as error:
        if isinstance(error.__cause__, SqlError):  # an escape string's own error
            raise error.__cause__ from None
        raise _convert_token_error(error, text) from None
    except RecursionError:
        raise too_deep() from None
    return [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]


def _convert_parse_error(error: SqlglotParseError, text: str) -> ParseError:
    info = error.errors[0] if error.errors else {}
    description = _user_description(info.get("description") or str(error))
    start = info.get("start")
    position = start + 1 if isinstance(start, int) else None
    near = info.get("highlight")
    # "Required keyword ... missing" at the last token (an operator or clause
    # keyword, not a closing one): the operand was missing at the end.
    missing = str(info.get("description", "")).startswith("Required keyword")
    after_last = (
        near
        and near.upper() not in ("END", ")")
        and position is not None
        and position - 1 + len(near) >= len(text.rstrip())
    )
    if position is not None and position > len(text.rstrip()):
        return ParseError("syntax error at end of input", position, detail=description)
    if missing and after_last:
        return ParseError("syntax error at end of input", len(text.rstrip()) + 1)
    if near:
        return ParseError(f'syntax error at or near "{near}"', position, detail=description)
    return ParseError(f"syntax error: {description}" if description else "syntax error", position)


# sqlglot's catch-all descriptions: they say no more than "syntax error"
# (PostgreSQL gives no detail there either).
_SAYS_NOTHING = frozenset({"Invalid expression / Unexpected token"})


def _user_description(description: str) -> str | None:
    """sqlglot's description of a syntax error, unless it names the parser's
    own classes (`Required keyword: 'this' missing for <class 'sqlglot...'>`),
    which mean nothing to a user, or says nothing."""
    if "<class" in description or "sqlglot" in description or description in _SAYS_NOTHING:
        return None
    return description


def _convert_token_error(error: TokenError, text: str) -> ParseError:
    cause = str(error.__cause__ or error)
    match = _TOKEN_AT.search(cause)
    position = None
    if match:
        offset = int(match.group(2))
        position = offset + 1 if 0 <= offset < len(text) else None
    if "Missing" in cause:
        return ParseError("unterminated quoted string or identifier", position, detail=cause)
    if cause.startswith(("trailing junk", "syntax error at or near")):
        return ParseError(cause[: cause.rindex(" from ")], position)
    return ParseError(f"syntax error: {cause}", position)


__all__ = [
    "AsOf",
    "CreateSource",
    "DefaultIndex",
    "Explain",
    "InCluster",
    "MzOption",
    "Tidemark",
    "TidemarkGenerator",
    "TidemarkParser",
    "WithOptions",
    "parse_sql",
]


def split_statements(text: str) -> list[str]:
    """The text of each statement in `text`, split at semicolons by the
    dialect's tokenizer (so quotes, comments and dollar quotes are handled
    as the parser handles them); empty and comment-only statements are
    dropped. A text the tokenizer cannot read is one statement (running it
    reports the error)."""
    try:
        tokens = Tidemark().tokenize(text)
    except TokenError:
        return [text.strip()] if text.strip() else []
    statements: list[str] = []
    first: Token | None = None
    last: Token | None = None
    depth = 0  # a semicolon inside parentheses (a continual task's body) splits nothing
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
        if token.token_type == TokenType.SEMICOLON and depth == 0:
            if first is not None and last is not None:
                statements.append(text[first.start : last.end + 1])
            first = last = None
            continue
        if first is None:
            first = token
        last = token
    if first is not None and last is not None:
        statements.append(text[first.start : last.end + 1])
    return statements
