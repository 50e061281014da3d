"""Bodies of helper OS processes for the storage suites (module level, so the
'spawn' start method can import them)."""

from __future__ import annotations

from typing import Any

from coordinator_lib.repr import GlobalId
from coordinator_lib.storage import StorageController, StorageParameters, table_description
from tests.storage.support import DESC


def hold_worker(
    consensus_url: str,
    blob_root: str,
    id_value: int,
    time: int | None,
    lease_ms: int,
    ready: Any,
    release: Any,
) -> None:
    """Open the environment, install table `u<id_value>`, hold it at `time`,
    report the hold's time on `ready`, then wait for `release` (or be killed)."""
    controller = StorageController.open(
        consensus_url=consensus_url,
        blob_root=blob_root,
        parameters=StorageParameters(reader_lease_ms=lease_ms),
    )
    id = GlobalId.user(id_value)
    controller.create_collections([(id, table_description(DESC))])
    hold = controller.acquire_read_hold(id, time)
    ready.put(hold.time)
    release.wait(120)
    hold.release()
    controller.close()
    ready.put("released")
