"""The create_sql plans carry is fully qualified and re-plans to the same plan
under any search path; ALTER ... RENAME rewrites it (and its dependents')."""

from __future__ import annotations

import dataclasses

import pytest

from coordinator_lib.sql import (
    CreateIndexPlan,
    CreateSourcePlan,
    CreateTablePlan,
    CreateViewPlan,
    InMemoryCatalog,
    Plan,
    QualifiedName,
    plan_statement,
    rename_in_create_sql,
    with_cluster,
)
from coordinator_lib.sql.errors import DuplicateAlias, UnsupportedFeature
from tests.sql.support import T_DESC, U_DESC, W_DESC, make_catalog

T = QualifiedName("materialize", "public", "t")
T2 = QualifiedName("materialize", "public", "t2")


def comparable(plan: Plan) -> dict[str, object]:
    """A plan's fields without those a stored statement drops on purpose."""
    fields = dataclasses.asdict(plan)  # type: ignore[call-overload]
    for key in ("create_sql", "if_not_exists", "replace"):
        fields.pop(key, None)
    return fields


@pytest.mark.parametrize(
    ("sql", "stored"),
    [
        (
            "CREATE TABLE IF NOT EXISTS n (a int NOT NULL, b text)",
            "CREATE TABLE materialize.public.n (a INT NOT NULL, b TEXT)",
        ),
        (
            "CREATE TABLE \"Odd\" (a int) WITH (RETAIN HISTORY FOR '2h')",
            "CREATE TABLE materialize.public.\"Odd\" (a INT) WITH (RETAIN HISTORY FOR '2h')",
        ),
        (
            "CREATE OR REPLACE VIEW v AS SELECT t.a, x.y FROM t JOIN u AS x ON t.a = x.a",
            "CREATE VIEW materialize.public.v AS SELECT t.a, x.y FROM materialize.public.t "
            "JOIN materialize.public.u AS x ON t.a = x.a",
        ),
        (
            "CREATE MATERIALIZED VIEW mv IN CLUSTER c WITH (RETAIN HISTORY FOR '1h') AS "
            "WITH q AS (SELECT a FROM public.t) SELECT q.a FROM q",
            "CREATE MATERIALIZED VIEW materialize.public.mv IN CLUSTER c "
            "WITH (RETAIN HISTORY FOR '1h') AS WITH q AS (SELECT a FROM materialize.public.t) "
            "SELECT q.a FROM q",
        ),
        ("CREATE INDEX ON t (c, a)", "CREATE INDEX t_c_a_idx ON materialize.public.t (c, a)"),
        (
            "CREATE DEFAULT INDEX IN CLUSTER c ON w",
            "CREATE DEFAULT INDEX w_primary_idx IN CLUSTER c ON materialize.public.w",
        ),
        (
            "CREATE INDEX i ON u (a) WITH (RETAIN HISTORY FOR '5m')",
            "CREATE INDEX i ON materialize.public.u (a) WITH (RETAIN HISTORY FOR '5m')",
        ),
        (
            "CREATE SOURCE IF NOT EXISTS c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '1s')",
            "CREATE SOURCE materialize.public.c FROM LOAD GENERATOR COUNTER (TICK INTERVAL = '1s')",
        ),
    ],
)
def test_create_sql_is_fully_qualified_and_replans_the_same(sql: str, stored: str) -> None:
    plan = plan_statement(sql, make_catalog())
    assert plan.create_sql == stored  # type: ignore[attr-defined]
    again = plan_statement(stored, make_catalog())
    assert comparable(again) == comparable(plan)
    assert again.create_sql == stored  # type: ignore[attr-defined]


def test_create_sql_does_not_depend_on_the_search_path() -> None:
    catalog = InMemoryCatalog(search_path=("app", "public"))
    catalog.add_table("app.t", T_DESC)
    plan = plan_statement("CREATE VIEW v AS SELECT a FROM t", catalog)
    assert isinstance(plan, CreateViewPlan)
    assert plan.create_sql == ("CREATE VIEW materialize.app.v AS SELECT a FROM materialize.app.t")
    replay = InMemoryCatalog(schemas=("app",))  # search path: public only
    replay.add_table("app.t", T_DESC)
    assert comparable(plan_statement(plan.create_sql, replay)) == comparable(plan)


def test_retain_history_on_tables_indexes_and_sources() -> None:
    catalog = make_catalog()
    table = plan_statement("CREATE TABLE n (a int) WITH (RETAIN HISTORY = FOR '1h')", catalog)
    assert isinstance(table, CreateTablePlan) and table.retain_history_ms == 3_600_000
    index = plan_statement("CREATE INDEX ON t (a) WITH (RETAIN HISTORY FOR '10s')", catalog)
    assert isinstance(index, CreateIndexPlan) and index.retain_history_ms == 10_000
    source = plan_statement(
        "CREATE SOURCE s FROM LOAD GENERATOR COUNTER WITH (RETAIN HISTORY FOR '1m')", catalog
    )
    assert isinstance(source, CreateSourcePlan) and source.retain_history_ms == 60_000
    with pytest.raises(UnsupportedFeature):
        plan_statement("CREATE TABLE n (a int) WITH (RETAIN HISTORY FOR '1h', SIZE 3)", catalog)


