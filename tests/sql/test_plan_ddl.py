"""CREATE / DROP statements become resolved, typed plans."""

from __future__ import annotations

import pytest

from coordinator_lib.expr import Get, Project
from coordinator_lib.repr import GlobalId, RelationDesc
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import (
    CreateIndexPlan,
    CreateSourcePlan,
    CreateTablePlan,
    CreateViewPlan,
    DropPlan,
    ItemKind,
    QualifiedName,
    plan_statement,
    plan_statements,
)
from coordinator_lib.sql.errors import (
    DuplicateColumn,
    DuplicateObject,
    InvalidParameter,
    ReservedName,
    UnknownColumn,
    UnknownObject,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.storage.load_generator import AuctionGenerator, CounterGenerator
from tests.sql.support import make_catalog

PUBLIC = ("materialize", "public")


def qn(item: str) -> QualifiedName:
    return QualifiedName(*PUBLIC, item)


# --- CREATE TABLE ------------------------------------------------------------


def test_create_table_desc() -> None:
    plan = plan_statement(
        "CREATE TABLE s1 (id bigint NOT NULL, name varchar(20), price numeric(10, 2) NULL, "
        'at timestamptz, "Mixed" double precision, flag bool)',
        make_catalog(),
    )
    assert isinstance(plan, CreateTablePlan)
    assert plan.name == qn("s1")
    expected = RelationDesc.of(
        ("id", "bigint", False),
        ("name", "text"),
        ("price", "numeric"),
        ("at", "timestamp with time zone"),
        ("Mixed", "double precision"),
        ("flag", "boolean"),
    )
    varchar_20 = ColumnType(ScalarType.TEXT, True, 20, varchar=True)  # text that keeps its length
    types = (expected.types[0], varchar_20, *expected.types[2:])
    assert plan.desc == RelationDesc(expected.names, types)
    assert plan.create_sql.startswith("CREATE TABLE materialize.public.s1 (id BIGINT NOT NULL")
    assert not plan.if_not_exists


def test_create_table_if_not_exists_and_duplicates() -> None:
    catalog = make_catalog()
    plan = plan_statement("CREATE TABLE IF NOT EXISTS t (a int)", catalog)
    assert isinstance(plan, CreateTablePlan) and plan.if_not_exists
    with pytest.raises(DuplicateObject) as info:
        plan_statement("CREATE TABLE t (a int)", catalog)
    assert info.value.code == "42P07" and info.value.position == 14
    with pytest.raises(DuplicateColumn):
        plan_statement("CREATE TABLE n (a int, a text)", catalog)
    with pytest.raises(ReservedName):
        plan_statement("CREATE TABLE n (__diff int)", catalog)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE n (a int CHECK (a > 0))",
        "CREATE TABLE n (a int DEFAULT 5)",
        "CREATE TABLE n (a money)",
        "CREATE TABLE n AS SELECT 1",
    ],
)
def test_create_table_unsupported(sql: str) -> None:
    with pytest.raises(UnsupportedFeature) as info:
        plan_statement(sql, make_catalog())
    assert info.value.code == "0A000"


# --- CREATE [MATERIALIZED] VIEW ------------------------------------------------


def test_create_view_plan() -> None:
    catalog = make_catalog()
    plan = plan_statement("CREATE VIEW v (x, y) AS SELECT a, b FROM t WHERE a > 1", catalog)
    assert isinstance(plan, CreateViewPlan)
    assert plan.name == qn("v") and not plan.materialized
    assert plan.desc.names == ("x", "y")
    assert plan.desc.types == (ColumnType(ScalarType.INTEGER, False), ColumnType(ScalarType.TEXT))
    assert plan.expr.desc == plan.desc
    assert plan.depends_on == {GlobalId.user(1)}
    assert plan.retain_history_ms is None and plan.cluster is None


def test_create_materialized_view_options() -> None:
    plan = plan_statement(
        "CREATE MATERIALIZED VIEW mv IN CLUSTER quickstart WITH (RETAIN HISTORY FOR '1h') "
        "AS SELECT a, count(*) AS n FROM t GROUP BY a",
        make_catalog(),
    )
    assert isinstance(plan, CreateViewPlan)
    assert plan.materialized and plan.cluster == "quickstart"
    assert plan.retain_history_ms == 3_600_000
    assert plan.desc.names == ("a", "n")
    assert plan.create_sql.startswith(
        "CREATE MATERIALIZED VIEW materialize.public.mv IN CLUSTER quickstart"
    )


