"""Syntax of the session and catalog statements a coordinator runs besides
queries and CREATE/DROP: SHOW, SET/RESET, transactions, SUBSCRIBE, cursors,
COPY TO, ALTER ... RENAME/SET/RESET, in Materialize's grammar.

sqlglot 30 reads most of these as opaque `exp.Command`s (or not at all), so
`StatementParser` parses them into the nodes below, and `TRANSFORMS` prints
them back (the dialect round-trips them). `dialect.TidemarkParser` builds on
`StatementParser`; `_parse_session_statement` is its hook, called before
sqlglot's own statement parsers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.parsers.materialize import MaterializeParser
from sqlglot.tokens import Token, TokenType

from coordinator_lib.sql.errors import UnsupportedFeature

# --- syntax tree nodes ------------------------------------------------------------


class AsOf(exp.Expression):
    """`AS OF [AT LEAST] <expr>` at the end of a query or SUBSCRIBE."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "at_least": False}


class InCluster(exp.Property):
    """`IN CLUSTER <name>` of CREATE MATERIALIZED VIEW / INDEX / SOURCE and SHOW."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class MzOption(exp.Expression):
    """One `NAME WORDS [=] [FOR] value` item of a Materialize option list; `this`
    is the upper-cased name (e.g. "RETAIN HISTORY", "TICK INTERVAL")."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "value": False}


class CopyOption(exp.Expression):
    """One `NAME [value]` item of COPY's option list (PostgreSQL's form, no `=`)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "value": False}


class WithOptions(exp.Property):
    """`WITH (option, ...)` of CREATE MATERIALIZED VIEW / TABLE / INDEX / SOURCE."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": True}


class ShowObjects(exp.Expression):
    """`SHOW <kind> [FROM name] [ON relation] [IN CLUSTER c] [LIKE 'p' | WHERE e]`;
    `kind` is upper-case ("TABLES", "MATERIALIZED VIEWS", ...)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "kind": True,
        "from_": False,
        "on": False,
        "cluster": False,
        "like": False,
        "where": False,
    }


class ShowColumns(exp.Expression):
    """`SHOW COLUMNS FROM <relation>`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class ShowCreate(exp.Expression):
    """`SHOW CREATE <kind> <name>`; `kind` as in DROP ("MATERIALIZED VIEW", ...)."""

    arg_types: ClassVar[dict[str, bool]] = {"kind": True, "this": True}


class ShowVariable(exp.Expression):
    """`SHOW <variable>` / `SHOW ALL`; `this` is the lower-cased name."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class SetVariable(exp.Expression):
    """`SET [SESSION|LOCAL] <name> {=|TO} <value>, ... | DEFAULT`; `this` is the
    lower-cased name, `expressions` the values (none for DEFAULT)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "expressions": False,
        "local": False,
        "default": False,
        "spelling": False,  # "TIME ZONE", "NAMES", "SCHEMA": how the name was written
    }


class ResetVariable(exp.Expression):
    """`RESET <name>` / `RESET ALL`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class SetTransaction(exp.Expression):
    """`SET TRANSACTION <modes>` (this transaction) or `SET SESSION
    CHARACTERISTICS AS TRANSACTION <modes>` (`session`)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "isolation": False,
        "read_only": False,
        "session": False,
    }


class StartTransaction(exp.Expression):
    """`BEGIN [WORK|TRANSACTION] [modes]` / `START TRANSACTION [modes]`;
    `isolation` is lower-case ("strict serializable")."""

    arg_types: ClassVar[dict[str, bool]] = {"isolation": False, "read_only": False}


class CommitTransaction(exp.Expression):
    """`COMMIT [WORK|TRANSACTION]` / `END`."""

    arg_types: ClassVar[dict[str, bool]] = {}


class AbortTransaction(exp.Expression):
    """`ROLLBACK [WORK|TRANSACTION]` / `ABORT`."""

    arg_types: ClassVar[dict[str, bool]] = {}


class Subscribe(exp.Expression):
    """`SUBSCRIBE [TO] <name> | (<query>) [WITH (options)] [AS OF [AT LEAST] t]
    [UP TO t]`: `this` is an `exp.Table` or an `exp.Subquery`."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "options": False,
        "as_of": False,
        "up_to": False,
    }


class DeclareCursor(exp.Expression):
    """`DECLARE <name> CURSOR [WITH HOLD | WITHOUT HOLD] FOR <statement>`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True, "hold": False}


