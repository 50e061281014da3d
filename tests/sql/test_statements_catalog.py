"""CREATE/DROP DATABASE and SCHEMA, ALTER ... RENAME / RETAIN HISTORY and SHOW
of objects, columns and definitions become resolved plans."""

from __future__ import annotations

import pytest

from coordinator_lib.repr import GlobalId
from coordinator_lib.sql import (
    AlterRenamePlan,
    AlterRetainHistoryPlan,
    CreateDatabasePlan,
    CreateSchemaPlan,
    DropSchemaPlan,
    InMemoryCatalog,
    ItemKind,
    QualifiedName,
    ShowColumnsPlan,
    ShowCreatePlan,
    ShowKind,
    ShowObjectsPlan,
    SqlCatalog,
    plan_statement,
)
from coordinator_lib.sql.errors import (
    DependentObjects,
    DuplicateObject,
    InvalidParameter,
    ParseError,
    SqlError,
    UnknownDatabase,
    UnknownObject,
    UnknownSchema,
    UnsupportedFeature,
    WrongObjectType,
)
from tests.sql.support import make_catalog


def qn(item: str, schema: str = "public") -> QualifiedName:
    return QualifiedName("materialize", schema, item)


def catalog_with_objects() -> InMemoryCatalog:
    """t, u, w (tables u1-u3), view v (u4), materialized view mv (u5), index i on t (u6)."""
    catalog = make_catalog()
    for sql in (
        "CREATE VIEW v AS SELECT a FROM t",
        "CREATE MATERIALIZED VIEW mv AS SELECT a, y FROM u",
        "CREATE INDEX i ON t (a)",
    ):
        catalog.apply(plan_statement(sql, catalog))
    return catalog


def fails(sql: str, error: type[SqlError], code: str, position: int | None, catalog=None) -> str:
    with pytest.raises(error) as info:
        plan_statement(sql, catalog or catalog_with_objects())
    assert info.value.code == code
    assert info.value.position == position
    return info.value.message


# --- the catalog protocol ----------------------------------------------------------


def test_in_memory_catalog_implements_the_session_protocol() -> None:
    catalog = InMemoryCatalog(database="db", search_path=("s1", "s2"), schemas=("x",))
    assert isinstance(catalog, SqlCatalog)
    assert catalog.database == "db" and catalog.search_path == ("s1", "s2")
    assert catalog.schema_exists("db", "x") and catalog.schema_exists("db", "s2")
    assert not catalog.schema_exists("db", "nope") and not catalog.schema_exists("other", "x")
    assert catalog.database_exists("db") and not catalog.database_exists("other")


def test_qualify_reports_unknown_schema_and_database_codes() -> None:
    catalog = InMemoryCatalog()
    with pytest.raises(UnknownSchema) as schema:
        catalog.qualify(("nope", "t"))
    assert schema.value.code == "3F000" and isinstance(schema.value, UnknownObject)
    with pytest.raises(UnknownDatabase) as database:
        catalog.qualify(("nodb", "public", "t"))
    assert database.value.code == "3D000"


# --- CREATE / DROP DATABASE and SCHEMA ---------------------------------------------------


def test_create_database_and_schema() -> None:
    catalog = make_catalog()
    assert plan_statement("CREATE DATABASE d", catalog) == CreateDatabasePlan("d")
    assert plan_statement("CREATE DATABASE IF NOT EXISTS materialize", catalog) == (
        CreateDatabasePlan("materialize", if_not_exists=True)
    )
    assert plan_statement("CREATE SCHEMA s", catalog) == CreateSchemaPlan("materialize", "s")
    assert plan_statement("CREATE SCHEMA IF NOT EXISTS public", catalog) == CreateSchemaPlan(
        "materialize", "public", if_not_exists=True
    )
    catalog.apply(plan_statement("CREATE DATABASE d", catalog))
    assert catalog.schema_exists("d", "public")  # as Materialize creates it
    assert plan_statement("CREATE SCHEMA d.s2", catalog) == CreateSchemaPlan("d", "s2")
    catalog.apply(plan_statement("CREATE SCHEMA d.s2", catalog))
    assert catalog.schema_exists("d", "s2")
    plan = plan_statement("CREATE TABLE d.s2.x (a int)", catalog)
    assert plan.name == QualifiedName("d", "s2", "x")  # type: ignore[attr-defined]


def test_create_namespace_errors() -> None:
    catalog = make_catalog()
    assert "database 'materialize' already exists" in fails(
        "CREATE DATABASE materialize", DuplicateObject, "42P04", 17, catalog
    )
    assert "schema 'public' already exists" in fails(
        "CREATE SCHEMA public", DuplicateObject, "42P06", 15, catalog
    )
    assert "unknown database 'nodb'" in fails(
        "CREATE SCHEMA nodb.s", UnknownDatabase, "3D000", 15, catalog
    )
    fails("CREATE SCHEMA a.b.c", ParseError, "42601", 15, catalog)
    fails("CREATE DATABASE a.b", ParseError, "42601", 17, catalog)


