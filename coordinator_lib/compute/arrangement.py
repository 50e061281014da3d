"""An index: a view's contents kept in the replica's memory.

An arrangement holds the updates from `since` on (those before it folded
into `since`), so a peek reads memory, never persist, and never re-runs the
plan that produced the data (whose input holds have since moved on).
`compact(since)` folds old updates forward, as compaction does for a shard.

Where the memory is follows the engine that steps the index
(`engine.choose_engine`): a `LocalArrangement` keeps Python updates in this
process while the index's inputs are small, so an index over small data
never starts a JVM; a `SparkArrangement` keeps DataFrames eagerly
checkpointed in Spark's block manager (`localCheckpoint`) once they are
larger. A local arrangement whose inputs outgrow the local engine moves to
Spark once (`SparkArrangement.moved_from`), never back.

Its errors (compute/error_collection.py) are kept beside it as updates
(code, message) in memory, compacted with it; a peek at a time where they
are non-empty answers with the first (`errors_at`).
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator_lib.persist.batch import updates_to_table
from coordinator_lib.persist.spark_batches import read_batches_dataframe
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, RelationDesc, column_pylist
from coordinator_lib.repr.update import Row, Update, consolidate, consolidate_rows

# Fold a Spark arrangement's updates into its base once this many batches have piled up.
MAX_UPDATE_BATCHES = 8


class Arrangement(ABC):
    """What both kinds share: the frontiers, the size and the errors."""

    def __init__(self, desc: RelationDesc, key: tuple[int, ...], as_of: int) -> None:
        self.desc = desc
        self.key = key
        self.since = Frontier.at(as_of)
        self.upper = Frontier.at(as_of)
        # Rows (with multiplicity) at the upper: the sum of every applied
        # delta's diffs, kept so the maintaining process can say how big the
        # index is without reading it (tidemark serve's heartbeat reports it).
        self.rows = 0
        self.errors: list[Update] = []

    def _starts_at_upper(self, lower: int) -> None:
        if self.upper != Frontier.at(lower):
            raise ValueError(f"arrangement at {self.upper!r} cannot take a step from {lower}")

    def _advance(self, lower: int, upper: Frontier, errors: Iterable[Update]) -> None:
        """Check a step starts at the upper, then take its errors and upper."""
        self._starts_at_upper(lower)
        self.errors = consolidate([*self.errors, *errors])
        self.upper = upper

    def _readable(self, as_of: int) -> None:
        if not self.since.less_equal(as_of) or self.upper.less_equal(as_of):
            raise ValueError(
                f"index cannot answer at {as_of}: readable from {self.since!r} until {self.upper!r}"
            )

    def _compaction_target(self, since: Frontier) -> int:
        """The since `compact(since)` moves to: never backwards, never past
        the last time a step wrote."""
        target = max(self.since, min(since, Frontier.at(max((self.upper.time or 1) - 1, 0))))
        assert target.time is not None
        return target.time

    def errors_at(self, as_of: int) -> list[tuple[str, str]]:
        """The (code, message) of the errors present at `as_of`, sorted."""
        counts: Counter[tuple[str, str]] = Counter()
        for error in self.errors:
            if error.time <= as_of:
                counts[(error.row[0], error.row[1])] += error.diff
        return sorted(e for e, n in counts.items() if n > 0)

    def _compact_errors(self, target: int) -> None:
        self.errors = consolidate([e._replace(time=max(e.time, target)) for e in self.errors])

    @abstractmethod
    def peek_rows(self, as_of: int) -> list[tuple[Row, int]]:
        """The contents at `as_of` (since <= as_of < upper), consolidated."""

    @abstractmethod
    def compact(self, since: Frontier) -> None:
        """Advance the since (never backwards) and fold older updates into it."""


class LocalArrangement(Arrangement):
    """Python rows in this process: the contents at since (row -> count)
    and the updates after it. Compaction folds only the updates it passes
    into the base, so it costs what the steps since the last one added,
    not the index's size."""

    def __init__(self, desc: RelationDesc, key: tuple[int, ...], as_of: int) -> None:
        super().__init__(desc, key, as_of)
        self.base: dict[Row, int] = {}
        self.updates: list[Update] = []  # at times after since

    def apply(
        self, updates: list[Update], lower: int, upper: Frontier, errors: Iterable[Update] = ()
    ) -> None:
        """Add a step's updates and error updates for [lower, upper)."""
        self._advance(lower, upper, errors)
        self.updates += updates
        self.rows += sum(u.diff for u in updates)

    def contents(self) -> list[Update]:
        """The base (at since) and the updates after it."""
        assert self.since.time is not None
        at_since = [Update(row, self.since.time, count) for row, count in self.base.items()]
        return [*at_since, *self.updates]

    def peek_rows(self, as_of: int) -> list[tuple[Row, int]]:
        self._readable(as_of)
        later = ((u.row, u.diff) for u in self.updates if u.time <= as_of)
        return consolidate_rows([*self.base.items(), *later])

    def compact(self, since: Frontier) -> None:
        target = self._compaction_target(since)
        kept = []
        for update in self.updates:
            if update.time > target:
                kept.append(update)
                continue
            count = self.base.pop(update.row, 0) + update.diff
            if count != 0:
                self.base[update.row] = count
        self.updates = kept
        self._compact_errors(target)
        self.since = Frontier.at(target)