class FetchCursor(exp.Expression):
    """`FETCH [FORWARD] [<count> | ALL | NEXT] [FROM | IN] <cursor> [WITH (options)]`."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "count": False,
        "all": False,
        "options": False,
    }


class Savepoint(exp.Expression):
    """`SAVEPOINT s`, `RELEASE [SAVEPOINT] s`, `ROLLBACK TO [SAVEPOINT] s`
    (`action`: savepoint | release | rollback)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "action": True}


class CloseCursor(exp.Expression):
    """`CLOSE <cursor>`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class CopyTo(exp.Expression):
    """`COPY (<statement>) | <table> [(cols)] TO STDOUT [WITH] [(options)]`:
    `this` is the statement or the `exp.Table`; `options` are MzOptions with
    one-word names (FORMAT, HEADER, ...)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "columns": False,
        "options": False,
    }


class CopyFrom(exp.Expression):
    """`COPY <table> [(cols)] FROM STDIN [[WITH] (options) | legacy options]`:
    `options` are CopyOptions (FORMAT, HEADER, DELIMITER, NULL, QUOTE,
    ESCAPE); the legacy words `BINARY`, `CSV`, `HEADER`, `DELIMITER [AS] 'x'`,
    `NULL [AS] 'x'`, `QUOTE [AS] 'x'`, `ESCAPE [AS] 'x'` become the same."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "columns": False,
        "options": False,
    }


class ExplainTimestamp(exp.Expression):
    """`EXPLAIN TIMESTAMP [AS TEXT | AS JSON] FOR <statement>`."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "format": False}


class AlterObject(exp.Expression):
    """`ALTER <kind> [IF EXISTS] <name> RENAME TO <new> | SET (options) |
    RESET (options)`; exactly one of `rename`, `set`, `reset` is present."""

    arg_types: ClassVar[dict[str, bool]] = {
        "kind": True,
        "this": True,
        "exists": False,
        "rename": False,
        "set": False,
        "reset": False,
    }


# --- grammar ------------------------------------------------------------------------

# Longest first (MATERIALIZED VIEWS before VIEWS).
SHOW_LISTS: tuple[tuple[str, ...], ...] = (
    ("MATERIALIZED", "VIEWS"),
    ("CONTINUAL", "TASKS"),
    ("OBJECTS",),
    ("TABLES",),
    ("SOURCES",),
    ("SINKS",),
    ("VIEWS",),
    ("INDEXES",),
    ("SCHEMAS",),
    ("DATABASES",),
    ("CLUSTERS",),
    ("CONNECTIONS",),
    ("SECRETS",),
)

# SHOW lists Materialize has and Tidemark does not (no such objects here).
_UNSUPPORTED_SHOW: tuple[tuple[str, ...], ...] = (
    ("CLUSTER", "REPLICAS"),
    ("DEFAULT", "PRIVILEGES"),
    ("ROLE", "MEMBERSHIP"),
    ("NETWORK", "POLICIES"),
    ("SUBSOURCES",),
    ("ROLES",),
    ("TYPES",),
    ("PRIVILEGES",),
)

# The object kinds SHOW CREATE and ALTER name.
OBJECT_KINDS: tuple[tuple[str, ...], ...] = (
    ("MATERIALIZED", "VIEW"),
    ("CONTINUAL", "TASK"),
    ("TABLE",),
    ("VIEW",),
    ("SOURCE",),
    ("INDEX",),
    ("CONNECTION",),
)

ISOLATION_LEVELS: tuple[tuple[str, ...], ...] = (
    ("STRICT", "SERIALIZABLE"),
    ("SERIALIZABLE",),
    ("REPEATABLE", "READ"),
    ("READ", "COMMITTED"),
    ("READ", "UNCOMMITTED"),
)

# SET spellings PostgreSQL has for some variables.
_SET_SPELLINGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("TIME", "ZONE"), "timezone"),
    (("NAMES",), "client_encoding"),
    (("SCHEMA",), "search_path"),
)


# Tokens that end an option's name: what follows is its value or the next option.
_OPTION_NAME_STOP = {
    TokenType.COMMA,
    TokenType.R_PAREN,
    TokenType.EQ,
    TokenType.STRING,
    TokenType.NUMBER,
    TokenType.FOR,
    TokenType.DASH,
}


