"""Roles and privileges, in PostgreSQL's and Materialize's grammar:

    CREATE ROLE [IF NOT EXISTS] name [WITH] [LOGIN | NOLOGIN] [SUPERUSER | NOSUPERUSER]
                                            [[ENCRYPTED] PASSWORD 'text' | PASSWORD NULL]
    ALTER ROLE name [WITH] (the same options)
    DROP ROLE [IF EXISTS] name [, ...]
    GRANT { priv [, ...] | ALL [PRIVILEGES] } ON [TABLE | VIEW | MATERIALIZED VIEW | SOURCE
          | SECRET | SCHEMA | DATABASE] object [, ...] TO { role | PUBLIC } [, ...]
    REVOKE ... FROM ...

sqlglot parses some of these into nodes and others into a `Command`; both
are printed back and read here with the dialect's tokenizer. Privileges are
PostgreSQL's acl letters (r SELECT, a INSERT, w UPDATE, d DELETE, U USAGE,
C CREATE). A password never reaches the statement log (`redact`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.errors import (
    ParseError,
    SqlError,
    UnknownDatabase,
    UnknownSchema,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.plans import Plan

PRIVILEGE_LETTERS = {
    "SELECT": "r",
    "INSERT": "a",
    "UPDATE": "w",
    "DELETE": "d",
    "USAGE": "U",
    "CREATE": "C",
}
PRIVILEGE_NAMES = {letter: name for name, letter in PRIVILEGE_LETTERS.items()}
# What each kind of object can be granted (ALL means all of these).
APPLICABLE = {
    "table": "arwd",
    "view": "r",
    "materialized view": "r",
    "source": "r",
    "secret": "U",
    "schema": "UC",
    "database": "UC",
}
_ITEM_TYPES = {
    ItemKind.TABLE: "table",
    ItemKind.VIEW: "view",
    ItemKind.MATERIALIZED_VIEW: "materialized view",
    ItemKind.SOURCE: "source",
    ItemKind.SECRET: "secret",
}
PUBLIC = "public"


class InvalidGrant(SqlError):
    """PostgreSQL's invalid_grant_operation: a privilege the object cannot have."""

    code = "0LP01"


@dataclass(frozen=True)
class RoleAttributes:
    """Options of CREATE/ALTER ROLE; None: not said (CREATE: the default,
    ALTER: unchanged). `password` "" means PASSWORD NULL (remove it)."""

    login: bool | None = None
    superuser: bool | None = None
    password: str | None = None


@dataclass(frozen=True)
class CreateRolePlan(Plan):
    name: str
    attributes: RoleAttributes
    if_not_exists: bool = False


@dataclass(frozen=True)
class AlterRolePlan(Plan):
    name: str
    attributes: RoleAttributes


@dataclass(frozen=True)
class DropRolePlan(Plan):
    names: tuple[str, ...]
    if_exists: bool = False


@dataclass(frozen=True)
class PrivilegeTarget:
    """One object of a GRANT/REVOKE: `key` is how the acl names it
    (`item:u5`, `schema:db.s`, `database:db`), `display` how errors do."""

    key: str
    object_type: str
    display: str


@dataclass(frozen=True)
class GrantPlan(Plan):
    """GRANT (or, with `revoke`, REVOKE) `privileges` (acl letters)."""

    revoke: bool
    privileges: str
    targets: tuple[PrivilegeTarget, ...]
    roles: tuple[str, ...]


