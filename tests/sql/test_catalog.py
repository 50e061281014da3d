"""InMemoryCatalog: name resolution like Materialize, ids, dependencies and DROP."""

from __future__ import annotations

import pytest

from coordinator_lib.repr import GlobalId, RelationDesc
from coordinator_lib.sql import (
    CatalogItem,
    InMemoryCatalog,
    ItemKind,
    QualifiedName,
    SqlCatalog,
    plan_statement,
)
from coordinator_lib.sql.errors import DependentObjects, DuplicateObject, UnknownObject

DESC = RelationDesc.of(("a", "integer", False), ("b", "text"))


def test_implements_protocol() -> None:
    assert isinstance(InMemoryCatalog(), SqlCatalog)


def test_resolve_one_two_three_parts() -> None:
    catalog = InMemoryCatalog()
    item = catalog.add_table("t", DESC)
    assert item.id == GlobalId.user(1)
    assert item.name == QualifiedName("materialize", "public", "t")
    assert str(item.name) == "materialize.public.t"
    assert catalog.resolve(("t",)) is item
    assert catalog.resolve(("public", "t")) is item
    assert catalog.resolve(("materialize", "public", "t")) is item


def test_search_path_order() -> None:
    catalog = InMemoryCatalog(search_path=("first", "public"))
    public = catalog.add_table("public.t", DESC)
    assert catalog.resolve(("t",)) is public
    first = catalog.add_table("first.t", DESC)
    assert catalog.resolve(("t",)) is first
    assert catalog.resolve(("public", "t")) is public


def test_unknown_object_names_it() -> None:
    catalog = InMemoryCatalog()
    with pytest.raises(UnknownObject) as info:
        catalog.resolve(("s", "nope"))
    assert info.value.code == "42P01"
    assert "s.nope" in info.value.message
    with pytest.raises(UnknownObject):
        catalog.resolve(("a", "b", "c", "d"))


def test_qualify_uses_first_schema_and_checks_schemas() -> None:
    catalog = InMemoryCatalog(schemas=("other",))
    assert catalog.qualify(("t",)) == QualifiedName("materialize", "public", "t")
    assert catalog.qualify(("other", "t")) == QualifiedName("materialize", "other", "t")
    with pytest.raises(UnknownObject, match="unknown schema"):
        catalog.qualify(("nope", "t"))


def test_names_are_unique_across_kinds() -> None:
    catalog = InMemoryCatalog()
    catalog.add_table("t", DESC)
    with pytest.raises(DuplicateObject):
        catalog.add_source("t", DESC)


def test_quoted_names_print_quoted() -> None:
    assert str(QualifiedName("materialize", "public", "My Table")) == (
        'materialize.public."My Table"'
    )


def test_drop_refuses_dependents_without_cascade() -> None:
    catalog = InMemoryCatalog()
    t = catalog.add_table("t", DESC)
    for sql in (
        "CREATE VIEW v AS SELECT a FROM t",
        "CREATE MATERIALIZED VIEW mv AS SELECT a FROM v",
        "CREATE INDEX ON mv (a)",
    ):
        catalog.apply(plan_statement(sql, catalog))
    v, mv = catalog.resolve(("v",)), catalog.resolve(("mv",))
    # the view is inlined into mv's plan, but mv still depends on it by name
    assert mv.expr is not None and mv.expr.depends_on() == {t.id}
    assert mv.depends_on == {v.id}  # direct; t is reached through v
    with pytest.raises(DependentObjects) as info:
        catalog.apply(plan_statement("DROP VIEW v", catalog))
    assert info.value.code == "2BP01"
    assert "mv" in info.value.message
    dropped = catalog.drop([t.id], cascade=True)
    assert set(dropped) == {item.id for item in (t, v, mv)} | {GlobalId.user(4)}
    assert catalog.items() == []


def test_apply_creates_items() -> None:
    catalog = InMemoryCatalog()
    [table] = catalog.apply(plan_statement("CREATE TABLE t (a int NOT NULL, b text)", catalog))
    assert table.kind is ItemKind.TABLE and table.desc == DESC
    [index] = catalog.apply(plan_statement("CREATE DEFAULT INDEX ON t", catalog))
    assert index.kind is ItemKind.INDEX and index.on == table.id and index.key == (0, 1)
    assert index.name.item == "t_primary_idx"
    created = catalog.apply(
        plan_statement("CREATE SOURCE a FROM LOAD GENERATOR AUCTION FOR ALL TABLES", catalog)
    )
    assert [c.name.item for c in created] == [
        "a",
        "organizations",
        "users",
        "accounts",
        "auctions",
        "bids",
    ]
    assert all(isinstance(c, CatalogItem) and c.kind is ItemKind.SOURCE for c in created)
    assert catalog.resolve(("bids",)).desc.names[:3] == ("id", "buyer", "auction_id")


def test_convenience_builders_for_other_layers() -> None:
    """What compute tests use: tables, views from plans, indexes, readable names."""
    catalog = InMemoryCatalog()
    t = catalog.add_table("t", DESC)
    plan = plan_statement("SELECT a, count(*) AS n FROM t GROUP BY a", catalog)
    view = catalog.add_view("counts", plan.expr, materialized=True)  # type: ignore[attr-defined]
    assert view.kind is ItemKind.MATERIALIZED_VIEW and view.desc.names == ("a", "n")
    assert view.depends_on == {t.id}
    index = catalog.add_index("counts_a_idx", view.id, (0,))
    assert index.name == QualifiedName("materialize", "public", "counts_a_idx")
    assert catalog.get(index.id).on == view.id
    assert catalog.names() == {
        t.id: "materialize.public.t",
        view.id: "materialize.public.counts",
        index.id: "materialize.public.counts_a_idx",
    }
    source = catalog.add_source("s.cnt", RelationDesc.of(("counter", "bigint", False)))
    assert source.name == QualifiedName("materialize", "s", "cnt")
    assert catalog.resolve(("s", "cnt")) is source
