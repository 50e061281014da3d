"""Per-connection state: configuration variables, the transaction, cursors.

Variables follow Materialize's names and defaults; SET checks the name and
the value, SHOW prints them as PostgreSQL does. A transaction is either a
read transaction (every read at the timestamp the first one chose, with read
holds keeping it readable) or a write-only transaction on tables (writes
buffered, appended at COMMIT in one group commit).
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.errors import InvalidParameterValue, UnknownVariable
from coordinator_lib.compute.budget import format_bytes, physical_memory
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.sql.coercion import parse_interval_ms

if TYPE_CHECKING:
    from coordinator_lib.adapter.cursor import Cursor
    from coordinator_lib.adapter.statement_log import StatementRecord
    from coordinator_lib.storage import ReadHold

STRICT_SERIALIZABLE = "strict serializable"
SERIALIZABLE = "serializable"
_ISOLATION_ALIASES = {
    "strict serializable": STRICT_SERIALIZABLE,
    "serializable": SERIALIZABLE,
    # PostgreSQL's weaker levels run as serializable, as in Materialize.
    "repeatable read": SERIALIZABLE,
    "read committed": SERIALIZABLE,
    "read uncommitted": SERIALIZABLE,
}


def _isolation(value: str) -> str:
    try:
        return _ISOLATION_ALIASES[value.lower()]
    except KeyError:
        raise InvalidParameterValue(
            f'invalid value for parameter "transaction_isolation": "{value}"',
            hint="Available values: strict serializable, serializable.",
        ) from None


def _timeout(value: str) -> str:
    """statement_timeout: milliseconds, or an interval ('10s', '1 minute')."""
    text = value.strip()
    try:
        ms = int(text) if re.fullmatch(r"\d+", text) else parse_interval_ms(text)
    except Exception:
        raise InvalidParameterValue(
            f'invalid value for parameter "statement_timeout": "{value}"'
        ) from None
    return f"{ms}ms" if ms else "0"


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}


def _parse_bytes(value: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _BYTE_UNITS or int(match.group(1)) <= 0:
        raise InvalidParameterValue(
            f'invalid value for parameter "max_query_memory": "{value}"',
            hint="A positive size in bytes, or with a unit: '512MB', '2GB'.",
        )
    return int(match.group(1)) * _BYTE_UNITS[unit]


def _memory(value: str) -> str:
    """max_query_memory: a size ('512MB', '2GB', bytes), printed back in
    the largest unit that divides it."""
    return format_bytes(_parse_bytes(value))


# An eighth of the machine: a few runaway queries at once still leave room.
DEFAULT_QUERY_MEMORY = format_bytes(physical_memory() // 8 >> 20 << 20)


def _one_of(name: str, allowed: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value.lower().replace("-", "") not in {a.lower().replace("-", "") for a in allowed}:
            raise InvalidParameterValue(
                f'invalid value for parameter "{name}": "{value}"',
                hint=f"Available values: {', '.join(allowed)}.",
            )
        return allowed[0] if len(allowed) == 1 else value

    return check


def _any(value: str) -> str:
    return value


def _search_path(value: str) -> str:
    return ", ".join(p.strip().strip('"') for p in value.split(",") if p.strip())


@dataclass(frozen=True)
class Var:
    default: str
    check: Callable[[str], str] = _any
    read_only: bool = False
    report: bool = False  # sent as ParameterStatus at startup


VARS: dict[str, Var] = {
    "application_name": Var("", report=True),
    "client_encoding": Var("UTF8", _one_of("client_encoding", ("UTF8",)), report=True),
    "client_min_messages": Var("notice"),
    "cluster": Var("quickstart"),
    "database": Var("materialize"),
    "datestyle": Var("ISO, MDY", _one_of("DateStyle", ("ISO, MDY",)), report=True),
    "extra_float_digits": Var("3"),
    "idle_in_transaction_session_timeout": Var("0"),
    "integer_datetimes": Var("on", read_only=True, report=True),
    "intervalstyle": Var("postgres", report=True),
    "is_superuser": Var("off", read_only=True, report=True),
    "search_path": Var("public", _search_path),
    "server_encoding": Var("UTF8", read_only=True, report=True),
    "server_version": Var("9.5.0", read_only=True, report=True),
    "server_version_num": Var("90500", read_only=True),
    "standard_conforming_strings": Var(
        "on", _one_of("standard_conforming_strings", ("on",)), report=True
    ),
    "statement_timeout": Var("0", _timeout),
    "timezone": Var("UTC", _one_of("TimeZone", ("UTC",)), report=True),
    "transaction_isolation": Var(STRICT_SERIALIZABLE, _isolation),
    "transaction_read_only": Var("off", _one_of("transaction_read_only", ("off", "on"))),
    "mz_version": Var("tidemark 0.1.0", read_only=True),
    "max_query_memory": Var(DEFAULT_QUERY_MEMORY, _memory),
}
_ALIASES = {
    "time zone": "timezone",
    "transaction isolation": "transaction_isolation",
    "schema": "search_path",
    "names": "client_encoding",
}

_next_session = itertools.count(1)


class TransactionStatus(StrEnum):
    """pgwire's ReadyForQuery status."""

    IDLE = "I"
    IN_TRANSACTION = "T"
    FAILED = "E"