class _Tokens:
    def __init__(self, text: str) -> None:
        self.tokens: list[Token] = [
            t for t in Tidemark().tokenize(text) if t.token_type is not TokenType.SEMICOLON
        ]
        self.i = 0

    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def word(self, offset: int = 0) -> str | None:
        """The next token as an upper-case keyword (None for quoted names and strings)."""
        token = self.peek(offset)
        if token is None or token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
            return None
        return token.text.upper()

    def accept(self, *words: str) -> bool:
        if all(self.word(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def error(self, message: str) -> ParseError:
        token = self.peek()
        found = "end of input" if token is None else repr(token.text)
        position = None if token is None else token.start + 1
        return ParseError(f"{message}, found {found}", position)

    def name(self) -> str:
        token = self.peek()
        if token is None or token.token_type is TokenType.STRING:
            raise self.error("expected a name")
        self.i += 1
        return token.text if token.token_type is TokenType.IDENTIFIER else token.text.lower()

    def dotted(self) -> tuple[str, ...]:
        parts = [self.name()]
        while self.peek() is not None and self.peek().token_type is TokenType.DOT:  # type: ignore[union-attr]
            self.i += 1
            parts.append(self.name())
        return tuple(parts)

    def names(self, dotted: bool = False) -> list[tuple[str, ...]]:
        out = [self.dotted() if dotted else (self.name(),)]
        while self.peek() is not None and self.peek().token_type is TokenType.COMMA:  # type: ignore[union-attr]
            self.i += 1
            out.append(self.dotted() if dotted else (self.name(),))
        return out

    def string(self) -> str:
        token = self.peek()
        if token is None or token.token_type is not TokenType.STRING:
            raise self.error("expected a string")
        self.i += 1
        return token.text

    def end(self) -> None:
        if self.peek() is not None:
            raise self.error("expected end of statement")


def _attributes(tokens: _Tokens) -> RoleAttributes:
    login = superuser = password = None
    tokens.accept("WITH")
    while tokens.peek() is not None:
        if tokens.accept("LOGIN"):
            login = True
        elif tokens.accept("NOLOGIN"):
            login = False
        elif tokens.accept("SUPERUSER"):
            superuser = True
        elif tokens.accept("NOSUPERUSER"):
            superuser = False
        elif tokens.accept("ENCRYPTED", "PASSWORD") or tokens.accept("PASSWORD"):
            if tokens.accept("NULL"):
                password = ""
            else:
                password = tokens.string()
                if not password:
                    raise InvalidGrant("a password must not be empty; use PASSWORD NULL")
        else:
            raise tokens.error("expected LOGIN, NOLOGIN, SUPERUSER, NOSUPERUSER or PASSWORD")
    return RoleAttributes(login, superuser, password)


def _role_name(tokens: _Tokens) -> str:
    name = tokens.name()
    if name == PUBLIC or name.startswith(("mz_", "pg_")):
        raise InvalidGrant(f'role name "{name}" is reserved')
    return name


def plan_role_command(text: str, ctx: PlanContext) -> Plan:
    """CREATE ROLE / ALTER ROLE / DROP ROLE / GRANT / REVOKE from their text."""
    tokens = _Tokens(text)
    if tokens.accept("CREATE", "ROLE") or tokens.accept("CREATE", "USER"):
        if_not_exists = tokens.accept("IF", "NOT", "EXISTS")
        name = _role_name(tokens)
        return CreateRolePlan(name, _attributes(tokens), if_not_exists)
    if tokens.accept("ALTER", "ROLE") or tokens.accept("ALTER", "USER"):
        name = tokens.name()
        return AlterRolePlan(name, _attributes(tokens))
    if tokens.accept("DROP", "ROLE") or tokens.accept("DROP", "USER"):
        if_exists = tokens.accept("IF", "EXISTS")
        names = tuple(n[0] for n in tokens.names())
        tokens.end()
        return DropRolePlan(names, if_exists)
    revoke = tokens.accept("REVOKE")
    if not revoke:
        tokens.expect("GRANT")
    return _plan_grant(tokens, revoke, ctx)


def _plan_grant(tokens: _Tokens, revoke: bool, ctx: PlanContext) -> GrantPlan:
    letters = ""
    if tokens.accept("ALL"):
        tokens.accept("PRIVILEGES")
        letters = "*"
    else:
        while True:
            word = tokens.word()
            if word not in PRIVILEGE_LETTERS:
                raise tokens.error(
                    "expected a privilege (SELECT, INSERT, UPDATE, DELETE, USAGE, CREATE)"
                )
            tokens.i += 1
            letters += PRIVILEGE_LETTERS[word]
            if not (tokens.peek() is not None and tokens.peek().token_type is TokenType.COMMA):  # type: ignore[union-attr]
                break
            tokens.i += 1
    tokens.expect("ON")
    object_type = None
    for words in (
        ("MATERIALIZED", "VIEW"),
        ("TABLE",),
        ("VIEW",),
        ("SOURCE",),
        ("SECRET",),
        ("SCHEMA",),
        ("DATABASE",),
    ):
        if tokens.accept(*words):
            object_type = " ".join(words).lower()
            break
    if tokens.word() in ("CONNECTION", "CLUSTER", "TYPE", "SYSTEM"):
        raise UnsupportedFeature(f"privileges on {tokens.word()} objects are not supported")
    names = tokens.names(dotted=True)
    if revoke:
        tokens.expect("FROM")
    else:
        tokens.expect("TO")
    roles = tuple(n[0] for n in tokens.names())
    tokens.end()
    targets = tuple(_target(name, object_type, ctx) for name in names)
    if letters == "*":
        letters = APPLICABLE[targets[0].object_type]
    for target in targets:
        wrong = [PRIVILEGE_NAMES[c] for c in letters if c not in APPLICABLE[target.object_type]]
        if wrong:
            raise InvalidGrant(
                f"invalid privilege types {', '.join(wrong)} for {target.object_type.upper()}"
            )
    return GrantPlan(revoke, "".join(sorted(set(letters))), targets, roles)


def _target(name: tuple[str, ...], object_type: str | None, ctx: PlanContext) -> PrivilegeTarget:
    catalog = ctx.catalog
    if object_type == "database":
        if len(name) != 1 or not catalog.database_exists(name[0]):
            raise UnknownDatabase(f"unknown database '{'.'.join(name)}'")
        return PrivilegeTarget(f"database:{name[0]}", "database", name[0])
    if object_type == "schema":
        database, schema = (catalog.database, name[0]) if len(name) == 1 else name[-2:]
        if len(name) > 2 or not catalog.schema_exists(database, schema):
            raise UnknownSchema(f"unknown schema '{'.'.join(name)}'")
        return PrivilegeTarget(f"schema:{database}.{schema}", "schema", schema)
    item = ctx.resolve(name)
    actual = _ITEM_TYPES.get(item.kind)
    if actual is None or item.id.kind != "u":
        raise WrongObjectType(f"privileges cannot be granted on '{item.name}'")
    if object_type not in (None, actual) and not (object_type == "table" and actual != "secret"):
        raise WrongObjectType(f"'{item.name}' is not a {object_type}")
    return PrivilegeTarget(f"item:{item.id}", actual, item.name.item)


def role_statement_text(statement: exp.Expr) -> str | None:
    """The text of a role or privilege statement, or None for any other."""
    if isinstance(statement, exp.Grant | exp.Revoke):
        return statement.sql(dialect=Tidemark)
    if isinstance(statement, exp.Drop) and str(statement.args.get("kind") or "").upper() in (
        "ROLE",
        "USER",
    ):
        return statement.sql(dialect=Tidemark)
    if isinstance(statement, exp.Command):
        text = f"{statement.this} {statement.expression or ''}"
        words = text.split(None, 2)
        if words[0].upper() in ("GRANT", "REVOKE"):
            return text
        if (
            len(words) > 1
            and words[0].upper() in ("CREATE", "ALTER")
            and words[1].upper()
            in (
                "ROLE",
                "USER",
            )
        ):
            return text
    return None


_PASSWORD = re.compile(r"(PASSWORD\s+)'(?:[^']|'')*'", re.IGNORECASE)


def redact(text: str) -> str:
    """`text` with any password literal printed as '********' (statement logs)."""
    return _PASSWORD.sub(r"\1'********'", text)


__all__ = [
    "APPLICABLE",
    "PRIVILEGE_NAMES",
    "PUBLIC",
    "AlterRolePlan",
    "CreateRolePlan",
    "DropRolePlan",
    "GrantPlan",
    "InvalidGrant",
    "PrivilegeTarget",
    "RoleAttributes",
    "plan_role_command",
    "redact",
    "role_statement_text",
]
