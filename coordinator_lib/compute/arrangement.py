"""An index: a view's contents kept in the replica's Spark memory.

The arrangement holds a consolidated base at `since` and the updates after
it, each eagerly checkpointed in Spark's block manager (`localCheckpoint`),
so a peek reads memory, never persist, and never re-runs the plan that
produced the data (whose input holds have since moved on). `compact(since)`
folds old updates into the base, as compaction does for a shard.

Its errors (compute/error_collection.py) are kept beside it as updates
(code, message) in memory, compacted with it; a peek at a time where they
are non-empty answers with the first (`errors_at`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from coordinator_lib.repr.update import Update, consolidate

# Fold updates into the base once this many batches have piled up.
MAX_UPDATE_BATCHES = 8


class Arrangement:
    def __init__(self, desc: RelationDesc, key: tuple[int, ...], as_of: int) -> None:
        self.desc = desc
        self.key = key
        self.since = Frontier.at(as_of)
        self.upper = Frontier.at(as_of)
        self.base: DataFrame | None = None
        self.updates: list[DataFrame] = []
        # Rows (with multiplicity) at the upper: the sum of every applied
        # delta's diffs, kept so the maintaining process can say how big the
        # index is without reading it (tidemark serve's heartbeat reports it).
        self.rows = 0
        self.errors: list[Update] = []

    @property
    def key_names(self) -> list[str]:
        return [self.desc.names[i] for i in self.key]

    def _quoted(self) -> list[str]:
        return [f"`{n}`" for n in self.desc.names]

    def apply(
        self,
        delta: DataFrame | None,
        lower: int,
        upper: Frontier,
        errors: Iterable[Update] = (),
    ) -> None:
        """Add a step's updates and error updates for [lower, upper) (times as
        in the delta); an empty `upper` closes the arrangement (its inputs
        are closed)."""
        if self.upper != Frontier.at(lower):
            raise ValueError(f"arrangement at {self.upper!r} cannot take a step from {lower}")
        if delta is not None:
            keyed = (
                delta.repartition(*[F.col(f"`{n}`") for n in self.key_names]) if self.key else delta
            )
            checkpointed = keyed.localCheckpoint(eager=True)
            self.updates.append(checkpointed)
            total = checkpointed.agg(F.sum(DIFF_COLUMN)).first()
            self.rows += int(total[0] or 0) if total is not None else 0
        self.errors = consolidate([*self.errors, *errors])
        self.upper = upper
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

    def errors_at(self, as_of: int) -> list[tuple[str, str]]:
        """The (code, message) of the errors present at `as_of`, sorted."""
        counts: Counter[tuple[str, str]] = Counter()
        for error in self.errors:
            if error.time <= as_of:
                counts[(error.row[0], error.row[1])] += error.diff
        return sorted(e for e, n in counts.items() if n > 0)

    def peek(self, as_of: int) -> DataFrame | None:
        """The contents at `as_of` (since <= as_of < upper): data columns and
        `__diff`; None when empty by construction."""
        if not self.since.less_equal(as_of) or self.upper.less_equal(as_of):
            raise ValueError(
                f"index cannot answer at {as_of}: readable from {self.since!r} until {self.upper!r}"
            )
        return self._contents_at(as_of)

    def compact(self, since: Frontier) -> None:
        """Advance the since (never backwards) and fold older updates into the base."""
        target = max(self.since, min(since, Frontier.at(max((self.upper.time or 1) - 1, 0))))
        assert target.time is not None
        base = self._contents_at(target.time)
        self.base = None if base is None else base.localCheckpoint(eager=True)
        self.updates = [
            u.filter(F.col(TIME_COLUMN) > target.time).localCheckpoint(eager=True)
            for u in self.updates
        ]
        self.updates = [u for u in self.updates if not u.isEmpty()]
        self.errors = consolidate([e._replace(time=max(e.time, target.time)) for e in self.errors])
        self.since = target
