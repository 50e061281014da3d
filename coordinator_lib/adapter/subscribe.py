"""SUBSCRIBE: a query's snapshot, then every change, as rows
(mz_timestamp, [mz_progressed,] mz_diff, columns...).

An object with a storage collection (table, source, materialized view) is
listened to directly. Anything else (a view, a query) gets a transient
materialized view (a collection plus a dataflow, dropped at the end) that
the maintenance loop steps like any other. A producer thread turns the
listen's batches into rows on a RowStream; the consumer is FETCH, COPY TO
STDOUT or a row loop.
"""

from __future__ import annotations

import decimal
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from coordinator_lib.adapter.catalog import DEFAULT_CLUSTER
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.responses import ResultColumn
from coordinator_lib.adapter.stream import Row, RowStream
from coordinator_lib.adapter.verify import verify_datum_desc
from coordinator_lib.compute.local_scalar import EvalError
from coordinator_lib.expr.relation import Get
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ScalarType
from coordinator_lib.repr.update import Update
from coordinator_lib.sql.plans import SubscribePlan

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session
    from coordinator_lib.storage import ReadHold

log = logging.getLogger(__name__)


def subscribe_columns(plan: SubscribePlan) -> tuple[ResultColumn, ...]:
    desc = plan.expr.desc
    columns = [ResultColumn("mz_timestamp", ScalarType.NUMERIC, False)]
    if plan.progress:
        columns.append(ResultColumn("mz_progressed", ScalarType.BOOLEAN, False))
    columns.append(ResultColumn("mz_diff", ScalarType.BIGINT, plan.progress))
    for name, column in zip(desc.names, desc.types, strict=True):
        columns.append(ResultColumn.of(name, column, column.nullable or plan.progress))
    return tuple(columns)


# Materialize's words for a SUBSCRIBE whose relation is dropped under it.
_TERMINATED = "subscribe has been terminated"


def start_subscribe(
    coord: Coordinator, session: Session, plan: SubscribePlan, check: Callable[[], None]
) -> RowStream:
    """Choose the as_of, set up what to listen to, start the producer."""
    expr = plan.expr
    if any(id.kind == "s" for id in expr.depends_on()):
        raise AdapterError("SUBSCRIBE of a system relation is not supported", code="0A000")
    with coord.using(coord.storage_inputs(expr)):
        # Held from before the as_of is chosen until the producer reads
        # (or its dataflow holds) at it, so compaction cannot pass it.
        determination, holds = coord.determine_and_hold(session, expr, plan.as_of)
        as_of = determination.timestamp
        transient: GlobalId | None = None
        try:
            if isinstance(expr, Get) and coord.frontiers_of(expr.id) is not None:
                target = expr.id
            else:
                transient = target = coord.new_transient_id()
                coord.install_transient_view(transient, expr, as_of)
        except BaseException:
            for hold in holds:
                hold.release()
            raise
    stream = RowStream(check)
    thread = threading.Thread(
        target=_produce,
        args=(coord, plan, target, as_of, transient, stream, holds),
        name=f"subscribe-{target}",
        daemon=True,
    )
    coord.track_subscribe(thread, stream)
    thread.start()
    return stream


def _produce(
    coord: Coordinator,
    plan: SubscribePlan,
    target: GlobalId,
    as_of: int,
    transient: GlobalId | None,
    stream: RowStream,
    holds: list[ReadHold],
) -> None:
    """`holds` keep the inputs readable at `as_of` until the snapshot is read."""
    arity = plan.expr.desc.arity
    error: BaseException | None = None
    try:
        if plan.up_to is not None and plan.up_to <= as_of:
            return
        first = True
        for batch in coord.compute.subscribe(target, as_of, plan.up_to, stop=stream.closed):
            for hold in holds:
                hold.release()
            if stream.closed.is_set():
                return
            if not first or plan.with_snapshot:
                # Checked as peeks are: a row that does not fit is never sent.
                verify_datum_desc(plan.expr.desc, [update.row for update in batch.updates])
                for row in _update_rows(batch.updates, plan.progress):
                    stream.put(row)
            first = False
            if plan.progress and batch.upper.time is not None:
                stream.put((decimal.Decimal(batch.upper.time), True, None, *([None] * arity)))
        if not stream.closed.is_set():  # its input closed: complete, or dropped
            error = coord.dropped_error(coord.storage_inputs(plan.expr), _TERMINATED)
    except EvalError as failure:  # the view's error (compute/error_collection.py)
        error = AdapterError.from_eval_error(failure)
    except BaseException as failure:  # handed to the consumer
        error = coord.dropped_error(coord.storage_inputs(plan.expr), _TERMINATED) or failure
    finally:
        for hold in holds:
            hold.release()
        if transient is not None:
            coord.drop_transient_view(transient)
        stream.finish(error)


def _update_rows(updates: tuple[Update, ...], progress: bool) -> list[Row]:
    rows = []
    for update in sorted(updates, key=lambda u: u.time):
        prefix: tuple = (decimal.Decimal(update.time),)
        if progress:
            prefix += (False,)
        rows.append((*prefix, update.diff, *update.row))
    return rows


__all__ = ["DEFAULT_CLUSTER", "start_subscribe", "subscribe_columns"]