@pytest.mark.parametrize(
    ("interval", "ms"), [("30s", 30_000), ("1 hour 30 minutes", 5_400_000), ("500ms", 500)]
)
def test_retain_history_intervals(interval: str, ms: int) -> None:
    plan = plan_statement(
        f"CREATE MATERIALIZED VIEW mv WITH (RETAIN HISTORY FOR '{interval}') AS SELECT 1",
        make_catalog(),
    )
    assert isinstance(plan, CreateViewPlan) and plan.retain_history_ms == ms


def test_view_is_inlined_and_materialized_view_is_read() -> None:
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE VIEW v AS SELECT a, b FROM t WHERE a > 1", catalog))
    catalog.apply(plan_statement("CREATE MATERIALIZED VIEW mv AS SELECT a FROM u", catalog))
    plan = plan_statement("SELECT v.b, mv.a FROM v JOIN mv ON v.a = mv.a", catalog)
    t, mv = catalog.resolve(("t",)), catalog.resolve(("mv",))
    assert plan.expr.depends_on() == {t.id, mv.id}  # v is gone: inlined
    gets = _gets(plan.expr)
    assert Get(mv.id, mv.desc) in gets


def _gets(expr: object) -> list[Get]:
    out = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Get):
            out.append(node)
        stack += list(node.inputs())  # type: ignore[attr-defined]
    return out


def test_create_or_replace_view() -> None:
    catalog = make_catalog()
    catalog.apply(plan_statement("CREATE VIEW v AS SELECT a FROM t", catalog))
    v = catalog.resolve(("v",))
    plan = plan_statement("CREATE OR REPLACE VIEW v AS SELECT a, b FROM t", catalog)
    assert isinstance(plan, CreateViewPlan) and plan.replace == v.id
    with pytest.raises(DuplicateObject):
        plan_statement("CREATE VIEW v AS SELECT 1", catalog)
    with pytest.raises(WrongObjectType):
        plan_statement("CREATE OR REPLACE MATERIALIZED VIEW v AS SELECT 1", catalog)


def test_view_column_errors() -> None:
    catalog = make_catalog()
    with pytest.raises(DuplicateColumn) as info:
        plan_statement("CREATE VIEW v AS SELECT a, a FROM t", catalog)
    assert info.value.code == "42701"
    # LIMIT in a view is a maintained TopK (tests/sql/test_ordered.py)
    with pytest.raises(InvalidParameter, match="LIMIT"):
        plan_statement("CREATE MATERIALIZED VIEW v AS SELECT a FROM t LIMIT -1", catalog)


def test_view_order_by_without_limit_is_dropped() -> None:
    plan = plan_statement("CREATE VIEW v AS SELECT a FROM t ORDER BY b", make_catalog())
    assert isinstance(plan, CreateViewPlan)
    assert plan.desc.names == ("a",)
    assert isinstance(plan.expr, Project)


# --- CREATE INDEX ----------------------------------------------------------------


def test_create_index_plan() -> None:
    catalog = make_catalog()
    plan = plan_statement("CREATE INDEX t_idx IN CLUSTER c ON t (c, a)", catalog)
    assert isinstance(plan, CreateIndexPlan)
    assert plan == CreateIndexPlan(
        qn("t_idx"), GlobalId.user(1), (2, 0), cluster="c", create_sql=plan.create_sql
    )
    assert plan.create_sql == "CREATE INDEX t_idx IN CLUSTER c ON materialize.public.t (c, a)"


def test_index_names_are_generated_like_materialize() -> None:
    catalog = make_catalog()
    first = plan_statement("CREATE INDEX ON t (a, b)", catalog)
    assert isinstance(first, CreateIndexPlan) and first.name == qn("t_a_b_idx")
    catalog.apply(first)
    second = plan_statement("CREATE INDEX ON t (a, b)", catalog)
    assert isinstance(second, CreateIndexPlan) and second.name == qn("t_a_b_idx1")


def test_default_index_keys_on_unique_key_or_all_columns() -> None:
    catalog = make_catalog()
    on_w = plan_statement("CREATE DEFAULT INDEX ON w", catalog)  # w has key (id)
    assert isinstance(on_w, CreateIndexPlan)
    assert on_w.key == (0,) and on_w.default and on_w.name == qn("w_primary_idx")
    on_u = plan_statement("CREATE DEFAULT INDEX IN CLUSTER c ON u", catalog)
    assert isinstance(on_u, CreateIndexPlan) and on_u.key == (0, 1, 2) and on_u.cluster == "c"


def test_index_errors() -> None:
    catalog = make_catalog()
    with pytest.raises(UnknownColumn):
        plan_statement("CREATE INDEX ON t (nope)", catalog)
    with pytest.raises(UnsupportedFeature):
        plan_statement("CREATE INDEX ON t (a + 1)", catalog)
    with pytest.raises(UnknownObject):
        plan_statement("CREATE INDEX ON nope (a)", catalog)
    catalog.apply(plan_statement("CREATE INDEX i ON t (a)", catalog))
    with pytest.raises(WrongObjectType):
        plan_statement("CREATE INDEX ON i (a)", catalog)
    with pytest.raises(DuplicateObject):
        plan_statement("CREATE INDEX i ON t (b)", catalog)


