"""What the coordinator answers when a statement fails or has something to say.

Every error and notice carries a PostgreSQL SQLSTATE, because the servers send
it on as is: pgwire's ErrorResponse / NoticeResponse fields and the HTTP API's
`{"error": {"message", "code", ...}}`. Errors from the SQL layer (parse, plan)
become AdapterErrors keeping their code and position (`from_sql_error`), and
evaluation errors their SQLSTATE (`from_eval_error`).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.sql.errors import SqlError, error_text


class AdapterError(Exception):
    """A statement failed. `position` is 1-based into the statement text."""

    code = "XX000"
    severity = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        position: int | None = None,
        detail: str | None = None,
        hint: str | None = None,
        context: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.position = position
        self.detail = detail
        self.hint = hint
        self.context = context  # where it happened (pgwire's CONTEXT: "COPY t, line 3")

    def __str__(self) -> str:
        return error_text(self.message, self.position, self.detail, self.hint)

    @staticmethod
    def from_sql_error(error: SqlError) -> AdapterError:
        return AdapterError(
            error.message,
            code=error.code,
            position=error.position,
            detail=error.detail,
            hint=error.hint,
        )

    @staticmethod
    def from_eval_error(error: EvalError) -> AdapterError:
        """A runtime error evaluating a query (division by zero, overflow)
        with its SQLSTATE, as PostgreSQL reports it."""
        return AdapterError(error.message, code=error.code)


class InvalidTimestamp(AdapterError):
    """No time is readable for every input (or AS OF names one that is not,
    or a transaction's time is no longer readable for an input it had not
    read yet): the history asked for was compacted. PostgreSQL's
    snapshot_too_old, a refusal of the request, not an internal error."""

    code = "72000"


class ReadBeforeSince(InvalidTimestamp):
    pass


class DependencyDropped(AdapterError):
    """A relation a read was reading was dropped under it (Materialize's
    ConcurrentDependencyDrop): undefined_table, as if it had been gone when
    the statement was planned."""

    code = "42P01"


class QueryCanceled(AdapterError):
    """Canceled by a cancel request or statement_timeout (query_canceled)."""

    code = "57014"


class UnknownCursor(AdapterError):
    code = "34000"


class InvalidTransactionState(AdapterError):
    """A statement that the current transaction cannot run (25000 family)."""

    code = "25000"


class RelationOutsideTimeDomain(InvalidTransactionState):
    """A read in a transaction of a collection outside the time domain its
    first read fixed (Materialize's same-timedomain error): the domain is
    held at the transaction's time, nothing else is, so such a read might
    find that time compacted away, and is refused always instead."""

    def __init__(self, outside: list[str], available: list[str]) -> None:
        listed = "\n".join(available)
        super().__init__(
            "Transactions can only reference objects in the same timedomain. "
            "See https://materialize.com/docs/sql/begin/#same-timedomain-error",
            detail=(
                "The following relations in the query are outside the transaction's time domain:\n"
                + "\n".join(outside)
                + "\n"
                + (
                    f"Only the following relations are available:\n{listed}"
                    if available
                    else "No relations are available."
                )
            ),
        )


class InFailedTransaction(AdapterError):
    code = "25P02"


class InvalidPassword(AdapterError):
    code = "28P01"


class UnknownVariable(AdapterError):
    code = "42704"


class InvalidParameterValue(AdapterError):
    code = "22023"


class AdminShutdown(AdapterError):
    """The server is going away (admin_shutdown)."""

    code = "57P01"
    severity = "FATAL"


@dataclass(frozen=True)
class AdapterNotice:
    """Something worth telling the client that is not an error (a PostgreSQL
    NOTICE or WARNING): e.g. `DROP ... IF EXISTS` of a missing object."""

    message: str
    code: str = "00000"
    severity: str = "NOTICE"
    detail: str | None = None
    hint: str | None = None
