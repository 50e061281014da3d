"""JSON records in consensus, changed by compare-and-set with retry.

The catalog and the timestamp oracle are each one record: every change reads
the head, computes the new value and CaS-es it on the seqno, so two processes
changing the same record serialize through consensus (DESIGN: "every change
is a compare-and-set on a sequence number").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from coordinator_lib.persist.consensus import Consensus, VersionedData

Record = dict[str, Any]


def read_record(consensus: Consensus, key: str) -> tuple[int | None, Record | None]:
    """(seqno, value) of `key`, (None, None) if it was never written."""
    head = consensus.head(key)
    if head is None:
        return None, None
    return head.seqno, json.loads(head.data)


def update_record(
    consensus: Consensus, key: str, change: Callable[[Record | None], Record]
) -> tuple[int, Record]:
    """Apply `change` to the current value (None if absent) and CaS the result,
    retrying on a lost race. `change` must be a pure function of its input:
    it may run several times. Returns the new (seqno, value)."""
    while True:
        seqno, current = read_record(consensus, key)
        new = change(current)
        new_seqno = (seqno or 0) + 1
        data = json.dumps(new, sort_keys=True).encode()
        if consensus.compare_and_set(key, seqno, VersionedData(new_seqno, data)):
            return new_seqno, new