def build_dependents() -> tuple[InMemoryCatalog, dict[QualifiedName, Plan]]:
    catalog = make_catalog()
    plans: dict[QualifiedName, Plan] = {}
    for sql in (
        "CREATE VIEW v AS SELECT t.a, public.t.b, materialize.public.t.c, x.y "
        "FROM t JOIN u AS x ON t.a = x.a WHERE t.a > 1",
        "CREATE MATERIALIZED VIEW mv AS SELECT s.a, w.id FROM (SELECT t.a FROM t) AS s, w",
        "CREATE VIEW vv AS SELECT a FROM v",
        "CREATE INDEX ON t (a)",
        "CREATE INDEX vi ON v (a)",
    ):
        plan = plan_statement(sql, catalog)
        catalog.apply(plan)
        plans[plan.name] = plan  # type: ignore[attr-defined]
    return catalog, plans


def test_rename_rewrites_references_and_qualifiers() -> None:
    _, plans = build_dependents()
    v = plans[QualifiedName("materialize", "public", "v")].create_sql  # type: ignore[attr-defined]
    assert rename_in_create_sql(v, T, T2) == (
        "CREATE VIEW materialize.public.v AS SELECT t2.a, public.t2.b, "
        "materialize.public.t2.c, x.y FROM materialize.public.t2 "
        "JOIN materialize.public.u AS x ON t2.a = x.a WHERE t2.a > 1"
    )
    vv = plans[QualifiedName("materialize", "public", "vv")].create_sql  # type: ignore[attr-defined]
    assert rename_in_create_sql(vv, T, T2) == vv  # names v, not t


def test_rename_of_the_object_itself() -> None:
    _, plans = build_dependents()
    v_name = QualifiedName("materialize", "public", "v")
    v = plans[v_name].create_sql  # type: ignore[attr-defined]
    renamed = rename_in_create_sql(v, v_name, QualifiedName("materialize", "public", "v2"))
    assert renamed.startswith("CREATE VIEW materialize.public.v2 AS SELECT t.a")
    index_name = QualifiedName("materialize", "public", "t_a_idx")
    index = plans[index_name].create_sql  # type: ignore[attr-defined]
    assert rename_in_create_sql(
        index, index_name, QualifiedName("materialize", "public", "ta")
    ) == ("CREATE INDEX ta ON materialize.public.t (a)")
    assert rename_in_create_sql(index, T, T2) == (
        "CREATE INDEX t_a_idx ON materialize.public.t2 (a)"
    )


def test_dependents_replan_after_a_rename() -> None:
    catalog, plans = build_dependents()
    rename = plan_statement("ALTER TABLE t RENAME TO t2", catalog)
    catalog.apply(rename)
    # What the durable catalog does on restart: re-plan every stored statement
    # (rewritten where it named t) against the renamed tables, in order.
    replay = InMemoryCatalog()
    replay.add_table("t2", T_DESC)
    replay.add_table("u", U_DESC)
    replay.add_table("w", W_DESC)
    for name, plan in plans.items():
        sql = rename_in_create_sql(plan.create_sql, T, T2)  # type: ignore[attr-defined]
        again = plan_statement(sql, replay)
        assert comparable(again) == comparable(plan), name
        replay.apply(again)
    assert [i.name for i in replay.items()] == [i.name for i in catalog.items()]


def test_rename_refuses_a_clash_with_another_from_item() -> None:
    catalog = make_catalog()
    plan = plan_statement("CREATE VIEW v AS SELECT t.a, x.y FROM t, u AS x", catalog)
    with pytest.raises(DuplicateAlias):
        rename_in_create_sql(
            plan.create_sql,  # type: ignore[attr-defined]
            T,
            QualifiedName("materialize", "public", "x"),
        )


def test_with_cluster_pins_the_cluster() -> None:
    catalog = make_catalog()
    mv = plan_statement("CREATE MATERIALIZED VIEW mv AS SELECT a FROM t", catalog)
    pinned = with_cluster(mv.create_sql, "quickstart")  # type: ignore[attr-defined]
    assert pinned == (
        "CREATE MATERIALIZED VIEW materialize.public.mv IN CLUSTER quickstart AS "
        "SELECT a FROM materialize.public.t"
    )
    again = plan_statement(pinned, make_catalog())
    assert isinstance(again, CreateViewPlan) and again.cluster == "quickstart"
    index = plan_statement("CREATE INDEX IN CLUSTER old ON t (a)", catalog)
    assert with_cluster(index.create_sql, "new") == (  # type: ignore[attr-defined]
        "CREATE INDEX t_a_idx IN CLUSTER new ON materialize.public.t (a)"
    )
    source = plan_statement("CREATE SOURCE s FROM LOAD GENERATOR COUNTER", catalog)
    assert with_cluster(source.create_sql, "c") == (  # type: ignore[attr-defined]
        "CREATE SOURCE materialize.public.s IN CLUSTER c FROM LOAD GENERATOR COUNTER"
    )
    table = plan_statement("CREATE TABLE n (a int)", catalog)
    with pytest.raises(UnsupportedFeature):
        with_cluster(table.create_sql, "c")  # type: ignore[attr-defined]
