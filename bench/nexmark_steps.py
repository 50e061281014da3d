"""Does a step cost its delta or the data? Tidemark's step time for the same
delta over growing bases.

For each base size (`--bases`, events), each Nexmark query (bench/nexmark_queries.py)
is planned as a materialized view over persist shards (bench/nexmark.py's
`Tidemark`), hydrated in-process, then stepped `--repeat` times, each after
appending the next `--delta` events. Reported per query and base: the median
step seconds, where it ran, and what it read (inputs' deltas, inputs' old
contents, arranged state: `StepResult.reads`), and the ratio of each base's
step time to the smallest base's. A step that costs its delta keeps that
ratio near 1 while the base grows. No Spark: the steps run in-process
(hydration forced there), so this measures the in-process engine alone.
Run it before and after a change on the same machine, side by side.
Writes bench/results/nexmark_steps.json and .md.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.nexmark import RESULTS, Tidemark
from bench.nexmark_queries import QUERIES
from coordinator_lib.compute.dataflow import step
from coordinator_lib.storage.nexmark import NexmarkGenerator


def run_base(events: int, delta: int, repeat: int, names: list[str], seed: int) -> dict[str, Any]:
    """Hydrate every query over `events` events, then time `repeat` steps of
    `delta` events each."""
    with tempfile.TemporaryDirectory() as work:
        generator = NexmarkGenerator(seed, 10_000)
        tidemark = Tidemark(Path(work), [q for q in QUERIES if q.name in names])
        t0 = tidemark.append(generator.events(0, events))
        tidemark.plan(t0)
        out: dict[str, Any] = {}
        for name, view in tidemark.views.items():
            started = time.perf_counter()
            step(None, view.description, view.inputs, view.output, local_max_rows=10**12)  # type: ignore[arg-type]
            out[name] = {"hydrate_s": time.perf_counter() - started, "steps": []}
        for r in range(repeat):
            tidemark.append(generator.events(events + r * delta, delta))
            for name, view in tidemark.views.items():
                started = time.perf_counter()
                result = step(None, view.description, view.inputs, view.output)  # type: ignore[arg-type]
                seconds = time.perf_counter() - started
                assert result is not None and result.landed, name
                reads = getattr(result, "reads", None)
                out[name]["steps"].append(
                    {
                        "seconds": seconds,
                        "engine": str(result.engine),
                        "reads": None if reads is None else vars(reads),
                    }
                )
        tidemark.close()
    for cell in out.values():
        cell["step_s"] = statistics.median(s["seconds"] for s in cell["steps"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", default="10000,100000", help="base sizes in events")
    parser.add_argument("--delta", type=int, default=100, help="events per step")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--queries", default=",".join(q.name for q in QUERIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, default=RESULTS / "nexmark_steps")
    args = parser.parse_args(argv)
    bases = [int(b) for b in args.bases.split(",")]
    names = args.queries.split(",")
    runs = {}
    for base in bases:
        runs[base] = run_base(base, args.delta, args.repeat, names, args.seed)
        print(
            f"base {base:,}: "
            + ", ".join(f"{n} {c['step_s']:.3f}s" for n, c in runs[base].items()),
            flush=True,
        )
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        f"Step seconds (median of {args.repeat}) for a {args.delta}-event delta; ratio to the"
        f" {bases[0]:,}-event base; rows read by the last step (delta/snapshot/state).",
        "",
        "| query | " + " | ".join(f"{b:,} events" for b in bases) + " | ratio | reads at largest |",
        "| --- |" + " --- |" * (len(bases) + 2),
    ]
    for name in names:
        cells = [runs[b][name] for b in bases]
        reads = cells[-1]["steps"][-1]["reads"]
        shown = "-" if reads is None else f"{reads['delta']}/{reads['snapshot']}/{reads['state']}"
        lines.append(
            f"| {name} | "
            + " | ".join(f"{c['step_s']:.3f}" for c in cells)
            + f" | {cells[-1]['step_s'] / cells[0]['step_s']:.1f}x | {shown} |"
        )
    lines += ["", f"Peak RSS of the process: {rss_mb:.0f} MB."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(
        json.dumps({str(b): r for b, r in runs.items()}, indent=1)
    )
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