@dataclass
class Transaction:
    """An explicit transaction (BEGIN ... COMMIT). `timestamp` is fixed by the
    first read; `writes` buffers table writes until COMMIT."""

    isolation: str
    read_only: bool = False
    timestamp: int | None = None
    holds: list[ReadHold] = field(default_factory=list)
    writes: dict[GlobalId, list[tuple[tuple[Any, ...], int]]] = field(default_factory=dict)
    failed: bool = False
    # name -> how many buffered rows each table had when it was set
    savepoints: dict[str, dict[GlobalId, int]] = field(default_factory=dict)
    # now() in the transaction: the system clock when it began (seconds)
    wall_time: float = field(default_factory=time.time)

    def release(self) -> None:
        for hold in self.holds:
            hold.release()
        self.holds.clear()


class Session:
    def __init__(self, user: str, database: str, internal: bool = False) -> None:
        self.id = next(_next_session)
        self.secret_key = random.getrandbits(31)
        self.user = user
        # Opened in-process (Dagster, project loading): a superuser, never authenticated.
        self.internal = internal
        self.connected_at = time.time()
        self.vars: dict[str, str] = {}
        self.vars["database"] = database
        self.transaction: Transaction | None = None
        self.cursors: dict[str, Cursor] = {}
        self.statement: StatementRecord | None = None  # the one running now

    # ---------------------------------------------------------- variables
    @staticmethod
    def canonical(name: str) -> str:
        key = name.lower().strip()
        key = _ALIASES.get(key, key)
        if key not in VARS:
            raise UnknownVariable(f'unrecognized configuration parameter "{name}"')
        return key

    def get(self, name: str) -> str:
        key = self.canonical(name)
        return self.vars.get(key, VARS[key].default)

    def set(self, name: str, value: str | None) -> None:
        key = self.canonical(name)
        var = VARS[key]
        if var.read_only:
            raise InvalidParameterValue(f'parameter "{key}" cannot be changed', code="55P02")
        if value is None:
            self.vars.pop(key, None)
        else:
            self.vars[key] = var.check(value)

    def reset_all(self) -> None:
        """RESET ALL: every variable back to its default (the database stays)."""
        self.vars = {"database": self.database}

    def all_vars(self) -> list[tuple[str, str]]:
        return [(name, self.get(name)) for name in sorted(VARS)]

    def parameter_status(self) -> dict[str, str]:
        names = {"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}
        return {names.get(k, k): self.get(k) for k, v in VARS.items() if v.report}

    @property
    def database(self) -> str:
        return self.get("database")

    @property
    def search_path(self) -> tuple[str, ...]:
        return tuple(p.strip() for p in self.get("search_path").split(",") if p.strip())

    @property
    def isolation(self) -> str:
        if self.transaction is not None:
            return self.transaction.isolation
        return self.get("transaction_isolation")

    @property
    def statement_timeout_ms(self) -> int:
        value = self.get("statement_timeout")
        return 0 if value == "0" else int(value.removesuffix("ms"))

    @property
    def max_query_memory(self) -> int:
        return _parse_bytes(self.get("max_query_memory"))

    @property
    def status(self) -> TransactionStatus:
        if self.transaction is None:
            return TransactionStatus.IDLE
        if self.transaction.failed:
            return TransactionStatus.FAILED
        return TransactionStatus.IN_TRANSACTION
