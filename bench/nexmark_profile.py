"""cProfile of one in-process Tidemark step of a Nexmark query: what bounds it.

`python -m bench.nexmark_profile BASE DELTA QUERY` hydrates QUERY over BASE
events in-process, appends DELTA events and profiles that one step (top
functions by cumulative and by own time, to stdout).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from bench.nexmark import Tidemark
from bench.nexmark_queries import QUERIES
from coordinator_lib.compute.dataflow import step
from coordinator_lib.storage.nexmark import NexmarkGenerator


def main(argv: list[str]) -> int:
    base, delta, name = int(argv[0]), int(argv[1]), argv[2]
    with tempfile.TemporaryDirectory() as work:
        generator = NexmarkGenerator(42, 10_000)
        tidemark = Tidemark(Path(work), [q for q in QUERIES if q.name == name])
        tidemark.plan(tidemark.append(generator.events(0, base)))
        view = tidemark.views[name]
        dataflow = (view.description, view.inputs, view.output)
        started = time.perf_counter()
        step(None, *dataflow, local_max_rows=10**12)  # type: ignore[arg-type]
        print("hydrate", time.perf_counter() - started)
        tidemark.append(generator.events(base, delta))
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        result = step(None, *dataflow)  # type: ignore[arg-type]
        profile.disable()
        assert result is not None
        print("step", time.perf_counter() - started, result.engine, result.reads)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
        tidemark.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
