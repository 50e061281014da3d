"""WorkerSupervisor's restart backoff on an injected clock (no sleeps): a
worker that keeps failing quickly waits 0.5 s, 1 s, 2 s, ... up to 30 s
between starts; one that ran for 60 s before failing starts over at 0.5 s.
The workers are real processes (a shell that exits at once)."""

from __future__ import annotations

from pathlib import Path

from coordinator_lib.adapter.cluster_supervisor import WorkerSupervisor

WANTED = {"c": 1}
CAPTURE = "c-0"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def crashing(capture_id: str, cluster: str) -> list[str]:
    return ["sh", "-c", "exit 3"]


def test_backoff_doubles_caps_and_resets(tmp_path: Path) -> None:
    clock = Clock()
    supervisor = WorkerSupervisor(crashing, tmp_path / "logs", clock=clock)
    try:
        supervisor.reconcile(WANTED)
        worker = supervisor.workers[CAPTURE]

        def fail_and_wait() -> float:
            """Let the running worker exit; the wait before its next start."""
            assert worker.process is not None
            worker.process.wait(timeout=30)
            clock.now += 0.01
            supervisor.reconcile(WANTED)
            assert worker.process is None  # not restarted yet
            return round(worker.next_start - clock.now, 2)

        def restart_when_due(wait: float) -> None:
            clock.now += wait - 0.02
            supervisor.reconcile(WANTED)
            assert worker.process is None  # still backing off
            clock.now += 0.02
            supervisor.reconcile(WANTED)
            assert worker.process is not None  # started again

        waits = []
        for _ in range(9):
            waits.append(fail_and_wait())
            restart_when_due(waits[-1])
        assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
        assert worker.restarts == 9
        assert worker.exit_codes == [3] * 9

        # This start "runs" for a minute before it fails: the backoff resets.
        assert worker.process is not None
        worker.process.wait(timeout=30)
        clock.now += 60.0
        supervisor.reconcile(WANTED)
        assert round(worker.next_start - clock.now, 2) == 0.5
        restart_when_due(0.5)
        assert fail_and_wait() == 1.0  # and doubles again from there
        assert (tmp_path / "logs" / f"{CAPTURE}.log").exists()
    finally:
        supervisor.stop_all()
