"""cProfile of in-process Tidemark steps of a Nexmark query: what bounds them.

`python -m bench.nexmark_profile BASE DELTAS QUERY` hydrates QUERY over BASE
events in-process, then for each delta in DELTAS (comma separated, e.g.
`10,100`) appends that many events and profiles that one step: its time
split into the step's parts (frontier and consensus reads, reading the
deltas, state reads, rendering, landing the output and the state), then the
top functions by cumulative and by own time, to stdout. Two deltas give the
fixed cost per step and the cost per event (their difference).
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path

from bench.nexmark import Tidemark
from bench.nexmark_queries import QUERIES
from coordinator_lib.compute.dataflow import step
from coordinator_lib.storage.nexmark import NexmarkGenerator

# The step's parts, each as (label, file suffix, function): cumulative
# seconds of that function in the profile. They nest (rendering includes the
# state reads and the evaluator), so they are not summed.
PARTS = [
    ("whole step", "compute/dataflow.py", "step"),
    ("engine choice: batch metadata", "compute/dataflow.py", "stored_and_changed_rows"),
    ("input uppers", "compute/dataflow.py", "next_step_bounds"),
    ("open state", "compute/arranged.py", "prepare"),
    ("read input deltas", "compute/arranged.py", "_read_inputs"),
    ("render (incl. state reads)", "compute/local.py", "render_local"),
    ("state reads", "persist/arrangement_store.py", "read"),
    ("state reads (by time)", "persist/arrangement_store.py", "read_between"),
    ("state reads (in order)", "persist/arrangement_store.py", "read_first"),
    ("scalar evaluation", "compute/local_scalar.py", "eval_scalar"),
    ("input errors", "compute/error_collection.py", "input_errors"),
    ("land output", "persist/shard.py", "compare_and_append"),
    ("land state", "compute/arranged.py", "land"),
]


def parts(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Cumulative seconds of each of PARTS found in `stats`."""
    found = []
    table = stats.stats  # type: ignore[attr-defined]
    for label, suffix, function in PARTS:
        total = sum(
            cumulative
            for (file, _line, name), (_cc, _nc, _tt, cumulative, _callers) in table.items()
            if name == function and file.endswith(suffix)
        )
        found.append((label, total))
    return found


class GcTimer:
    """Seconds and collections the cyclic garbage collector took (it
    pauses whatever step runs, in proportion to the objects alive)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1

    def reset(self) -> None:
        self.seconds, self.collections = 0.0, [0, 0, 0]


def main(argv: list[str]) -> int:
    base, deltas, name = int(argv[0]), [int(d) for d in argv[1].split(",")], argv[2]
    with tempfile.TemporaryDirectory() as work:
        generator = NexmarkGenerator(42, 10_000)
        tidemark = Tidemark(Path(work), [q for q in QUERIES if q.name == name])
        tidemark.plan(tidemark.append(generator.events(0, base)))
        view = tidemark.views[name]
        dataflow = (view.description, view.inputs, view.output)
        started = time.perf_counter()
        step(None, *dataflow, local_max_rows=10**12)  # type: ignore[arg-type]
        print("hydrate", time.perf_counter() - started)
        next_event = base
        gc_timer = GcTimer()
        print("objects alive", len(gc.get_objects()))
        for delta in deltas:
            tidemark.append(generator.events(next_event, delta))
            next_event += delta
            # CPU time, not wall time: on a shared machine, time the step
            # waited for a core would land on whichever function ran then.
            profile = cProfile.Profile(time.process_time)
            gc_timer.reset()
            started = time.perf_counter()
            profile.enable()
            result = step(None, *dataflow)  # type: ignore[arg-type]
            profile.disable()
            assert result is not None
            seconds = time.perf_counter() - started
            print(f"\n=== {name} step of {delta} events at {base}: {seconds:.4f} s wall")
            print(result.engine, result.reads)
            print("  (the parts below are CPU time)")
            print(f"  garbage collection {gc_timer.seconds * 1000:.1f} ms {gc_timer.collections}")
            stats = pstats.Stats(profile)
            for label, total in parts(stats):
                print(f"  {label:32} {total * 1000:8.1f} ms")
            stats.sort_stats("cumulative").print_stats(30)
            stats.sort_stats("tottime").print_stats(15)
        tidemark.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
