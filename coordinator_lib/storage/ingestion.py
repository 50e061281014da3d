"""Running a load generator into its collection.

Each step appends every tick whose time lies in [upper, now] and advances the
upper to now + 1, through compare_and_append. Tick k's contents depend only on
(seed, output, k), so a restarted or racing ingestion resumes at its shard's
upper with no duplicated or missing ticks: the CaS on the upper decides.
"""

from __future__ import annotations

from coordinator_lib.persist.errors import UpperMismatch
from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.update import Update
from coordinator_lib.storage.collection import IngestionDescription
from coordinator_lib.storage.load_generator import LoadGenerator, make_generator

# A step after a long pause covers at most this many ticks, so one append
# stays small; the next step continues from where it stopped.
MAX_TICKS_PER_STEP = 10_000


def generator_for(description: IngestionDescription) -> LoadGenerator:
    return make_generator(description.generator, **dict(description.options))


def first_tick_at_or_after(description: IngestionDescription, time: int) -> int:
    """The least tick k with start_ms + k * interval >= time."""
    offset = time - description.start_ms
    if offset <= 0:
        return 0
    return -(-offset // description.tick_interval_ms)


def ingestion_step(
    shard: Shard, generator: LoadGenerator, description: IngestionDescription, now_ms: int
) -> Frontier:
    """Append the ticks due by `now_ms`; return the shard's upper afterwards."""
    upper = shard.upper()
    if upper.time is None or now_ms + 1 <= upper.time:
        return upper
    interval = description.tick_interval_ms
    first = first_tick_at_or_after(description, upper.time)
    last_due = (now_ms - description.start_ms) // interval
    last = min(last_due, first + MAX_TICKS_PER_STEP - 1)
    new_upper = now_ms + 1 if last == last_due else description.start_ms + last * interval + 1
    updates = []
    for tick in range(first, last + 1):
        tick_time = description.start_ms + tick * interval
        for row, diff in generator.changes(description.output, tick, tick_time):
            updates.append(Update(row, tick_time, diff))
    try:
        shard.compare_and_append(updates, upper, Frontier.at(new_upper))
    except UpperMismatch as mismatch:
        return mismatch.current  # another process ingested these ticks
    return Frontier.at(new_upper)
