"""Differential checking of maintained views against DuckDB.

Tables live in a real persist environment; a view's dataflow is stepped as
the tables advance; after every step the view's snapshot at every readable
time is compared with DuckDB running the same SQL over the tables' snapshots
at that time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
from pyspark.sql import SparkSession

from coordinator_lib.compute.dataflow import DataflowDescription, step
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.persist import PersistClient, Shard
from coordinator_lib.repr import Frontier, GlobalId, RelationDesc, Update


def normalize(value: Any) -> Any:
    """Compare numbers by value whatever engine typed them."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | Decimal):
        return Decimal(value).normalize() if isinstance(value, Decimal) else Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(round(value, 6))).normalize()
    return value


def as_multiset(rows: list[tuple[tuple, int]]) -> Counter:
    out: Counter = Counter()
    for row, diff in rows:
        out[tuple(normalize(v) for v in row)] += diff
    return +out


@dataclass
class Environment:
    """Tables (name -> shard) plus one view under test."""

    spark: SparkSession
    root: Path
    tables: dict[str, tuple[GlobalId, Shard]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client = PersistClient.open(self.root)

    def table(self, name: str, desc: RelationDesc) -> GlobalId:
        id = GlobalId.user(len(self.tables) + 1)
        self.tables[name] = (id, self.client.open_shard(f"table-{name}", desc))
        return id

    def shard(self, name: str) -> Shard:
        return self.tables[name][1]

    def advance(self, name: str, updates: list[Update], upper: int) -> None:
        shard = self.shard(name)
        shard.compare_and_append(updates, shard.upper(), Frontier.at(upper))

    def view_shard(self, name: str, desc: RelationDesc, as_of: int) -> Shard:
        return self.client.open_shard(f"view-{name}", desc, initial_since=as_of)

    def step_view(
        self, description: DataflowDescription, output: Shard, engine: str = "spark"
    ) -> None:
        """One step on the given engine ("spark" or "local")."""
        inputs = {id: shard for id, shard in self.tables.values() if id in description.imports}
        local_max_rows = 0 if engine == "spark" else 10**9
        result = step(self.spark, description, inputs, output, local_max_rows=local_max_rows)
        assert result is None or result.engine == engine

    def duckdb_at(self, sql: str, t: int) -> Counter:
        con = duckdb.connect()
        for name, (_, shard) in self.tables.items():
            desc = shard.desc
            rows = shard.snapshot(t)
            columns = ", ".join(
                f'"{n}" {_duck_type(ty.scalar_type.value)}'
                for n, ty in zip(desc.names, desc.types, strict=True)
            )
            con.execute(f'CREATE TABLE "{name}" ({columns})')
            flat = [row for row, diff in rows for _ in range(diff)]
            if flat:
                marks = ", ".join("?" for _ in desc.names)
                con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', flat)
        result = con.execute(sql).fetchall()
        con.close()
        return as_multiset([(tuple(r), 1) for r in result])

    def check(self, sql: str, output: Shard, since: int) -> int:
        """Compare at every readable time; return how many times were checked."""
        upper = output.upper().time
        assert upper is not None
        checked = 0
        for t in range(since, upper):
            got = as_multiset(output.snapshot(t))
            want = self.duckdb_at(sql, t)
            assert got == want, f"at time {t}: view {dict(got)} != duckdb {dict(want)} for {sql}"
            checked += 1
        return checked


def _duck_type(pg: str) -> str:
    return {"double precision": "DOUBLE", "timestamp with time zone": "TIMESTAMPTZ"}.get(
        pg, pg.upper()
    )


def run_view(
    env: Environment, name: str, expr: RelationExpr, as_of: int
) -> tuple[DataflowDescription, Shard]:
    description = DataflowDescription(GlobalId.user(100), expr, as_of, sink_id=GlobalId.user(100))
    return description, env.view_shard(name, expr.desc, as_of)
