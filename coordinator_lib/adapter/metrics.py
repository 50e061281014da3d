"""Prometheus metrics of one coordinator: statements, sessions, appends,
frontiers, dataflow steps and webhook requests.

Each `Metrics` owns its own `CollectorRegistry` (not prometheus_client's
global default) so several coordinators can live in one process, as they do
in tests; the HTTP server's `GET /metrics` serves `render()`.

Closed frontiers: a `since` or `upper` of None (the empty frontier, "closed
forever") is exported as `+Inf` rather than dropping the series, so a
dashboard can tell a finished collection from one that never reported; its
lag is 0 (nothing more is coming, so nothing is late). `drop_collection`
removes a collection's series when it leaves the catalog.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator_lib.adapter.process_memory import process_memory

# prometheus_client adds the +Inf bucket. Statements and dataflow steps span
# sub-millisecond peeks to multi-minute Spark hydrations: past the 10 s where
# the default buckets stop.
_FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW_BUCKETS = (*_FAST_BUCKETS, 30.0, 60.0, 120.0, 300.0)


class _ProcessMemory(Collector):
    """Read at each scrape: the process's memory by allocator."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "tidemark_process_memory_bytes",
            "This process's memory by allocator (adapter/process_memory.py; "
            "python_blocks is a count).",
            labels=["part"],
        )
        for part, value in process_memory().items():
            family.add_metric([part], value)
        yield family


class Metrics:
    """The coordinator's metrics; every method is cheap and thread-safe."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        r.register(_ProcessMemory())
        # (id(metric), *label values) -> that child (`_child`)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._statements = Counter(
            "tidemark_statements_total",
            "Statements executed, by kind and outcome.",
            ["kind", "status"],
            registry=r,
        )
        self._statement_seconds = Histogram(
            "tidemark_statement_duration_seconds",
            "Wall time of a statement, from start to its last row.",
            ["kind"],
            buckets=_SLOW_BUCKETS,
            registry=r,
        )
        self._active_statements = Gauge(
            "tidemark_active_statements", "Statements running now.", registry=r
        )
        self._active_sessions = Gauge(
            "tidemark_active_sessions", "Sessions open now (pgwire, HTTP, Dagster).", registry=r
        )
        self._sessions = Counter("tidemark_sessions_total", "Sessions ever opened.", registry=r)
        self._rows_appended = Counter(
            "tidemark_rows_appended_total",
            "Rows appended to a collection (inserts, deletes and source data).",
            ["collection"],
            registry=r,
        )
        self._since = Gauge(
            "tidemark_collection_since",
            "A collection's read frontier in ms since the epoch (+Inf: closed).",
            ["collection"],
            registry=r,
        )
        self._upper = Gauge(
            "tidemark_collection_upper",
            "A collection's write frontier in ms since the epoch (+Inf: closed).",
            ["collection"],
            registry=r,
        )
        self._lag = Gauge(
            "tidemark_collection_lag_ms",
            "How far a collection's upper trails the wall clock (0 when closed).",
            ["collection"],
            registry=r,
        )
        self._step_seconds = Histogram(
            "tidemark_dataflow_step_seconds",
            "Wall time of one maintenance step of a dataflow.",
            ["view"],
            buckets=_SLOW_BUCKETS,
            registry=r,
        )
        self._step_rows = Counter(
            "tidemark_dataflow_rows_total",
            "Update rows a dataflow's steps produced.",
            ["view"],
            registry=r,
        )
        self._webhook_requests = Counter(
            "tidemark_webhook_requests_total",
            "Webhook requests, by source and HTTP status.",
            ["source", "status"],
            registry=r,
        )
        self._webhook_seconds = Histogram(
            "tidemark_webhook_request_duration_seconds",
            "Wall time of a webhook request, validation and append included.",
            ["source"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, looked up once: `labels` takes the
        metric's lock and checks its arguments, for every statement and
        webhook request (about 3% of the server's GIL time at 32 pgbench
        clients). `drop_collection` forgets a collection's children."""
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # Statements -----------------------------------------------------------

    def statement_started(self) -> None:
        self._active_statements.inc()

    def statement_finished(self, kind: str, status: str, seconds: float) -> None:
        """`kind`: e.g. "select", "insert"; `status`: "ok", "error" or "canceled"."""
        self._active_statements.dec()
        self._child(self._statements, kind, status).inc()
        self._child(self._statement_seconds, kind).observe(seconds)

    # Sessions -------------------------------------------------------------

    def session_opened(self) -> None:
        self._active_sessions.inc()
        self._sessions.inc()

    def session_closed(self) -> None:
        self._active_sessions.dec()

    # Collections ----------------------------------------------------------

    def rows_appended(self, collection: str, rows: int) -> None:
        self._child(self._rows_appended, collection).inc(rows)

    def set_frontiers(
        self, collection: str, since: int | None, upper: int | None, now_ms: int
    ) -> None:
        """None is the empty frontier: exported as +Inf (see the module docstring)."""
        self._since.labels(collection=collection).set(math.inf if since is None else since)
        self._upper.labels(collection=collection).set(math.inf if upper is None else upper)
        lag = 0 if upper is None else max(0, now_ms - upper)
        self._lag.labels(collection=collection).set(lag)

    def drop_collection(self, collection: str) -> None:
        """Forget a dropped collection's series, so they stop being exported."""
        for metric in (self._rows_appended, self._since, self._upper, self._lag):
            self._children.pop((id(metric), collection), None)
            metric.remove(collection)

    # Dataflows ------------------------------------------------------------

    def step_finished(self, view: str, seconds: float, rows: int) -> None:
        self._step_seconds.labels(view=view).observe(seconds)
        self._step_rows.labels(view=view).inc(rows)

    # Webhooks -------------------------------------------------------------

    def webhook_request(self, source: str, status: int, seconds: float) -> None:
        self._child(self._webhook_requests, source, str(status)).inc()
        self._child(self._webhook_seconds, source).observe(seconds)

    # Exposition -----------------------------------------------------------

    def render(self) -> bytes:
        """Prometheus text exposition of every metric above."""
        return generate_latest(self.registry)

    @property
    def content_type(self) -> str:
        return CONTENT_TYPE_LATEST
