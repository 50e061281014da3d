"""The table scheduler inside `tidemark serve`: `ClusterService` runs the
scheduler owner (scheduler/owner.py) on a thread of its own and, while this
process is the owner, a `WorkerSupervisor` that keeps each cluster's worker
processes running.

- Workers: `<cluster>-<i>` for i < the cluster's number of workers
  (`clusters.worker_clusters`), each a `tidemark worker --parent-pid <us>`
  subprocess with its log in `<log_dir>/<capture id>.log`. CREATE CLUSTER
  starts a cluster's workers within a tick, DROP CLUSTER stops them
  (SIGTERM: they release their leases; SIGKILL after a timeout).
- A worker that exits is restarted after a backoff that doubles with each
  quick failure (from `backoff_initial_s` up to `backoff_max_s`) and resets
  once it has run for `stable_s`.
- Only the owner supervises: a process that loses the owner lease stops its
  workers at once (the new owner starts its own; two processes with one
  capture id would keep superseding each other's lease), and workers exit by
  themselves when their parent dies.
- Every process, owner or not, periodically moves views between this
  process's replica and the replica-less worker instance when their
  cluster gains or loses workers (`clusters.sync_view_instances`).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from coordinator_lib.adapter import clusters
from coordinator_lib.adapter.secrets_key import worker_environment
from coordinator_lib.scheduler.messages import Barrier
from coordinator_lib.scheduler.owner import NotOwner, Owner

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def capture_ids(wanted: dict[str, int]) -> dict[str, str]:
    """Capture id -> cluster for the wanted workers: `<cluster>-<i>`."""
    return {
        f"{_UNSAFE.sub('_', cluster)}-{i}": cluster
        for cluster, count in sorted(wanted.items())
        for i in range(count)
    }


@dataclass
class _Worker:
    capture_id: str
    cluster: str
    process: subprocess.Popen | None = None
    log_file: IO[bytes] | None = None
    started_at: float = 0.0
    next_start: float = 0.0
    failures: int = 0
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)


class WorkerSupervisor:
    """Starts, restarts (with backoff) and stops worker processes."""

    def __init__(
        self,
        command: Callable[[str, str], list[str]],
        log_dir: Path,
        *,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        stable_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        env: dict[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`command(capture_id, cluster)`: the argv of one worker; `clock`:
        seconds, for backoffs (tests inject one)."""
        self.command = command
        self.log_dir = log_dir
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.stable_s = stable_s
        self.stop_timeout_s = stop_timeout_s
        self.env = env
        self.clock = clock
        self.workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()

    def reconcile(self, wanted: dict[str, int]) -> None:
        """Make the running workers match `wanted` (cluster -> count)."""
        desired = capture_ids(wanted)
        now = self.clock()
        with self._lock:
            for capture_id in sorted(set(self.workers) - set(desired)):
                self._stop(self.workers.pop(capture_id))
            for capture_id, cluster in desired.items():
                worker = self.workers.get(capture_id)
                if worker is None or worker.cluster != cluster:
                    if worker is not None:
                        self._stop(worker)
                    worker = self.workers[capture_id] = _Worker(capture_id, cluster)
                process = worker.process
                if process is not None and process.poll() is not None:
                    self._exited(worker, now)
                if worker.process is None and now >= worker.next_start:
                    self._start(worker, now)

    def _exited(self, worker: _Worker, now: float) -> None:
        assert worker.process is not None
        code = worker.process.returncode
        worker.exit_codes.append(code)
        worker.process = None
        self._close_log(worker)
        if now - worker.started_at >= self.stable_s:
            worker.failures = 0
        worker.failures += 1
        backoff = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (worker.failures - 1))
        worker.next_start = now + backoff
        log.warning(
            "worker %s exited with %s; restarting in %.1fs", worker.capture_id, code, backoff
        )

    def _start(self, worker: _Worker, now: float) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        worker.log_file = open(self.log_dir / f"{worker.capture_id}.log", "ab")  # noqa: SIM115
        argv = self.command(worker.capture_id, worker.cluster)
        worker.process = subprocess.Popen(
            argv,
            stdout=worker.log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
        )
        if worker.started_at:
            worker.restarts += 1
        worker.started_at = now
        log.info("started worker %s (pid %d)", worker.capture_id, worker.process.pid)

    def _stop(self, worker: _Worker) -> None:
        process = worker.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.info("stopped worker %s", worker.capture_id)
        worker.process = None
        self._close_log(worker)

    @staticmethod
    def _close_log(worker: _Worker) -> None:
        if worker.log_file is not None:
            worker.log_file.close()
            worker.log_file = None

    def stop_all(self) -> None:
        with self._lock:
            for worker in self.workers.values():
                process = worker.process
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for worker in self.workers.values():
                self._stop(worker)
            self.workers.clear()

    def pids(self) -> dict[str, int]:
        """Capture id -> pid of the running workers."""
        with self._lock:
            return {
                c: w.process.pid
                for c, w in self.workers.items()
                if w.process is not None and w.process.poll() is None
            }

    def restarts(self) -> dict[str, int]:
        with self._lock:
            return {c: w.restarts for c, w in self.workers.items()}