class StatementParser(MaterializeParser):
    """Materialize's parser plus the statements in the module docstring and the
    clauses Materialize statements share (options, IN CLUSTER, AS OF)."""

    # --- shared clauses -------------------------------------------------------

    def _parse_as_of(self) -> AsOf:
        start = self._prev
        at_least = self._match_text_seq("AT", "LEAST")
        value = self._parse_bitwise()
        if value is None:
            self.raise_error("Expecting a timestamp after AS OF")
        return self.expression(AsOf(this=value, at_least=at_least), start)

    def _parse_in_cluster(self) -> InCluster | None:
        if not self._match_text_seq("IN", "CLUSTER"):
            return None
        start = self._prev
        name = self._parse_id_var()
        if name is None:
            self.raise_error("Expecting a cluster name after IN CLUSTER")
        return self.expression(InCluster(this=name), start)

    def _parse_mz_options(self) -> list[MzOption]:
        self._match_l_paren()
        options = self._parse_csv(self._parse_mz_option)
        self._match_r_paren()
        return options  # type: ignore[return-value]

    def _parse_mz_option(self) -> MzOption | None:
        first = self._curr
        words: list[str] = []
        while self._curr and self._curr.token_type not in _OPTION_NAME_STOP:
            words.append(self._curr.text.upper())
            self._advance()
        if not words:
            self.raise_error("Expecting an option name")
        self._match(TokenType.EQ)
        self._match(TokenType.FOR)
        value = None
        if self._curr and self._curr.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
            value = self._parse_bitwise()
        return self.expression(MzOption(this=" ".join(words), value=value), first)

    # --- statements -------------------------------------------------------------

    def _parse_session_statement(self) -> exp.Expr | None:
        """The statement at the cursor if it is one of ours, else None (nothing consumed)."""
        curr = self._curr
        if curr is None or curr.token_type == TokenType.STRING:
            return None
        word = curr.text.upper()
        if word == "START" and not (self._next and self._next.text.upper() == "TRANSACTION"):
            return None
        handler = self._SESSION_STATEMENTS.get(word)
        if handler is None:
            return None
        self._advance()
        node = handler(self)
        if node is None:
            return None
        return self.expression(node, curr)

    # --- helpers ---------------------------------------------------------------

    def _unsupported(self, message: str, token: Token | None = None) -> None:
        """Valid Materialize syntax that Tidemark does not run (at `token`, else
        the last word read)."""
        token = token or self._prev or self._curr
        raise UnsupportedFeature(message, token.start + 1 if token is not None else None)

    def _match_words(self, choices: tuple[tuple[str, ...], ...]) -> str | None:
        for words in choices:
            if self._match_text_seq(*words):
                return " ".join(words)
        return None

    def _parse_object_name(self, what: str) -> exp.Table:
        if self._curr is None or self._curr.token_type == TokenType.STRING:
            self.raise_error(f"Expecting {what}")
        name = self._parse_table_parts(schema=True)
        if not isinstance(name, exp.Table):
            self.raise_error(f"Expecting {what}")
        return name

    def _parse_name(self, what: str, any_token: bool = False) -> exp.Identifier:
        if self._curr is None or self._curr.token_type == TokenType.STRING:
            self.raise_error(f"Expecting {what}")
        name = self._parse_id_var(any_token=any_token)
        if not isinstance(name, exp.Identifier):
            self.raise_error(f"Expecting {what}")
        return name  # type: ignore[return-value]

    def _parse_inner_statement(self) -> exp.Expr | None:
        """A statement inside another (DECLARE ... FOR, COPY (...), EXPLAIN),
        marked with where it starts (sqlglot marks only its leaves)."""
        first = self._curr
        statement = self._parse_statement()
        if statement is not None and first is not None and "start" not in statement.meta:
            statement.meta["start"] = first.start
        return statement

    def _parse_set_value(self) -> exp.Expr | None:
        """One SET value: a string, a (signed) number or a word (identifiers and
        keywords such as ON, TRUE)."""
        token = self._curr
        if token is None or token.token_type in (TokenType.COMMA, TokenType.R_PAREN):
            self.raise_error("Expecting a value")
            return None
        if token.token_type == TokenType.STRING:
            return self._parse_string()
        if token.token_type in (TokenType.DASH, TokenType.PLUS):
            self._advance()
            number = self._parse_number()
            if number is None:
                self.raise_error("Expecting a number")
                return None
            return exp.Neg(this=number) if token.token_type == TokenType.DASH else number
        if token.token_type == TokenType.NUMBER:
            return self._parse_number()
        name = self._parse_id_var(any_token=True)
        if name is None:
            self.raise_error("Expecting a value")
        return name

    def _parse_copy_option(self) -> exp.Expr | None:
        first = self._curr
        if first is None or first.token_type in (TokenType.COMMA, TokenType.R_PAREN):
            self.raise_error("Expecting an option name")
            return None
        self._advance()
        value = None
        if self._curr and self._curr.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
            value = self._parse_set_value()
        return self.expression(CopyOption(this=first.text.upper(), value=value), first)

    def _parse_transaction_modes(self) -> tuple[str | None, bool | None]:
        isolation: str | None = None
        read_only: bool | None = None
        while True:
            if self._match_text_seq("ISOLATION", "LEVEL"):
                level = self._match_words(ISOLATION_LEVELS)
                if level is None:
                    self.raise_error("Expecting an isolation level")
                isolation = (level or "").lower()
            elif self._match_text_seq("READ", "ONLY"):
                read_only = True
            elif self._match_text_seq("READ", "WRITE"):
                read_only = False
            elif not (
                self._match_text_seq("NOT", "DEFERRABLE") or self._match_text_seq("DEFERRABLE")
            ):
                return isolation, read_only
            self._match(TokenType.COMMA)

    # --- SHOW ----------------------------------------------------------------

    def _parse_show_statement(self) -> exp.Expr | None:
        first = self._curr
        if self._match(TokenType.CREATE):
            kind = self._match_words(OBJECT_KINDS)
            if kind is None and self._match_texts(("SINK", "CONNECTION", "CLUSTER", "TYPE")):
                self._unsupported(f"SHOW CREATE {self._prev.text.upper()} is not supported", first)
            if kind is None:
                self.raise_error("Expecting TABLE, VIEW, MATERIALIZED VIEW, SOURCE or INDEX")
            return ShowCreate(kind=kind, this=self._parse_object_name("a name"))
        if self._match_text_seq("COLUMNS"):
            if not (self._match(TokenType.FROM) or self._match(TokenType.IN)):
                self.raise_error("Expecting FROM")
            return ShowColumns(this=self._parse_object_name("a relation name"))
        kind = self._match_words(SHOW_LISTS)
        if kind is not None:
            return self._parse_show_objects(kind)
        unsupported = self._match_words(_UNSUPPORTED_SHOW)
        if unsupported is not None:
            self._unsupported(f"SHOW {unsupported} is not supported", first)
        if self._match_text_seq("TRANSACTION", "ISOLATION", "LEVEL"):
            return ShowVariable(this="transaction_isolation")
        if self._match_text_seq("TIME", "ZONE"):
            return ShowVariable(this="timezone")
        if self._match(TokenType.ALL):
            return ShowVariable(this="all")
        name = self._parse_name("a variable name or one of TABLES, VIEWS, ...", any_token=True)
        return ShowVariable(this=name.name.lower())

    def _parse_show_objects(self, kind: str) -> ShowObjects:
        from_ = None
        on = None
        if self._match(TokenType.FROM):
            from_ = self._parse_object_name("a schema or database name")
        if kind == "INDEXES" and from_ is None and self._match(TokenType.ON):
            on = self._parse_object_name("a relation name")
        cluster = self._parse_in_cluster()
        like = None
        where = None
        if self._match(TokenType.LIKE):
            like = self._parse_string()
            if not (isinstance(like, exp.Literal) and like.is_string):
                self.raise_error("Expecting a string after LIKE")
        elif self._match(TokenType.WHERE):
            where = self._parse_disjunction()
        return ShowObjects(kind=kind, from_=from_, on=on, cluster=cluster, like=like, where=where)

    # --- SET / RESET ------------------------------------------------------------

    def _parse_set_statement(self) -> exp.Expr | None:
        if self._match_text_seq("SESSION", "CHARACTERISTICS", "AS", "TRANSACTION"):
            isolation, read_only = self._parse_transaction_modes()
            return SetTransaction(isolation=isolation, read_only=read_only, session=True)
        local = bool(self._match_text_seq("LOCAL"))
        if not local:
            self._match_text_seq("SESSION")
        if not local and self._match_text_seq("TRANSACTION"):
            isolation, read_only = self._parse_transaction_modes()
            if isolation is None and read_only is None:
                self.raise_error("Expecting ISOLATION LEVEL, READ ONLY or READ WRITE")
            return SetTransaction(isolation=isolation, read_only=read_only, session=False)
        spelling = None
        for words, variable in _SET_SPELLINGS:
            index = self._index
            if self._match_text_seq(*words):
                if self._match(TokenType.EQ, advance=False) or self._match_text_seq(
                    "TO", advance=False
                ):
                    self._retreat(index)  # `SET schema = x`: a plain variable name
                    continue
                name, spelling = variable, " ".join(words)
                break
        else:
            name = self._parse_name("a variable name", any_token=True).name.lower()
            if not (self._match(TokenType.EQ) or self._match_text_seq("TO")):
                self.raise_error("Expecting = or TO")
        if self._match(TokenType.DEFAULT) or (
            spelling == "TIME ZONE" and self._match_text_seq("LOCAL")
        ):
            return SetVariable(this=name, local=local, default=True, spelling=spelling)
        values = self._parse_csv(self._parse_set_value)
        return SetVariable(this=name, expressions=values, local=local, spelling=spelling)

    def _parse_reset_statement(self) -> exp.Expr | None:
        if self._match(TokenType.ALL):
            return ResetVariable(this="all")
        return ResetVariable(this=self._parse_name("a variable name", any_token=True).name.lower())

    # --- transactions -------------------------------------------------------------

    def _parse_begin_statement(self) -> exp.Expr | None:
        self._match_texts(("WORK", "TRANSACTION"))
        isolation, read_only = self._parse_transaction_modes()
        return StartTransaction(isolation=isolation, read_only=read_only)

    def _parse_start_statement(self) -> exp.Expr | None:
        self._match_text_seq("TRANSACTION")
        isolation, read_only = self._parse_transaction_modes()
        return StartTransaction(isolation=isolation, read_only=read_only)

    def _parse_chain(self) -> None:
        if self._match_text_seq("AND", "NO", "CHAIN"):
            return
        if self._match_text_seq("AND", "CHAIN"):
            self._unsupported("AND CHAIN is not supported")

    def _parse_commit_statement(self) -> exp.Expr | None:
        self._match_texts(("WORK", "TRANSACTION"))
        self._parse_chain()
        return CommitTransaction()

    def _parse_rollback_statement(self) -> exp.Expr | None:
        self._match_texts(("WORK", "TRANSACTION"))
        if self._match_text_seq("TO"):
            self._match_text_seq("SAVEPOINT")
            return Savepoint(this=self._parse_name("a savepoint name"), action="rollback")
        self._parse_chain()
        return AbortTransaction()

    # --- SUBSCRIBE, cursors, COPY ----------------------------------------------------

    def _parse_subscribe_statement(self) -> exp.Expr | None:
        self._match_text_seq("TO")
        this: exp.Expr
        if self._match(TokenType.L_PAREN):
            first = self._curr
            query = self._parse_inner_statement()
            if not isinstance(query, exp.Query):
                self.raise_error("Expecting a SELECT query in SUBSCRIBE (...)", first)
            self._match_r_paren()
            this = exp.Subquery(this=query)
        else:
            this = self._parse_object_name("a relation name or (SELECT ...)")
        if self._match_text_seq("ENVELOPE"):
            self._unsupported("SUBSCRIBE ... ENVELOPE is not supported")
        if self._match_text_seq("WITHIN", "TIMESTAMP"):
            self._unsupported("SUBSCRIBE ... WITHIN TIMESTAMP ORDER BY is not supported")
        options = self._parse_mz_options() if self._match(TokenType.WITH) else []
        as_of = self._parse_as_of() if self._match_text_seq("AS", "OF") else None
        up_to = None
        if self._match_text_seq("UP", "TO"):
            up_to = self._parse_bitwise()
            if up_to is None:
                self.raise_error("Expecting a timestamp after UP TO")
        return Subscribe(this=this, options=options, as_of=as_of, up_to=up_to)

    def _parse_declare_statement(self) -> exp.Expr | None:
        name = self._parse_name("a cursor name")
        if not self._match_text_seq("CURSOR"):
            self.raise_error("Expecting CURSOR")
        hold = None
        if self._match_text_seq("WITH", "HOLD"):
            hold = True
        elif self._match_text_seq("WITHOUT", "HOLD"):
            hold = False
        if not self._match(TokenType.FOR):
            self.raise_error("Expecting FOR")
        statement = self._parse_inner_statement()
        if statement is None:
            self.raise_error("Expecting a SELECT or SUBSCRIBE")
        return DeclareCursor(this=name, expression=statement, hold=hold)

    def _parse_fetch_statement(self) -> exp.Expr | None:
        for direction in ("BACKWARD", "PRIOR", "FIRST", "LAST", "ABSOLUTE", "RELATIVE"):
            if self._match_text_seq(direction):
                self._unsupported(f"FETCH {direction} is not supported (cursors only go forward)")
        self._match_text_seq("FORWARD")
        count = None
        fetch_all = False
        if self._match(TokenType.ALL):
            fetch_all = True
        elif self._match_text_seq("NEXT"):
            count = exp.Literal.number(1)
        elif self._curr is not None and self._curr.token_type == TokenType.NUMBER:
            count = self._parse_number()
        self._match_set((TokenType.FROM, TokenType.IN))
        name = self._parse_name("a cursor name")
        options = self._parse_mz_options() if self._match(TokenType.WITH) else []
        return FetchCursor(this=name, count=count, all=fetch_all, options=options)

    def _parse_savepoint_statement(self) -> exp.Expr | None:
        return Savepoint(this=self._parse_name("a savepoint name"), action="savepoint")

    def _parse_release_statement(self) -> exp.Expr | None:
        self._match_text_seq("SAVEPOINT")
        return Savepoint(this=self._parse_name("a savepoint name"), action="release")

    def _parse_close_statement(self) -> exp.Expr | None:
        if self._match(TokenType.ALL):
            self._unsupported("CLOSE ALL is not supported")
        return CloseCursor(this=self._parse_name("a cursor name"))

    def _parse_copy_statement(self) -> exp.Expr | None:
        columns: list[exp.Expr] = []
        this: exp.Expr | None
        if self._match(TokenType.L_PAREN):
            this = self._parse_inner_statement()
            if this is None:
                self.raise_error("Expecting a SELECT or SUBSCRIBE")
            self._match_r_paren()
        else:
            this = self._parse_object_name("a table name or (SELECT ...)")
            if self._match(TokenType.L_PAREN, advance=False):
                columns = self._parse_wrapped_id_vars()
        if self._match(TokenType.FROM):
            if not isinstance(this, exp.Table):
                self.raise_error("COPY (query) FROM is not valid: name a table")
            if not self._match_text_seq("STDIN"):
                self._unsupported("COPY ... FROM is only supported FROM STDIN", self._curr)
            return CopyFrom(this=this, columns=columns, options=self._parse_copy_from_options())
        if not self._match_text_seq("TO"):
            self.raise_error("Expecting TO STDOUT")
        if not self._match_text_seq("STDOUT"):
            self._unsupported("COPY ... TO is only supported TO STDOUT", self._curr)
        self._match(TokenType.WITH)
        options: list[exp.Expr] = []
        if self._match(TokenType.L_PAREN):
            options = self._parse_csv(self._parse_copy_option)
            self._match_r_paren()
        return CopyTo(this=this, columns=columns, options=options)

    def _parse_copy_from_options(self) -> list[exp.Expr]:
        self._match(TokenType.WITH)
        if self._match(TokenType.L_PAREN):
            options = self._parse_csv(self._parse_copy_option)
            self._match_r_paren()
            return options
        options = []
        while self._curr and self._curr.token_type != TokenType.SEMICOLON:
            word = self._curr
            name = word.text.upper()
            self._advance()
            if name in ("BINARY", "CSV"):
                value = exp.Literal.string(name.lower())
                options.append(self.expression(CopyOption(this="FORMAT", value=value), word))
            elif name == "HEADER":
                options.append(self.expression(CopyOption(this="HEADER"), word))
            elif name in ("DELIMITER", "NULL", "QUOTE", "ESCAPE"):
                self._match(TokenType.ALIAS)
                value = self._parse_set_value()
                options.append(self.expression(CopyOption(this=name, value=value), word))
            else:
                self.raise_error(f"unknown COPY option {word.text}", word)
        return options

    # --- ALTER ---------------------------------------------------------------------

    def _parse_alter(self) -> exp.Expr:  # type: ignore[override]
        start = self._prev
        index = self._index
        kind = self._match_words(OBJECT_KINDS)
        if kind is not None:
            exists = self._parse_exists()
            name = self._parse_object_name("a name")
            if self._match_text_seq("RENAME", "TO"):
                new = self._parse_name("the new name")
                node = AlterObject(kind=kind, this=name, exists=exists, rename=new)
                return self.expression(node, start)
            if self._match(TokenType.SET) and self._match(TokenType.L_PAREN, advance=False):
                options = self._parse_mz_options()
                node = AlterObject(kind=kind, this=name, exists=exists, set=options)
                return self.expression(node, start)
            if self._match_text_seq("RESET") and self._match(TokenType.L_PAREN, advance=False):
                options = self._parse_mz_options()
                node = AlterObject(kind=kind, this=name, exists=exists, reset=options)
                return self.expression(node, start)
        self._retreat(index)
        return super()._parse_alter()

    _SESSION_STATEMENTS: ClassVar[dict[str, Callable[[Any], exp.Expr | None]]] = {
        "SHOW": _parse_show_statement,
        "SET": _parse_set_statement,
        "RESET": _parse_reset_statement,
        "BEGIN": _parse_begin_statement,
        "START": _parse_start_statement,
        "COMMIT": _parse_commit_statement,
        "END": _parse_commit_statement,
        "ROLLBACK": _parse_rollback_statement,
        "ABORT": _parse_rollback_statement,
        "SUBSCRIBE": _parse_subscribe_statement,
        "DECLARE": _parse_declare_statement,
        "FETCH": _parse_fetch_statement,
        "CLOSE": _parse_close_statement,
        "SAVEPOINT": _parse_savepoint_statement,
        "RELEASE": _parse_release_statement,
        "COPY": _parse_copy_statement,
    }