class SparkArrangement(Arrangement):
    """A consolidated base at since and the updates after it, as DataFrames
    checkpointed in Spark's block manager, partitioned by the index key."""

    def __init__(self, desc: RelationDesc, key: tuple[int, ...], as_of: int) -> None:
        super().__init__(desc, key, as_of)
        self.base: DataFrame | None = None
        self.updates: list[DataFrame] = []

    @classmethod
    def moved_from(cls, spark: SparkSession, local: LocalArrangement) -> SparkArrangement:
        """The same arrangement (frontiers, rows, errors) with its updates on
        Spark: written as Parquet the way persist writes batches, read back
        by Spark and checkpointed, then the file is removed."""
        moved = cls(local.desc, local.key, 0)
        moved.since, moved.upper = local.since, local.upper
        moved.rows, moved.errors = local.rows, list(local.errors)
        contents = local.contents()
        if contents:
            with tempfile.TemporaryDirectory(prefix="tidemark-index-") as directory:
                pq.write_table(
                    updates_to_table(contents, local.desc), Path(directory) / "part.parquet"
                )
                frame = read_batches_dataframe(spark, [directory], local.desc)
                moved.updates.append(moved._keyed(frame).localCheckpoint(eager=True))
        return moved

    @property
    def key_names(self) -> list[str]:
        return [self.desc.names[i] for i in self.key]

    def _quoted(self) -> list[str]:
        return [f"`{n}`" for n in self.desc.names]

    def _keyed(self, frame: DataFrame) -> DataFrame:
        return frame.repartition(*[F.col(f"`{n}`") for n in self.key_names]) if self.key else frame

    def apply(
        self,
        delta: DataFrame | None,
        lower: int,
        upper: Frontier,
        errors: Iterable[Update] = (),
    ) -> None:
        """Add a step's updates and error updates for [lower, upper) (times as
        in the delta); an empty `upper` closes the arrangement (its inputs
        are closed). The checkpoint runs the step's Spark job, before the
        arrangement changes: a value that fails it leaves it as it was."""
        self._starts_at_upper(lower)  # before the job runs
        if delta is not None:
            checkpointed = self._keyed(delta).localCheckpoint(eager=True)
            self.updates.append(checkpointed)
            total = checkpointed.agg(F.sum(DIFF_COLUMN)).first()
            self.rows += int(total[0] or 0) if total is not None else 0
        self._advance(lower, upper, errors)
        if len(self.updates) > MAX_UPDATE_BATCHES:
            self.compact(self.since)

    def _contents_at(self, as_of: int) -> DataFrame | None:
        parts = [] if self.base is None else [self.base]
        for update in self.updates:
            parts.append(update.filter(F.col(TIME_COLUMN) <= as_of).drop(TIME_COLUMN))
        if not parts:
            return None
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        return (
            union.groupBy(*self._quoted())
            .agg(F.sum(DIFF_COLUMN).alias(DIFF_COLUMN))
            .filter(F.col(DIFF_COLUMN) != 0)
        )

    def peek_rows(self, as_of: int) -> list[tuple[Row, int]]:
        self._readable(as_of)
        frame = self._contents_at(as_of)
        if frame is None:
            return []
        table = frame.toArrow()
        columns = [column_pylist(table.column(n)) for n in self.desc.names]
        diffs = table.column(DIFF_COLUMN).to_pylist()
        return [(tuple(c[i] for c in columns), diffs[i]) for i in range(table.num_rows)]

    def compact(self, since: Frontier) -> None:
        target = self._compaction_target(since)
        base = self._contents_at(target)
        self.base = None if base is None else base.localCheckpoint(eager=True)
        self.updates = [
            u.filter(F.col(TIME_COLUMN) > target).localCheckpoint(eager=True) for u in self.updates
        ]
        self.updates = [u for u in self.updates if not u.isEmpty()]
        self._compact_errors(target)
        self.since = Frontier.at(target)
