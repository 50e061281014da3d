"""The scheduler's messages as JSON, for transports between processes
(`consensus_transport`). `encode(message)` gives a JSON-ready dict, `decode`
reverses it exactly: `decode(encode(m)) == m` for every message type.
"""

from __future__ import annotations

from typing import Any

from coordinator_lib.scheduler.messages import (
    AddTableRequest,
    AddTableResponse,
    Barrier,
    Checkpoint,
    DispatchTableRequest,
    DispatchTableResponse,
    Heartbeat,
    HeartbeatResponse,
    Liveness,
    Message,
    RemoveTableRequest,
    RemoveTableResponse,
    TableState,
    TableStatus,
)

Json = dict[str, Any]


def _checkpoint(cp: Checkpoint) -> list[int]:
    return [cp.checkpoint_ts, cp.resolved_ts]


def _status(status: TableStatus) -> list[Any]:
    return [status.span, int(status.state), _checkpoint(status.checkpoint)]


def _read_status(raw: list[Any]) -> TableStatus:
    span, state, cp = raw
    return TableStatus(span, TableState(state), Checkpoint(*cp))


def encode(message: Message) -> Json:
    out: Json = {
        "sender": message.sender,
        "to": message.to,
        "rev": message.owner_revision,
        "epoch": message.capture_epoch,
        "seq": message.seq,
    }
    if isinstance(message, Heartbeat):
        out["type"] = "heartbeat"
        out["spans"] = list(message.spans)
        out["stopping"] = message.is_stopping
        out["stats"] = message.collect_stats
        barrier = message.barrier
        out["barrier"] = (
            None if barrier is None else [barrier.global_barrier_ts, barrier.min_table_barrier_ts]
        )
    elif isinstance(message, HeartbeatResponse):
        out["type"] = "heartbeat_response"
        out["tables"] = [_status(s) for s in message.tables]
        out["liveness"] = int(message.liveness)
    elif isinstance(message, DispatchTableRequest):
        out["type"] = "dispatch"
        request = message.request
        if isinstance(request, AddTableRequest):
            out["add"] = [request.span, request.is_secondary, _checkpoint(request.checkpoint)]
        else:
            out["remove"] = request.span
    elif isinstance(message, DispatchTableResponse):
        out["type"] = "dispatch_response"
        response = message.response
        kind = "add" if isinstance(response, AddTableResponse) else "remove"
        out[kind] = [_status(response.status), _checkpoint(response.checkpoint)]
    else:
        raise TypeError(f"cannot encode {type(message).__name__}")
    return out


def decode(raw: Json) -> Message:
    header = {
        "sender": raw["sender"],
        "to": raw["to"],
        "owner_revision": raw["rev"],
        "capture_epoch": raw["epoch"],
        "seq": raw["seq"],
    }
    kind = raw["type"]
    if kind == "heartbeat":
        barrier = raw["barrier"]
        return Heartbeat(
            spans=tuple(raw["spans"]),
            is_stopping=raw["stopping"],
            collect_stats=raw["stats"],
            barrier=None if barrier is None else Barrier(*barrier),
            **header,
        )
    if kind == "heartbeat_response":
        return HeartbeatResponse(
            tables=tuple(_read_status(s) for s in raw["tables"]),
            liveness=Liveness(raw["liveness"]),
            **header,
        )
    if kind == "dispatch":
        if "add" in raw:
            span, secondary, cp = raw["add"]
            request: AddTableRequest | RemoveTableRequest = AddTableRequest(
                span, secondary, Checkpoint(*cp)
            )
        else:
            request = RemoveTableRequest(raw["remove"])
        return DispatchTableRequest(request=request, **header)
    if kind == "dispatch_response":
        if "add" in raw:
            status, cp = raw["add"]
            response: AddTableResponse | RemoveTableResponse = AddTableResponse(
                _read_status(status), Checkpoint(*cp)
            )
        else:
            status, cp = raw["remove"]
            response = RemoveTableResponse(_read_status(status), Checkpoint(*cp))
        return DispatchTableResponse(response=response, **header)
    raise ValueError(f"unknown message type {kind!r}")