# --- printing ----------------------------------------------------------------------


def _isolation_modes(g: Any, e: exp.Expr) -> str:
    modes = []
    if e.args.get("isolation"):
        modes.append(f"ISOLATION LEVEL {e.args['isolation'].upper()}")
    read_only = e.args.get("read_only")
    if read_only is not None:
        modes.append("READ ONLY" if read_only else "READ WRITE")
    return ", ".join(modes)


def _show_objects_sql(g: Any, e: exp.Expr) -> str:
    parts = [f"SHOW {e.args['kind']}"]
    if e.args.get("from_"):
        parts.append(f"FROM {g.sql(e, 'from_')}")
    if e.args.get("on"):
        parts.append(f"ON {g.sql(e, 'on')}")
    if e.args.get("cluster"):
        parts.append(g.sql(e, "cluster"))
    if e.args.get("like"):
        parts.append(f"LIKE {g.sql(e, 'like')}")
    if e.args.get("where"):
        parts.append(f"WHERE {g.sql(e, 'where')}")
    return " ".join(parts)


def _set_variable_sql(g: Any, e: exp.Expr) -> str:
    local = "LOCAL " if e.args.get("local") else ""
    spelling = e.args.get("spelling")
    head = f"SET {local}{spelling or e.name}"
    value = "DEFAULT" if e.args.get("default") else g.expressions(e, flat=True)
    return f"{head} {value}" if spelling else f"{head} = {value}"


