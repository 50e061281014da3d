"""The coordinator's front door: `serve(config)` -> `Handle`; `Client` starts
sessions; a `SessionClient` runs one connection's statements.

The servers (pgwire, HTTP) and the Dagster resource only use this module:

    handle = serve(Config(data_dir="..."))
    session = handle.client.startup(user="materialize", database="materialize")
    for response in session.execute("SELECT 1"):
        ...
    session.terminate()
    handle.shutdown()

A SessionClient is used by one thread at a time (one connection); `cancel()`
may be called from any thread.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlglot import exp

from coordinator_lib.adapter.acl import current_role
from coordinator_lib.adapter.catalog import SessionCatalog
from coordinator_lib.adapter.catalog_functions import substitute_catalog_functions
from coordinator_lib.adapter.catalog_ops import CatalogConflict
from coordinator_lib.adapter.coordinator import Config, Coordinator
from coordinator_lib.adapter.cursor import session_cursors
from coordinator_lib.adapter.errors import (
    AdapterError,
    InFailedTransaction,
    InvalidPassword,
    QueryCanceled,
)
from coordinator_lib.adapter.pg_class import substitute_table_visibility
from coordinator_lib.adapter.privileges import authorize
from coordinator_lib.adapter.responses import (
    ExecuteResponse,
    ExecuteResponseKind,
    ResultColumn,
    StartupResponse,
    StatementDescription,
)
from coordinator_lib.adapter.sequence import sequence
from coordinator_lib.adapter.session import Session
from coordinator_lib.adapter.session_functions import substitute_session_functions
from coordinator_lib.adapter.subscribe import subscribe_columns
from coordinator_lib.compute import budget
from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.persist import ConsensusBusy, ConsensusError
from coordinator_lib.persist.errors import DiskFull
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.sql.depth import too_deep
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.errors import NotNullViolation, SqlError
from coordinator_lib.sql.insert_template import CONSTANT_VALUES_NODES, Shape, template_of
from coordinator_lib.sql.params import bind_parameters, parameter_count, parameter_types
from coordinator_lib.sql.plan import parse_statements, plan_parsed
from coordinator_lib.sql.plan_role import redact
from coordinator_lib.sql.plans import (
    AbortTransactionPlan,
    CommitTransactionPlan,
    Plan,
    SavepointPlan,
)
from coordinator_lib.sql.webhook_syntax import SENSITIVE
from coordinator_lib.storage import StorageError

# What a client is answered for each failure of a statement's execution,
# by the failure's type (the first that matches; a subclass before its base).
_CLIENT_ERRORS: list[tuple[type[Exception], Callable[[Any], AdapterError]]] = [
    (AdapterError, lambda error: error),
    (SqlError, AdapterError.from_sql_error),
    # Running a plan nested beyond sql/depth.py's limit.
    (RecursionError, lambda _: AdapterError.from_sql_error(too_deep())),
    # A runtime error evaluating the query in-process: its own SQLSTATE.
    (EvalError, AdapterError.from_eval_error),
    (
        budget.QueryOutOfMemory,
        lambda error: AdapterError(error.message, code=error.code, hint=error.hint),
    ),
    # Nothing of the statement was written.
    (
        DiskFull,
        lambda error: AdapterError(
            f"could not write: disk full ({error})",
            code="53100",
            hint="Free space where the data directory lives; no restart is needed.",
        ),
    ),
    # The change was refused: nothing written.
    (
        ConsensusBusy,
        lambda error: AdapterError(
            f"could not write: {error}; nothing was written",
            code="55P03",
            hint="Try again; another process of the environment holds the lock.",
        ),
    ),
    # The store failed; a write's outcome was checked.
    (
        ConsensusError,
        lambda error: AdapterError(f"the consensus store failed: {error}", code="58000"),
    ),
    (StorageError, lambda error: AdapterError(str(error), code="XX000")),
]


def client_error(error: Exception) -> AdapterError | None:
    """The AdapterError a client gets for `error`, None for an error no
    statement should raise (a bug)."""
    for failure, answer in _CLIENT_ERRORS:
        if isinstance(error, failure):
            return answer(error)
    return None


class Client:
    """Starts sessions on a coordinator (one per connection)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    def password_required(self, user: str, loopback: bool) -> bool:
        """Whether `user` must give a password: once any user has one, and
        always off loopback (adapter/roles.py)."""
        return self.coordinator.authenticator.password_required(user, loopback)

    def scram_verifier(self, user: str) -> str | None:
        """The SCRAM-SHA-256 verifier `user` authenticates against (pgwire);
        None: `user` may not log in with a password."""
        return self.coordinator.authenticator.verifier(user)

    def startup(
        self,
        user: str,
        database: str = "materialize",
        password: str | None = None,
        options: Mapping[str, str] | None = None,
        loopback: bool = True,
        authenticated: bool = False,
        internal: bool = False,
    ) -> SessionClient:
        """Start a session. The password is checked when one is needed or
        given, unless the server already `authenticated` the user (SCRAM);
        an `internal` session (in-process: Dagster) is a trusted superuser."""
        authenticator = self.coordinator.authenticator
        needed = password is not None or authenticator.password_required(user, loopback)
        trusted = authenticated or internal
        if needed and not trusted and not authenticator.check_password(user, password):
            raise InvalidPassword(f'password authentication failed for user "{user}"')
        self.coordinator.refresh_catalog()
        if database not in self.coordinator.catalog.databases():
            raise AdapterError(f'database "{database}" does not exist', code="3D000")
        session = Session(user, database, internal=internal)
        for name, value in (options or {}).items():
            try:
                session.set(name, value)
            except AdapterError as error:  # Materialize: a notice, not a failed connection
                log.info("session %s: ignoring startup parameter %s: %s", session.id, name, error)
        self.coordinator.register_session(session)
        return SessionClient(self.coordinator, session)

    def cancel_request(self, session_id: int, secret_key: int) -> None:
        """pgwire's CancelRequest: cancel what the session is running, if the
        key matches (otherwise nothing, as PostgreSQL does)."""
        session = self.coordinator.session(session_id)
        if session is not None and hmac.compare_digest(str(session.secret_key), str(secret_key)):
            client = _SESSION_CLIENTS.get(session_id)
            if client is not None:
                client.cancel()


