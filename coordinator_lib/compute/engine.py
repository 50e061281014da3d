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
# A step whose inputs changed by fewer than LOCAL_MAX_ROWS / DELTA_SHARE
# updates runs in-process whatever they store: its stateful operators read
# arranged state at the keys the delta touches (arranged.py), so its cost
# follows the delta, not the data.
DELTA_SHARE = 10
# Building a view's arrangements reads its inputs whole once: in-process up
# to HYDRATE_SHARE * LOCAL_MAX_ROWS stored updates; over that, Spark
# computes each stateful operator's input and the in-process rules key it
# (arranged.hydrate), or, with no Spark session, the view keeps Spark steps.
HYDRATE_SHARE = 5


class Engine(StrEnum):
    LOCAL = "local"  # Python rows in this process (local_backend.py)
    SPARK = "spark"  # DataFrames on the Spark session (spark_backend.py)


class Work(StrEnum):
    STEP = "step"  # a materialized view's step, landed in its output shard
    INDEX_STEP = "index step"  # an index's step, applied to its arrangement (arrangement.py)
    PEEK = "peek"  # a one-off evaluation at one time
    STATE = "state"  # a step of an accumulable view: keep per-group state?


def choose_engine(
    work: Work,
    stored_rows: int,
    local_max_rows: int = LOCAL_MAX_ROWS,
    has_state: bool = False,
    delta_rows: int | None = None,
    arranged: bool = False,
    spark_hydrates: bool = False,
) -> Engine:
    """The engine for `work` over inputs storing `stored_rows` updates, of
    which `delta_rows` (if known) are the step's changes; `arranged`: the
    view has in-process state to step from (or needs none);
    `spark_hydrates`: Spark can build that state, however large the inputs.

    An index's arrangement lives in memory where its steps run: in this
    process while its inputs are small, on Spark once they are larger, and
    there from then on (`has_state`: it is on Spark). A view that keeps
    accumulated state (accumulate.py, Spark only) keeps it once created
    (`has_state`); otherwise state is created when the step would run on
    Spark anyway."""
    if work in (Work.INDEX_STEP, Work.STATE) and has_state:
        return Engine.SPARK
    if work is Work.INDEX_STEP:
        return Engine.LOCAL if stored_rows <= local_max_rows else Engine.SPARK
    if stored_rows <= local_max_rows:
        return Engine.LOCAL
    small = delta_rows is not None and delta_rows < local_max_rows // DELTA_SHARE
    affordable = arranged or spark_hydrates or stored_rows <= HYDRATE_SHARE * local_max_rows
    by_delta = small and affordable and work in (Work.STEP, Work.STATE)
    return Engine.LOCAL if by_delta else Engine.SPARK
