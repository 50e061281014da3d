"""Two OS processes race compare_and_append on one shard (invariant 2: of
two racing writers exactly one wins, the loser changes nothing)."""

from __future__ import annotations

import multiprocessing
import queue
from collections import Counter
from pathlib import Path

import pytest

from coordinator_lib.persist import PersistClient
from tests.persist.support import canonical, new_shard_id
from tests.persist.workers import RACE_DESC, RACE_ROWS, race_worker

ROUNDS = 40

pytestmark = pytest.mark.slow


def test_exactly_one_writer_wins_each_round(consensus_url: str, tmp_path: Path) -> None:
    blob_root = tmp_path / "blob"
    client = PersistClient.open(consensus_url=consensus_url, blob_root=blob_root)
    shard_id = new_shard_id("race")
    shard = client.open_shard(shard_id, RACE_DESC)

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    args = (consensus_url, str(blob_root), shard_id, ROUNDS, barrier, results)
    procs = [ctx.Process(target=race_worker, args=args) for _ in range(2)]
    for proc in procs:
        proc.start()
    reports = []
    try:
        for _ in procs:
            reports.append(results.get(timeout=180))
    except queue.Empty:
        pytest.fail("a racer did not report within 180 s")
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    errors = [err for _, _, err in reports if err]
    assert not errors, errors[0]

    wins: dict[int, int] = {}  # round -> winning pid
    per_round: Counter[int] = Counter()
    for pid, outcomes, _ in reports:
        assert [rnd for rnd, _, _ in outcomes] == list(range(ROUNDS))
        for rnd, upper, outcome in outcomes:
            assert upper == rnd  # both read the same upper: one append per round
            per_round[rnd] += 1
            if outcome == "won":
                assert rnd not in wins, f"round {rnd}: both writers won"
                wins[rnd] = pid
    assert sorted(wins) == list(range(ROUNDS)), "a round without a winner"
    assert all(per_round[rnd] == 2 for rnd in range(ROUNDS))
    assert sum(1 for _, outcomes, _ in reports for o in outcomes if o[2] == "lost") == ROUNDS

    upper = shard.upper().time
    assert upper == ROUNDS
    expected = canonical(((pid, rnd, i), 1) for rnd, pid in wins.items() for i in range(RACE_ROWS))
    assert canonical(shard.snapshot(upper - 1)) == expected
    # Losers deleted the batches they wrote: only the winners' are stored.
    state = shard.state()
    assert len(state.batches) == ROUNDS
    # Blobs of named batches only (an inline batch has none).
    assert set(client.blob.list_batches(shard_id)) == {
        b.key for b in state.batches if b.inline is None
    }
    client.close()