_SESSION_CLIENTS: dict[int, SessionClient] = {}
# Nodes none of the substitutions before planning changes: an INSERT of
# constants is only these, and each substitution copies the whole tree.
_PLAIN_NODES = (exp.Insert, exp.Schema, exp.Table, exp.Identifier, *CONSTANT_VALUES_NODES)


def _names_and_constants(statement: exp.Expr) -> bool:
    """Whether `statement` is made of names and constants only."""
    return all(isinstance(node, _PLAIN_NODES) for node in statement.walk())


log = logging.getLogger(__name__)


class SessionClient:
    """One connection's statements, run one at a time."""

    def __init__(self, coordinator: Coordinator, session: Session) -> None:
        self.coordinator = coordinator
        self.session = session
        self._canceled = threading.Event()
        self.startup_response = StartupResponse(
            session.id, session.secret_key, session.parameter_status()
        )
        _SESSION_CLIENTS[session.id] = self

    @property
    def transaction_status(self) -> str:
        return self.session.status.value

    # ----------------------------------------------------------- execution
    def execute(
        self,
        sql: str,
        params: Sequence[str | None] = (),
        param_types: Sequence[ScalarType | None] = (),
    ) -> Iterator[ExecuteResponse]:
        """One response per statement of `sql`; raises AdapterError at the
        first that fails (the responses before it stand). A cancel counts
        from here, the message read: one that comes while it parses is kept."""
        self._canceled.clear()
        shape = self.coordinator.plan_cache.shape(sql)
        if shape is not None:  # one INSERT: parsed only if its plan is not cached
            yield self._execute_one(None, sql, redact(sql), params, param_types, shape)
            return
        try:
            statements = parse_statements(sql)
        except SqlError as error:
            self._fail_transaction()
            raise AdapterError.from_sql_error(error) from None
        if not statements:
            yield ExecuteResponse(ExecuteResponseKind.EMPTY_QUERY, "")
            return
        for statement in statements:
            # The log keeps the text, except a secret's value (printed as '********').
            whole = len(statements) == 1 and not isinstance(statement, SENSITIVE)
            text = redact(sql if whole else statement.sql(dialect=Tidemark))
            yield self._execute_one(statement, sql, text, params, param_types)

    def _check(self, deadline: float | None) -> Callable[[], None]:
        def check() -> None:
            if self._canceled.is_set():
                raise QueryCanceled("canceling statement due to user request")
            if deadline is not None and time.monotonic() > deadline:
                raise QueryCanceled("canceling statement due to statement timeout")

        return check

    def _plan(
        self,
        statement: exp.Expr | None,
        sql: str,
        params: Sequence[str | None],
        param_types: Sequence[ScalarType | None],
        shape: Shape | None = None,
    ) -> tuple[Plan, SessionCatalog]:
        """Plan `statement` (None: `sql`'s one statement, `shape` its tokens),
        from the plan cache when `shape` has a cached template."""
        coordinator = self.coordinator
        coordinator.refresh_catalog()
        # The version is read before the catalog: a template stored under it
        # was planned against that version or a later one, never an older.
        version = coordinator.catalog.seqno
        catalog = coordinator.catalog.session_catalog(
            self.session.database, self.session.search_path
        )
        cache = coordinator.plan_cache
        key = None
        if shape is not None:
            where = (version, self.session.database, self.session.search_path)
            types = list(param_types) + [None] * (len(params) - len(param_types))
            exact = (sql, tuple(types), *where) if params else None
            known = False
            if exact is not None:
                known, fast = cache.prepared(exact)
                planned = fast.plan(params) if fast is not None else None
                if planned is not None:
                    return planned, catalog
            key = (shape.key, *where)
            template = cache.get(key)
            if template is not None:
                inserted = template.plan(shape, catalog, sql, list(params), types)
                if exact is not None and not known:
                    cache.put_prepared(exact, template.prepared(inserted, list(params), types))
                return inserted, catalog
        if statement is None:
            (statement,) = parse_statements(sql)
        plan = self._plan_parsed(statement, sql, params, param_types, catalog)
        if shape is not None and key is not None and not cache.known(key):
            cache.put(key, template_of(statement, shape, catalog))
        return plan, catalog

    def _plan_parsed(
        self,
        statement: exp.Expr,
        sql: str,
        params: Sequence[str | None],
        param_types: Sequence[ScalarType | None],
        catalog: SessionCatalog,
    ) -> Plan:
        coordinator = self.coordinator
        bound = statement
        if params or parameter_count(bound):
            types = list(param_types) + [None] * (len(params) - len(param_types))
            bound = bind_parameters(bound, list(params), types)
        if not _names_and_constants(bound):
            # After binding: to_regtype($1) needs its argument's value.
            bound = substitute_session_functions(bound, self.session)
            bound = substitute_table_visibility(bound, coordinator, self.session)
            bound = substitute_catalog_functions(bound, coordinator, self.session)
        return plan_parsed(bound, catalog, sql)

    def _execute_one(
        self,
        statement: exp.Expr | None,
        sql: str,
        text: str,
        params: Sequence[str | None],
        param_types: Sequence[ScalarType | None],
        shape: Shape | None = None,
    ) -> ExecuteResponse:
        coordinator = self.coordinator
        timeout_ms = self.session.statement_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        check = self._check(deadline)
        record = coordinator.statement_log.begin(self.session.id, text)
        self.session.statement = record
        metrics = coordinator.metrics
        if metrics is not None:
            metrics.statement_started()
        kind = "unknown"
        try:
            for _ in range(_CATALOG_RETRIES):
                plan, catalog = self._plan(statement, sql, params, param_types, shape)
                kind = type(plan).__name__.removesuffix("Plan")
                transaction = self.session.transaction
                if (
                    transaction is not None
                    and transaction.failed
                    and not isinstance(
                        plan, CommitTransactionPlan | AbortTransactionPlan | SavepointPlan
                    )
                ):
                    raise InFailedTransaction(
                        "current transaction is aborted, commands ignored until end of "
                        "transaction block"
                    )
                try:
                    authorize(coordinator, self.session, plan, catalog)
                    current_role.set(self.session.user)  # owner of what it creates
                    session_cursors.set(self.session.cursors)  # what pg_cursors lists
                    statement_budget = budget.QueryBudget(check, self.session.max_query_memory)
                    with budget.active(statement_budget):
                        response = sequence(coordinator, self.session, plan, catalog, check)
                    break
                except CatalogConflict:
                    continue
            else:
                raise AdapterError("the catalog kept changing; try again", code="40001")
        except Exception as error:
            answer = self._ended_by(record, kind, error)
            if answer is None or answer is error:
                raise  # None: a bug, which the server answers XX000 and logs
            raise answer from None
        if response.rows is None:
            self._finish(record, kind, "success", None)
        else:
            response.rows = self._streamed(response.rows, statement_budget, record, kind)
        return response

    def _streamed(
        self,
        rows: Iterable[tuple[Any, ...]],
        statement_budget: budget.QueryBudget,
        record: Any,
        kind: str,
    ) -> Iterator[tuple[Any, ...]]:
        """A response's rows as the client reads them, computed under the
        statement's budget (a one-off query's rows are computed as they
        are read: cancel, statement_timeout and max_query_memory hold
        until the last); a failure is the client's error, as it would have
        been before the first row, fails the transaction and is what the
        statement log records: the statement ends with its last row."""
        failed = False
        try:
            yield from budget.pulled(rows, statement_budget)
        except Exception as error:
            failed = True
            answer = self._ended_by(record, kind, error)
            if answer is None or answer is error:
                raise
            raise answer from None
        finally:
            if not failed:  # the last row, or the client closed the portal
                self._finish(record, kind, "success", None)

    def _ended_by(self, record: Any, kind: str, error: Exception) -> AdapterError | None:
        """Record in the statement log how `error` ended the statement
        (canceled, or the client's error) and return what the client gets:
        None for an error no statement should raise (a bug)."""
        answer = client_error(error)
        if isinstance(error, QueryCanceled):
            self._finish(record, kind, "canceled", error.message)
        else:
            self._finish(record, kind, "error", str(error) if answer is None else answer.message)
        return answer

    def _finish(self, record: Any, kind: str, status: str, error: str | None) -> None:
        self.coordinator.statement_log.finish(record, status, error)
        if status != "success":
            self._fail_transaction()
        metrics = self.coordinator.metrics
        if metrics is not None:
            seconds = (record.duration_ms or 0) / 1000
            metrics.statement_finished(kind, status, seconds)

    def _fail_transaction(self) -> None:
        if self.session.transaction is not None:
            self.session.transaction.failed = True

    def describe(
        self, sql: str, param_types: Sequence[ScalarType | None] = ()
    ) -> StatementDescription:
        """Parameter types and result columns of one statement, without
        running it (read-only SHOW and EXPLAIN are run to learn theirs)."""
        try:
            statements = parse_statements(sql)
            if len(statements) != 1:
                raise AdapterError(
                    "cannot insert multiple commands into a prepared statement", code="42601"
                )
            statement = statements[0]
            count = parameter_count(statement)
            types = list(param_types) + [None] * (count - len(param_types))
            nulls: list[str | None] = [None] * count
            shape = self.coordinator.plan_cache.shape(sql)  # Execute plans from its template
            try:
                plan, catalog = self._plan(statement, sql, nulls, types, shape)
            except NotNullViolation:
                # NULL stand-ins for the parameters of an INSERT into a NOT
                # NULL column: the statement is fine, it returns no rows.
                return StatementDescription(tuple(types), None)
            inferred = parameter_types(statement, catalog) if count else []
        except SqlError as error:
            raise AdapterError.from_sql_error(error) from None
        final_types = tuple(
            types[i] if types[i] is not None else (inferred[i] if i < len(inferred) else None)
            for i in range(count)
        )
        return StatementDescription(final_types, self._columns_of(plan, catalog))

    def _columns_of(self, plan: Plan, catalog: SessionCatalog) -> tuple[ResultColumn, ...] | None:
        from coordinator_lib.adapter import sequence as seq
        from coordinator_lib.sql import plans as p

        if isinstance(plan, p.SelectPlan):
            return seq.select_columns(plan)
        if isinstance(plan, p.SubscribePlan):
            return subscribe_columns(plan)
        if isinstance(plan, p.FetchPlan):
            cursor = self.session.cursors.get(plan.name)
            return cursor.columns if cursor is not None else None
        if isinstance(
            plan,
            p.ShowObjectsPlan
            | p.ShowColumnsPlan
            | p.ShowCreatePlan
            | p.ShowVariablePlan
            | p.ExplainPlan
            | p.ExplainTimestampPlan,
        ):
            response = sequence(self.coordinator, self.session, plan, catalog, lambda: None)
            return response.columns
        return None

    def cursor_columns(self, name: str) -> tuple[ResultColumn, ...] | None:
        """The columns of the DECLAREd cursor `name`, if there is one: the
        extended protocol describes it as a portal."""
        cursor = self.session.cursors.get(name)
        return cursor.columns if cursor is not None else None

    def cancel(self) -> None:
        """Cancel the running statement (callable from any thread)."""
        self._canceled.set()

    def terminate(self) -> None:
        _SESSION_CLIENTS.pop(self.session.id, None)
        self.coordinator.end_session(self.session)


class Handle:
    """A running coordinator: `client` to start sessions, `shutdown()`."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.client = Client(coordinator)

    def shutdown(self) -> None:
        self.coordinator.close()


def serve(config: Config, spark: Any = None) -> Handle:
    """Open the environment, reconcile the catalog, start maintenance."""
    return Handle(Coordinator(config, spark))


_CATALOG_RETRIES = 5