# --- CREATE SOURCE ----------------------------------------------------------------


def test_counter_source() -> None:
    plan = plan_statement(
        "CREATE SOURCE cnt FROM LOAD GENERATOR COUNTER (TICK INTERVAL '500ms', MAX CARDINALITY 3)",
        make_catalog(),
    )
    assert isinstance(plan, CreateSourcePlan)
    assert plan.generator == "counter"
    assert plan.options == {"max_cardinality": 3}
    assert plan.tick_interval_ms == 500
    assert plan.outputs == CounterGenerator().outputs()
    assert plan.subsources == {"counter": qn("cnt")}


def test_auction_source_for_all_tables() -> None:
    plan = plan_statement(
        "CREATE SOURCE auction_house IN CLUSTER c FROM LOAD GENERATOR AUCTION (SEED 7) "
        "FOR ALL TABLES",
        make_catalog(),
    )
    assert isinstance(plan, CreateSourcePlan)
    assert plan.options == {"seed": 7} and plan.cluster == "c"
    assert plan.outputs == AuctionGenerator().outputs()
    assert plan.subsources == {name: qn(name) for name in AuctionGenerator().outputs()}


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE SOURCE s FROM LOAD GENERATOR TPCH", "unknown load generator"),
        ("CREATE SOURCE s FROM LOAD GENERATOR AUCTION", "FOR ALL TABLES"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER FOR ALL TABLES", "multi-output"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (SEED 1)", "does not take"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK INTERVAL 'soon')", "interval"),
    ],
)
def test_source_errors(sql: str, message: str) -> None:
    with pytest.raises(InvalidParameter, match=message) as info:
        plan_statement(sql, make_catalog())
    assert info.value.position is not None


def test_source_subsource_names_must_be_free() -> None:
    catalog = make_catalog()
    catalog.add_table("bids", RelationDesc.of(("x", "int")))
    with pytest.raises(DuplicateObject, match="bids"):
        plan_statement("CREATE SOURCE a FROM LOAD GENERATOR AUCTION FOR ALL TABLES", catalog)


# --- DROP ------------------------------------------------------------------------


def test_drop_plans() -> None:
    catalog = make_catalog()
    for sql in (
        "CREATE VIEW v AS SELECT 1 AS one",
        "CREATE MATERIALIZED VIEW mv AS SELECT 1 AS one",
        "CREATE INDEX i ON t (a)",
        "CREATE SOURCE s FROM LOAD GENERATOR COUNTER",
    ):
        catalog.apply(plan_statement(sql, catalog))
    cases = [
        ("DROP TABLE t, u", ItemKind.TABLE, ["t", "u"]),
        ("DROP VIEW v", ItemKind.VIEW, ["v"]),
        ("DROP MATERIALIZED VIEW mv CASCADE", ItemKind.MATERIALIZED_VIEW, ["mv"]),
        ("DROP INDEX i", ItemKind.INDEX, ["i"]),
        ("DROP SOURCE s", ItemKind.SOURCE, ["s"]),
    ]
    for sql, kind, names in cases:
        plan = plan_statement(sql, catalog)
        assert isinstance(plan, DropPlan)
        assert plan.kind is kind
        assert [n.item for n in plan.names] == names
        assert plan.ids == tuple(catalog.resolve((n,)).id for n in names)
        assert plan.cascade is ("CASCADE" in sql)


def test_drop_if_exists_and_errors() -> None:
    catalog = make_catalog()
    plan = plan_statement("DROP TABLE IF EXISTS nope, t", catalog)
    assert isinstance(plan, DropPlan)
    assert plan.missing == ("nope",) and plan.ids == (GlobalId.user(1),) and plan.if_exists
    with pytest.raises(UnknownObject) as info:
        plan_statement("DROP TABLE nope", catalog)
    assert info.value.position == 12
    with pytest.raises(WrongObjectType) as wrong:
        plan_statement("DROP VIEW t", catalog)
    assert wrong.value.code == "42809" and "DROP TABLE" in (wrong.value.hint or "")
    with pytest.raises(UnsupportedFeature):
        plan_statement("DROP CLUSTER REPLICA c.r1", catalog)  # DROP CLUSTER is plan_cluster's


def test_plan_statements_plans_each() -> None:
    plans = plan_statements("CREATE TABLE n (a int); DROP TABLE t; SELECT 1", make_catalog())
    assert [type(p).__name__ for p in plans] == ["CreateTablePlan", "DropPlan", "SelectPlan"]
