"""The SQL layer: parse Materialize's dialect with sqlglot (`dialect`),
resolve and type statements against a catalog (`catalog`, `scope`, `scalar`,
`query`), and produce plans (`plans`) whose relation expressions the compute
layer renders; `explain` prints them.

Entry points: `plan_statement(sql, catalog)` and `plan_statements(sql, catalog)`.
"""

from coordinator_lib.sql.catalog import (
    CatalogItem,
    InMemoryCatalog,
    ItemKind,
    QualifiedName,
    SqlCatalog,
)
from coordinator_lib.sql.dialect import Tidemark, parse_sql
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.explain import explain, explain_plan
from coordinator_lib.sql.plan import (
    parse_statements,
    plan_parsed,
    plan_statement,
    plan_statements,
)
from coordinator_lib.sql.plans import (
    AsOfTime,
    ColumnOrder,
    CreateIndexPlan,
    CreateSourcePlan,
    CreateTablePlan,
    CreateViewPlan,
    DeletePlan,
    DropPlan,
    ExplainPlan,
    InsertPlan,
    Plan,
    RowSetFinishing,
    SelectPlan,
    UpdatePlan,
)

__all__ = [
    "AsOfTime",
    "CatalogItem",
    "ColumnOrder",
    "CreateIndexPlan",
    "CreateSourcePlan",
    "CreateTablePlan",
    "CreateViewPlan",
    "DeletePlan",
    "DropPlan",
    "ExplainPlan",
    "InMemoryCatalog",
    "InsertPlan",
    "ItemKind",
    "Plan",
    "QualifiedName",
    "RowSetFinishing",
    "SelectPlan",
    "SqlCatalog",
    "SqlError",
    "Tidemark",
    "UpdatePlan",
    "explain",
    "explain_plan",
    "parse_sql",
    "parse_statements",
    "plan_parsed",
    "plan_statement",
    "plan_statements",
]