def _set_transaction_sql(g: Any, e: exp.Expr) -> str:
    head = (
        "SET SESSION CHARACTERISTICS AS TRANSACTION"
        if e.args.get("session")
        else ("SET TRANSACTION")
    )
    return f"{head} {_isolation_modes(g, e)}"


def _start_transaction_sql(g: Any, e: exp.Expr) -> str:
    modes = _isolation_modes(g, e)
    return f"START TRANSACTION {modes}" if modes else "BEGIN"


def _subscribe_sql(g: Any, e: exp.Expr) -> str:
    parts = [f"SUBSCRIBE {g.sql(e, 'this')}"]
    if e.args.get("options"):
        parts.append(f"WITH ({g.expressions(e, key='options', flat=True)})")
    if e.args.get("as_of"):
        parts.append(g.sql(e, "as_of"))
    if e.args.get("up_to"):
        parts.append(f"UP TO {g.sql(e, 'up_to')}")
    return " ".join(parts)


def _declare_sql(g: Any, e: exp.Expr) -> str:
    hold = e.args.get("hold")
    hold_sql = "" if hold is None else (" WITH HOLD" if hold else " WITHOUT HOLD")
    return f"DECLARE {g.sql(e, 'this')} CURSOR{hold_sql} FOR {g.sql(e, 'expression')}"


