"""Which engine runs a piece of compute work: Spark or in-process.

One policy for every caller (a dataflow's step, an index's step, a one-off
peek, the choice to keep accumulated state), so a later policy (by the size
of the delta rather than of the stored inputs) changes one function.
"""

from __future__ import annotations

from enum import StrEnum

# Work whose inputs store at most this many updates runs in-process
# (Spark's per-job overhead would dominate it).
LOCAL_MAX_ROWS = 200_000


class Engine(StrEnum):
    LOCAL = "local"  # Python rows in this process (local_backend.py)
    SPARK = "spark"  # DataFrames on the Spark session (spark_backend.py)


class Work(StrEnum):
    STEP = "step"  # a materialized view's step, landed in its output shard
    INDEX_STEP = "index step"  # an index's step, applied to its Spark arrangement
    PEEK = "peek"  # a one-off evaluation at one time
    STATE = "state"  # a step of an accumulable view: keep per-group state?


def choose_engine(
    work: Work, stored_rows: int, local_max_rows: int = LOCAL_MAX_ROWS, has_state: bool = False
) -> Engine:
    """The engine for `work` over inputs storing `stored_rows` updates.

    An index's arrangement lives in Spark memory, so its steps run on Spark.
    A view that keeps accumulated state (accumulate.py, Spark only) keeps
    it once created (`has_state`); otherwise state is created when the step
    would run on Spark anyway."""
    if work is Work.INDEX_STEP or (work is Work.STATE and has_state):
        return Engine.SPARK
    return Engine.LOCAL if stored_rows <= local_max_rows else Engine.SPARK