def worker_command(coord: Coordinator) -> Callable[[str, str], list[str]]:
    """The argv of a worker of this environment (same consensus, blobs, Spark)."""
    config = coord.config

    def command(capture_id: str, cluster: str) -> list[str]:
        argv = [sys.executable, "-m", "coordinator_lib.cli", "worker", "--id", capture_id]
        argv += ["--cluster", cluster, "--parent-pid", str(os.getpid())]
        argv += ["--lease-ttl-ms", str(config.scheduler_lease_ttl_ms)]
        argv += ["--local-max-rows", str(config.local_max_rows)]
        if config.data_dir is not None:
            argv += ["--data-dir", config.data_dir]
        if config.consensus_url is not None:
            argv += ["--consensus-url", config.consensus_url]
        if config.blob_root is not None:
            argv += ["--blob-root", config.blob_root]
        if config.spark_master is not None:
            argv += ["--spark-master", config.spark_master]
        return argv

    return command


class ClusterService:
    """The owner loop and the worker supervisor of one `tidemark serve`."""

    def __init__(
        self,
        coord: Coordinator,
        *,
        owner_id: str | None = None,
        tick_s: float = 0.1,
        supervise: bool = True,
        log_dir: Path | None = None,
        supervisor_options: dict[str, Any] | None = None,
        scheduler_options: dict[str, Any] | None = None,
    ) -> None:
        self.coord = coord
        self.tick_s = tick_s
        self.supervise = supervise
        self.owner_id = owner_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.owner = Owner(
            coord.storage.persist.consensus,
            self.owner_id,
            lambda: clusters.cluster_tasks(coord),
            barrier=self._barrier,
            lease_ttl_ms=coord.config.scheduler_lease_ttl_ms,
            scheduler_options=scheduler_options,
            on_deposed=self._on_deposed,
        )
        if log_dir is None:
            base = Path(coord.config.data_dir) if coord.config.data_dir else Path(".")
            log_dir = base / "logs"
        self.supervisor = WorkerSupervisor(
            worker_command(coord),
            log_dir,
            **{"env": worker_environment(coord.config), **(supervisor_options or {})},
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewer: threading.Thread | None = None
        self._last_sync = 0.0
        coord.global_watermark = self.consistent_read_ts

    def consistent_read_ts(self) -> int | None:
        """The freshest time at which every worker-maintained view can be read
        together: the owner's live watermark, or (in a process that is not the
        owner) the least watermark the owner persisted for each cluster."""
        if self.owner.is_owner:
            try:
                return self.owner.consistent_read_ts()
            except NotOwner:
                pass
        marks = [self.owner.persisted_watermark(c) for c in clusters.worker_clusters(self.coord)]
        if not marks or any(m is None or m.checkpoint_ts <= 0 for m in marks):
            return None
        return min(m.checkpoint_ts for m in marks if m is not None) - 1

    def _barrier(self) -> Barrier:
        # Views never pass the inputs' uppers, which are at most read_ts + 1
        # for tables: with no views, the watermark is the oracle's read time.
        ts = self.coord.oracle.read_ts() + 1
        return Barrier(ts, ts)

    def _on_deposed(self) -> None:
        if self.supervise:
            self.supervisor.stop_all()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="scheduler-owner", daemon=True)
        self._thread.start()
        # Renewals apart from the rounds: a round waiting on the catalog
        # (a burst of DDL) must not cost the owner lease.
        self._renewer = threading.Thread(target=self._renew, name="scheduler-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        interval = self.coord.config.scheduler_lease_ttl_ms / 4000
        while not self._stop.wait(interval):
            try:
                self.owner.keep_alive()
            except Exception:
                log.exception("owner lease renewal failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.round()
            except Exception:
                log.exception("scheduler round failed")
            self._stop.wait(max(0.0, self.tick_s - (time.monotonic() - started)))

    def round(self) -> None:
        """One round: the owner's tick, the supervisor, the view instances."""
        self.owner.tick()
        if self.supervise and self.owner.is_owner:
            self.supervisor.reconcile(clusters.worker_clusters(self.coord))
        now = time.monotonic()
        if now - self._last_sync >= 1.0:
            self._last_sync = now
            clusters.sync_view_instances(self.coord)

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._renewer):
            if thread is not None:
                thread.join(timeout=30)
        self._thread = self._renewer = None
        if self.supervise:
            self.supervisor.stop_all()
        self.owner.resign()
