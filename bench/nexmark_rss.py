"""Memory of the Nexmark bench's engines: the RSS of a process tree, sampled.

Why its own module: the DuckDB and SDP workers (bench/nexmark_duckdb.py,
bench/nexmark_sdp.py) measure themselves with it, and importing it must not
pull PySpark into the DuckDB worker, whose own RSS is what it reports.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PeakRss", "process_tree"]


def _rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def process_tree(root: int, exclude: Iterable[int] = ()) -> list[int]:
    """`root` and its descendants (Linux /proc), minus `exclude` and theirs."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    skip, tree, todo = set(exclude), [], [root]
    while todo:
        pid = todo.pop()
        if pid in skip:
            continue
        tree.append(pid)
        todo.extend(parents.get(pid, []))
    return tree


class PeakRss:
    """Samples the summed RSS of a process tree every 10 ms while open: the
    peak in MB, and how far it rose above where it started."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.start_bytes = self.peak_bytes = sum(_rss_bytes(p) for p in pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak_bytes = max(self.peak_bytes, sum(_rss_bytes(p) for p in self.pids))

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, sum(_rss_bytes(p) for p in self.pids))

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20

    @property
    def growth_mb(self) -> float:
        return (self.peak_bytes - self.start_bytes) / 2**20