def _fetch_sql(g: Any, e: exp.Expr) -> str:
    count = "ALL " if e.args.get("all") else ""
    if e.args.get("count") is not None:
        count = f"{g.sql(e, 'count')} "
    options = g.expressions(e, key="options", flat=True)
    with_sql = f" WITH ({options})" if options else ""
    return f"FETCH {count}{g.sql(e, 'this')}{with_sql}"


def _copy_sql(g: Any, e: exp.Expr) -> str:
    this = e.this
    target = g.sql(this) if isinstance(this, exp.Table) else f"({g.sql(this)})"
    columns = g.expressions(e, key="columns", flat=True)
    columns_sql = f" ({columns})" if columns else ""
    options = g.expressions(e, key="options", flat=True)
    with_sql = f" WITH ({options})" if options else ""
    return f"COPY {target}{columns_sql} TO STDOUT{with_sql}"


def _copy_from_sql(g: Any, e: exp.Expr) -> str:
    columns = g.expressions(e, key="columns", flat=True)
    columns_sql = f" ({columns})" if columns else ""
    options = g.expressions(e, key="options", flat=True)
    with_sql = f" WITH ({options})" if options else ""
    return f"COPY {g.sql(e, 'this')}{columns_sql} FROM STDIN{with_sql}"


def _alter_sql(g: Any, e: exp.Expr) -> str:
    exists = " IF EXISTS" if e.args.get("exists") else ""
    head = f"ALTER {e.args['kind']}{exists} {g.sql(e, 'this')}"
    if e.args.get("rename"):
        return f"{head} RENAME TO {g.sql(e, 'rename')}"
    if e.args.get("set"):
        return f"{head} SET ({g.expressions(e, key='set', flat=True)})"
    return f"{head} RESET ({g.expressions(e, key='reset', flat=True)})"


