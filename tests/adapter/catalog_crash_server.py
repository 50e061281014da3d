"""A server that SIGKILLs itself right after a catalog compare-and-set lands,
once armed (the file `arm` exists): the crash a DDL statement can meet
between its catalog commit and anything after it. Run as
`python -m tests.adapter.catalog_crash_server <data_dir> <arm>`; prints the
pgwire port, then serves until killed."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from coordinator_lib.adapter.catalog import CATALOG_KEY
from coordinator_lib.persist.consensus import SeqNo, VersionedData
from coordinator_lib.server.environment import Environment
from tests.fixtures.served import fast_config


def main() -> None:
    data_dir, arm = Path(sys.argv[1]), Path(sys.argv[2])
    env = Environment(fast_config(data_dir), pgwire_port=0, http_port=0)
    consensus = env.handle.coordinator.catalog.consensus
    real = consensus.compare_and_set

    def compare_and_set(key: str, expected: SeqNo | None, new: VersionedData) -> bool:
        landed = real(key, expected, new)
        if landed and key == CATALOG_KEY and arm.exists():
            os.kill(os.getpid(), signal.SIGKILL)
        return landed

    consensus.compare_and_set = compare_and_set  # type: ignore[method-assign]
    env.start()
    print(env.pgwire.port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