def test_create_item_in_unknown_schema_or_database() -> None:
    catalog = make_catalog()
    assert "unknown schema 'nope'" in fails(
        "CREATE TABLE nope.t (a int)", UnknownSchema, "3F000", 14, catalog
    )
    fails("CREATE VIEW nodb.public.v AS SELECT 1", UnknownDatabase, "3D000", 13, catalog)


def test_drop_schema_and_database() -> None:
    catalog = InMemoryCatalog(schemas=("s",))
    assert plan_statement("DROP SCHEMA s", catalog) == DropSchemaPlan("materialize", "s")
    assert plan_statement("DROP SCHEMA materialize.s CASCADE", catalog) == DropSchemaPlan(
        "materialize", "s", cascade=True
    )
    assert plan_statement("DROP SCHEMA IF EXISTS nope RESTRICT", catalog) == DropSchemaPlan(
        "materialize", "nope", if_exists=True
    )
    assert plan_statement("DROP DATABASE materialize CASCADE", catalog) == DropSchemaPlan(
        "materialize", None, cascade=True
    )
    assert plan_statement("DROP DATABASE IF EXISTS nodb", catalog) == DropSchemaPlan(
        "nodb", None, if_exists=True
    )
    fails("DROP SCHEMA nope", UnknownSchema, "3F000", 13, catalog)
    fails("DROP SCHEMA nodb.s", UnknownDatabase, "3D000", 13, catalog)
    fails("DROP DATABASE nodb", UnknownDatabase, "3D000", 15, catalog)
    fails("DROP SCHEMA s, public", UnsupportedFeature, "0A000", 16, catalog)


def test_in_memory_catalog_applies_schema_drops() -> None:
    catalog = InMemoryCatalog(schemas=("s",))
    catalog.apply(plan_statement("CREATE TABLE s.t (a int)", catalog))
    with pytest.raises(DependentObjects):
        catalog.apply(plan_statement("DROP SCHEMA s", catalog))
    catalog.apply(plan_statement("DROP SCHEMA s CASCADE", catalog))
    assert not catalog.schema_exists("materialize", "s") and catalog.items() == []


# --- ALTER -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "kind", "gid", "old", "new"),
    [
        ("ALTER TABLE t RENAME TO t2", ItemKind.TABLE, 1, "t", "t2"),
        ('ALTER VIEW public.v RENAME TO "V2"', ItemKind.VIEW, 4, "v", "V2"),
        ("ALTER MATERIALIZED VIEW mv RENAME TO mv2", ItemKind.MATERIALIZED_VIEW, 5, "mv", "mv2"),
        ("ALTER INDEX i RENAME TO j", ItemKind.INDEX, 6, "i", "j"),
    ],
)
def test_alter_rename(sql: str, kind: ItemKind, gid: int, old: str, new: str) -> None:
    catalog = catalog_with_objects()
    plan = plan_statement(sql, catalog)
    assert plan == AlterRenamePlan(kind, GlobalId.user(gid), qn(old), qn(new))
    catalog.apply(plan)
    assert catalog.resolve((new,)).id == GlobalId.user(gid)
    with pytest.raises(UnknownObject):
        catalog.resolve((old,))


def test_alter_rename_source_and_other_schema() -> None:
    catalog = InMemoryCatalog(schemas=("s",))
    catalog.apply(plan_statement("CREATE SOURCE s.c FROM LOAD GENERATOR COUNTER", catalog))
    plan = plan_statement("ALTER SOURCE s.c RENAME TO c2", catalog)
    assert plan == AlterRenamePlan(ItemKind.SOURCE, GlobalId.user(1), qn("c", "s"), qn("c2", "s"))
    catalog.apply(
        plan_statement("CREATE SOURCE a FROM LOAD GENERATOR AUCTION FOR ALL TABLES", catalog)
    )
    assert "subsource" in fails(
        "ALTER SOURCE bids RENAME TO b", UnsupportedFeature, "0A000", 29, catalog
    )


def test_alter_rename_errors() -> None:
    assert "is a table, not a view" in fails(
        "ALTER VIEW t RENAME TO t2", WrongObjectType, "42809", 12
    )
    assert "is a materialized view, not a view" in fails(
        "ALTER VIEW mv RENAME TO x", WrongObjectType, "42809", 12
    )
    assert "'materialize.public.u' already exists" in fails(
        "ALTER TABLE t RENAME TO u", DuplicateObject, "42P07", 25
    )
    fails("ALTER TABLE t RENAME TO i", DuplicateObject, "42P07", 25)  # one namespace
    fails("ALTER TABLE nope RENAME TO x", UnknownObject, "42P01", 13)
    fails("ALTER TABLE IF EXISTS nope RENAME TO x", UnsupportedFeature, "0A000", 23)
    fails("ALTER TABLE t ADD COLUMN z int", UnsupportedFeature, "0A000", 13)


