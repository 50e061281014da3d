"""`Metrics`: what each method exports, read back through the exposition
text a Prometheus server would scrape."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from coordinator_lib.adapter.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def test_statements() -> None:
    m = Metrics()
    m.statement_started()
    m.statement_started()
    assert value(m, "tidemark_active_statements") == 2
    m.statement_finished("select", "ok", 0.003)
    m.statement_finished("select", "error", 20.0)
    assert value(m, "tidemark_active_statements") == 0
    assert value(m, "tidemark_statements_total", kind="select", status="ok") == 1
    assert value(m, "tidemark_statements_total", kind="select", status="error") == 1
    assert value(m, "tidemark_statement_duration_seconds_count", kind="select") == 2
    assert value(m, "tidemark_statement_duration_seconds_sum", kind="select") == 20.003
    # Buckets reach past 10 s: slow Spark statements are not all lumped in +Inf.
    bucket = "tidemark_statement_duration_seconds_bucket"
    assert value(m, bucket, kind="select", le="10.0") == 1
    assert value(m, bucket, kind="select", le="30.0") == 2


def test_sessions() -> None:
    m = Metrics()
    m.session_opened()
    m.session_opened()
    m.session_closed()
    assert value(m, "tidemark_active_sessions") == 1
    assert value(m, "tidemark_sessions_total") == 2


def test_rows_appended() -> None:
    m = Metrics()
    m.rows_appended("u1", 10)
    m.rows_appended("u1", 5)
    m.rows_appended("u2", 1)
    assert value(m, "tidemark_rows_appended_total", collection="u1") == 15
    assert value(m, "tidemark_rows_appended_total", collection="u2") == 1


def test_frontiers_and_lag() -> None:
    m = Metrics()
    m.set_frontiers("u1", since=1_000, upper=9_000, now_ms=10_500)
    assert value(m, "tidemark_collection_since", collection="u1") == 1_000
    assert value(m, "tidemark_collection_upper", collection="u1") == 9_000
    assert value(m, "tidemark_collection_lag_ms", collection="u1") == 1_500
    # An upper ahead of the clock is not negative lag.
    m.set_frontiers("u1", since=1_000, upper=12_000, now_ms=10_500)
    assert value(m, "tidemark_collection_lag_ms", collection="u1") == 0


def test_closed_frontiers_are_infinite_with_no_lag() -> None:
    m = Metrics()
    m.set_frontiers("u1", since=None, upper=None, now_ms=10_500)
    assert value(m, "tidemark_collection_since", collection="u1") == math.inf
    assert value(m, "tidemark_collection_upper", collection="u1") == math.inf
    assert value(m, "tidemark_collection_lag_ms", collection="u1") == 0
    assert b'tidemark_collection_upper{collection="u1"} +Inf' in m.render()


def test_drop_collection_removes_its_series() -> None:
    m = Metrics()
    m.rows_appended("u1", 1)
    m.set_frontiers("u1", since=1, upper=2, now_ms=3)
    m.set_frontiers("u2", since=1, upper=2, now_ms=3)
    m.drop_collection("u1")
    m.drop_collection("never-seen")
    names = {(name, labels) for name, labels in samples(m) if ("collection", "u1") in labels}
    assert names == set()
    assert value(m, "tidemark_collection_upper", collection="u2") == 2
    # A collection of the same name counts again from zero (the looked-up
    # children of a dropped collection are forgotten with its series).
    m.rows_appended("u1", 5)
    assert value(m, "tidemark_rows_appended_total", collection="u1") == 5


def test_dataflow_steps() -> None:
    m = Metrics()
    m.step_finished("mv", 0.5, 100)
    m.step_finished("mv", 1.5, 20)
    assert value(m, "tidemark_dataflow_rows_total", view="mv") == 120
    assert value(m, "tidemark_dataflow_step_seconds_count", view="mv") == 2
    assert value(m, "tidemark_dataflow_step_seconds_sum", view="mv") == 2.0


def test_webhook_requests() -> None:
    m = Metrics()
    m.webhook_request("events", 200, 0.01)
    m.webhook_request("events", 200, 0.02)
    m.webhook_request("events", 401, 0.001)
    assert value(m, "tidemark_webhook_requests_total", source="events", status="200") == 2
    assert value(m, "tidemark_webhook_requests_total", source="events", status="401") == 1
    assert value(m, "tidemark_webhook_request_duration_seconds_count", source="events") == 3


def test_instances_are_independent() -> None:
    first, second = Metrics(), Metrics()
    first.session_opened()
    assert value(first, "tidemark_sessions_total") == 1
    assert value(second, "tidemark_sessions_total") == 0


def test_exposition_format() -> None:
    m = Metrics()
    assert m.content_type.startswith("text/plain; version=")
    text = m.render().decode()
    assert "# TYPE tidemark_statements_total counter" in text
    assert "# TYPE tidemark_statement_duration_seconds histogram" in text
    assert "# TYPE tidemark_active_sessions gauge" in text
