"""The deterministic simulation over thousands of seeds (see
coordinator_lib/scheduler/simulation.py for what each run checks), its
determinism, and proof that it catches a broken protocol."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.scheduler import memory_executor, replication_set, simulation
from coordinator_lib.scheduler.agent import Agent
from coordinator_lib.scheduler.lease import LeaseFence
from coordinator_lib.scheduler.messages import TableState
from coordinator_lib.scheduler.simulation import (
    SimStats,
    SimulationError,
    random_config,
    run_simulation,
)

CHUNK = 100
FAST_CHUNKS = 12  # 1,200 seeds
SLOW_CHUNKS = 1  # 1,000 more (2,200 seeds in all; each chunk of 1,000 costs about 25 s)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def quiet_scheduler_logs() -> Iterator[None]:
    """Thousands of runs log thousands of expected warnings."""
    logger = logging.getLogger("coordinator_lib.scheduler")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def sweep(seeds: range) -> SimStats:
    total = SimStats()
    for seed in seeds:
        stats = run_simulation(seed)
        for field in dataclasses.fields(total):
            setattr(total, field.name, getattr(total, field.name) + getattr(stats, field.name))
    return total


def network_faults_happened(stats: SimStats) -> bool:
    """The network really dropped, duplicated and reordered messages."""
    return stats.drops > 0 and stats.duplicates > 0 and stats.reorders > 0


@pytest.mark.parametrize("chunk", range(FAST_CHUNKS))
def test_simulation_sweep(chunk: int) -> None:
    seeds = range(chunk * CHUNK, (chunk + 1) * CHUNK)
    stats = sweep(seeds)
    # The faults really happened, and everything finished.
    assert stats.drains_done == len(seeds)
    assert stats.moves_done > len(seeds)
    assert stats.restarts > len(seeds) and stats.elections > len(seeds)
    assert stats.landed_writes > 0
    assert network_faults_happened(stats)
    # Moves and drains requested during the faults were followed to the end.
    assert stats.chaos_moves_done > 0 and stats.chaos_drains_done > 0


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(SLOW_CHUNKS))
def test_simulation_big_sweep(chunk: int) -> None:
    start = FAST_CHUNKS * CHUNK + chunk * 1_000
    stats = sweep(range(start, start + 1_000))
    assert stats.fenced_writes > 0  # zombie writers stopped at their fence
    assert stats.stale_lands > 0  # a zombie's step in flight landed: the CaS decided


ZOMBIES = {
    "capture_pause": 0.05,
    "capture_pause_ticks": 40,  # long enough for the task to move meanwhile
    "slow_step": 0.5,
    "executor_delay": 0,
    "max_delay": 1,
}
"""Captures often frozen (with steps in flight) while their tasks move."""


def test_zombies_stop_and_the_cas_decides() -> None:
    """Captures frozen past their lease resume: a step they had in flight
    reaches its compare-and-append, which lands only if nobody advanced the
    task meanwhile (else it loses the race); either way the incarnation
    then stops acting as primary (fenced) and comes back as a new one."""
    total = SimStats()
    for seed in range(30):
        config = dataclasses.replace(random_config(seed), **ZOMBIES)
        stats = run_simulation(seed, config)
        total.fenced_writes += stats.fenced_writes
        total.stale_lands += stats.stale_lands
        total.lost_races += stats.lost_races
    assert total.fenced_writes > 0
    assert total.stale_lands > 0
    assert total.lost_races > 0


_FINGERPRINT = """
import json, logging, sys
logging.disable(logging.CRITICAL)
from coordinator_lib.scheduler.simulation import Simulation, random_config
out = []
for seed in map(int, sys.argv[1:]):
    sim = Simulation(seed, random_config(seed))
    stats = sim.run()
    out.append([seed, stats.__dict__, sim.events])
print(json.dumps(out))
"""


def test_runs_are_reproducible_across_processes() -> None:
    """Same seed, same run, whatever the interpreter's string hashing."""
    results = []
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        proc = subprocess.run(
            [sys.executable, "-c", _FINGERPRINT, "3", "17", "42"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            check=True,
        )
        results.append(json.loads(proc.stdout))
    assert results[0] == results[1]
    assert all(len(events) > 10 for _, _, events in results[0])


# -- the simulation has teeth ------------------------------------------------------


def first_failure(seeds: range, **tweaks) -> str:
    for seed in seeds:
        try:
            run_simulation(seed, dataclasses.replace(random_config(seed), **tweaks))
        except SimulationError as error:
            return str(error).splitlines()[0]
    return ""


def test_catches_promotion_before_the_old_primary_stopped(monkeypatch) -> None:
    poll_on_commit = replication_set.ReplicationSet._poll_on_commit

    def eager(self, status, capture_id):
        if status.state == TableState.PREPARED and self.primary and capture_id != self.primary:
            self._clear_primary()  # "forget" the old primary: promote at once
        return poll_on_commit(self, status, capture_id)

    monkeypatch.setattr(replication_set.ReplicationSet, "_poll_on_commit", eager)
    assert "live writers" in first_failure(range(50))


def test_catches_stopped_reported_before_the_writer_stopped(monkeypatch) -> None:
    finished = memory_executor.InMemoryTableExecutor.is_remove_table_span_finished

    def lying(self, span):
        table = self.tables.get(span)
        if table is not None and table.state == TableState.STOPPING:
            return table.checkpoint.checkpoint_ts, True
        return finished(self, span)

    monkeypatch.setattr(
        memory_executor.InMemoryTableExecutor, "is_remove_table_span_finished", lying
    )
    assert first_failure(range(50))


@pytest.mark.slow
def test_catches_missing_sequence_fence(monkeypatch) -> None:
    """Without `seq`, a stale duplicate AddTableRequest restarts a task on a
    capture it was moved away from."""
    accept = Agent._accept

    def no_seq(self, message):
        return accept(self, dataclasses.replace(message, seq=self._last_owner_seq + 1))

    monkeypatch.setattr(Agent, "_accept", no_seq)
    assert "live writers" in first_failure(range(2_000))


def test_catches_missing_lease_fence(monkeypatch) -> None:
    """Without the worker's lease fence, a capture resuming from a freeze
    past its lease keeps stepping: it reads the upper its successor left and
    lands steps after it (the CaS cannot tell them apart)."""
    monkeypatch.setattr(LeaseFence, "may_write", lambda self: not self.lost.is_set())
    monkeypatch.setattr(LeaseFence, "after_lost_race", lambda self: True)
    assert "two primaries" in first_failure(range(200), **ZOMBIES)


def test_catches_writes_without_the_cas(monkeypatch) -> None:
    """A blind append (no compare on the upper) lets a stale step land over
    times another writer already landed."""
    monkeypatch.setattr(simulation._Shard, "compare_and_append", blind_append)
    assert "two writers landed the same times" in first_failure(range(200), **ZOMBIES)


def blind_append(self, expected_upper: int, new_upper: int) -> bool:
    self.upper = max(self.upper, new_upper)
    return True


def test_catches_network_faults_switched_off(monkeypatch) -> None:
    """A regression that turned the network's faults off fails the sweep's
    check that they happened."""
    init = simulation._Network.__init__

    def perfect(self, sim) -> None:
        init(self, sim)
        self.faulty = False

    monkeypatch.setattr(simulation._Network, "__init__", perfect)
    assert not network_faults_happened(sweep(range(10)))