def test_alter_retain_history() -> None:
    catalog = catalog_with_objects()
    assert plan_statement("ALTER TABLE t SET (RETAIN HISTORY = FOR '1h')", catalog) == (
        AlterRetainHistoryPlan(ItemKind.TABLE, GlobalId.user(1), qn("t"), 3_600_000)
    )
    assert plan_statement("ALTER MATERIALIZED VIEW mv SET (RETAIN HISTORY FOR '30s')", catalog) == (
        AlterRetainHistoryPlan(ItemKind.MATERIALIZED_VIEW, GlobalId.user(5), qn("mv"), 30_000)
    )
    assert plan_statement("ALTER INDEX i RESET (RETAIN HISTORY)", catalog) == (
        AlterRetainHistoryPlan(ItemKind.INDEX, GlobalId.user(6), qn("i"), None)
    )


def test_alter_retain_history_errors() -> None:
    fails("ALTER VIEW v SET (RETAIN HISTORY FOR '1h')", WrongObjectType, "42809", 12)
    fails("ALTER TABLE t SET (RETAIN HISTORY FOR 'soon')", InvalidParameter, "22023", 39)
    fails("ALTER TABLE t SET (SIZE = 3)", UnsupportedFeature, "0A000", 20)
    fails("ALTER TABLE t RESET (RETAIN HISTORY = FOR '1h')", ParseError, "42601", 22)


# --- SHOW --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SHOW OBJECTS", ShowObjectsPlan(ShowKind.OBJECTS, "materialize", "public")),
        ("SHOW TABLES", ShowObjectsPlan(ShowKind.TABLES, "materialize", "public")),
        ("SHOW SOURCES FROM s", ShowObjectsPlan(ShowKind.SOURCES, "materialize", "s")),
        ("SHOW VIEWS FROM materialize.s", ShowObjectsPlan(ShowKind.VIEWS, "materialize", "s")),
        (
            "SHOW MATERIALIZED VIEWS LIKE 'm%'",
            ShowObjectsPlan(ShowKind.MATERIALIZED_VIEWS, "materialize", "public", like="m%"),
        ),
        ("SHOW INDEXES", ShowObjectsPlan(ShowKind.INDEXES, "materialize", "public")),
        (
            "SHOW INDEXES ON t",
            ShowObjectsPlan(ShowKind.INDEXES, "materialize", "public", on=GlobalId.user(1)),
        ),
        ("SHOW SCHEMAS", ShowObjectsPlan(ShowKind.SCHEMAS, "materialize")),
        ("SHOW SCHEMAS FROM materialize", ShowObjectsPlan(ShowKind.SCHEMAS, "materialize")),
        ("SHOW DATABASES LIKE 'x'", ShowObjectsPlan(ShowKind.DATABASES, like="x")),
        ("SHOW CLUSTERS", ShowObjectsPlan(ShowKind.CLUSTERS)),
    ],
)
def test_show_objects(sql: str, expected: ShowObjectsPlan) -> None:
    catalog = make_catalog()
    catalog.schemas.add(("materialize", "s"))
    assert plan_statement(sql, catalog) == expected


def test_show_objects_uses_the_first_search_path_schema() -> None:
    catalog = InMemoryCatalog(database="db", search_path=("first", "second"))
    assert plan_statement("SHOW TABLES", catalog) == ShowObjectsPlan(ShowKind.TABLES, "db", "first")


def test_show_objects_errors() -> None:
    fails("SHOW TABLES FROM nope", UnknownSchema, "3F000", 18)
    fails("SHOW TABLES FROM nodb.s", UnknownDatabase, "3D000", 18)
    fails("SHOW SCHEMAS FROM nodb", UnknownDatabase, "3D000", 19)
    fails("SHOW SCHEMAS FROM a.b", ParseError, "42601", 19)
    fails("SHOW DATABASES FROM x", ParseError, "42601", 21)
    fails("SHOW INDEXES ON nope", UnknownObject, "42P01", 17)
    fails("SHOW INDEXES ON i", WrongObjectType, "42809", 17)
    fails("SHOW TABLES IN CLUSTER c", UnsupportedFeature, "0A000", 16)
    fails("SHOW TABLES WHERE name = 't'", UnsupportedFeature, "0A000", 19)


def test_show_columns_and_create() -> None:
    catalog = catalog_with_objects()
    assert plan_statement("SHOW COLUMNS FROM v", catalog) == ShowColumnsPlan(
        GlobalId.user(4), qn("v")
    )
    assert plan_statement("SHOW CREATE MATERIALIZED VIEW mv", catalog) == ShowCreatePlan(
        ItemKind.MATERIALIZED_VIEW, GlobalId.user(5), qn("mv")
    )
    assert plan_statement("SHOW CREATE INDEX i", catalog) == ShowCreatePlan(
        ItemKind.INDEX, GlobalId.user(6), qn("i")
    )
    fails("SHOW COLUMNS FROM nope", UnknownObject, "42P01", 19)
    fails("SHOW COLUMNS FROM i", WrongObjectType, "42809", 19)
    with pytest.raises(WrongObjectType) as info:
        plan_statement("SHOW CREATE VIEW mv", catalog)
    assert info.value.hint == "Use SHOW CREATE MATERIALIZED VIEW."