TRANSFORMS: dict[type[exp.Expr], Callable[[Any, Any], str]] = {
    ShowObjects: _show_objects_sql,
    ShowColumns: lambda g, e: f"SHOW COLUMNS FROM {g.sql(e, 'this')}",
    ShowCreate: lambda g, e: f"SHOW CREATE {e.args['kind']} {g.sql(e, 'this')}",
    ShowVariable: lambda g, e: f"SHOW {e.name}",
    SetVariable: _set_variable_sql,
    ResetVariable: lambda g, e: f"RESET {e.name}",
    SetTransaction: _set_transaction_sql,
    StartTransaction: _start_transaction_sql,
    CommitTransaction: lambda g, e: "COMMIT",
    AbortTransaction: lambda g, e: "ROLLBACK",
    Subscribe: _subscribe_sql,
    DeclareCursor: _declare_sql,
    FetchCursor: _fetch_sql,
    CloseCursor: lambda g, e: f"CLOSE {g.sql(e, 'this')}",
    Savepoint: lambda g, e: (
        {
            "savepoint": "SAVEPOINT",
            "release": "RELEASE SAVEPOINT",
            "rollback": "ROLLBACK TO SAVEPOINT",
        }[e.args["action"]]
        + f" {g.sql(e, 'this')}"
    ),
    CopyTo: _copy_sql,
    CopyFrom: _copy_from_sql,
    CopyOption: lambda g, e: (
        f"{e.name} {g.sql(e, 'value')}" if e.args.get("value") is not None else e.name
    ),
    ExplainTimestamp: lambda g, e: (
        f"EXPLAIN TIMESTAMP AS {e.args.get('format') or 'TEXT'} FOR {g.sql(e, 'this')}"
    ),
    AlterObject: _alter_sql,
}


__all__ = [
    "ISOLATION_LEVELS",
    "OBJECT_KINDS",
    "SHOW_LISTS",
    "TRANSFORMS",
    "AbortTransaction",
    "AlterObject",
    "AsOf",
    "CloseCursor",
    "CommitTransaction",
    "CopyFrom",
    "CopyOption",
    "CopyTo",
    "DeclareCursor",
    "ExplainTimestamp",
    "FetchCursor",
    "InCluster",
    "MzOption",
    "ResetVariable",
    "Savepoint",
    "SetTransaction",
    "SetVariable",
    "ShowColumns",
    "ShowCreate",
    "ShowObjects",
    "ShowVariable",
    "StartTransaction",
    "StatementParser",
    "Subscribe",
    "WithOptions",
]
