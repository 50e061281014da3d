"""The table scheduler over HTTP (port 6876), TiCDC's owner API in Tidemark's
terms (docs/scheduler.md):

- `GET /api/scheduler/tasks`: `{"checkpoint_ts": N, "resolved_ts": N,
  "captures": {"<capture id>": [{"task": "<id>", "state": "...", "role":
  "...", "checkpoint_ts": N}]}}` over the live captures, plus `owner`,
  `revision` and per-cluster watermarks (`clusters`);
- `POST /api/scheduler/move` `{"task": "u5", "capture": "quickstart-1"}`:
  move a task to a capture; `{"accepted": bool}` (false: not now, e.g. a
  move of it is pending or the captures are not all known yet);
- `POST /api/scheduler/rebalance` `{}` or `{"cluster": "c"}`: spread tasks
  evenly; `{"accepted": bool}`;
- `POST /api/scheduler/drain` `{"capture": "quickstart-0"}`: start moving
  every task off a capture; `{"remaining": N}`, how many it still runs as
  primary (ask again until 0).

Only the process holding the owner lease answers; the others say 503 with
`{"error": {...}, "owner": "<owner id>"}`. Unknown tasks or captures are
404, a malformed body 400. The POST endpoints change where work runs, so
they are served to loopback clients only (403 otherwise).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from coordinator_lib.scheduler.owner import NotOwner, UnknownCapture
from coordinator_lib.server.http import is_loopback

if TYPE_CHECKING:
    from coordinator_lib.adapter.cluster_supervisor import ClusterService


def _error(status: int, message: str, code: str, **extra: Any) -> Response:
    return JSONResponse({"error": {"message": message, "code": code}, **extra}, status)


class _BadRequest(Exception):
    pass


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as error:
        raise _BadRequest(f"invalid JSON: {error}") from None
    if not isinstance(body, dict):
        raise _BadRequest("the body must be a JSON object")
    return body


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise _BadRequest(f'"{key}" must be a non-empty string')
    return value


def scheduler_routes(service: ClusterService | None) -> list[BaseRoute]:
    """The endpoints, answering for `service` (None: no scheduler here)."""

    async def call(request: Request, action: Any, admin: bool) -> Response:
        if service is None:
            return _error(503, "the scheduler does not run in this process", "no_scheduler")
        if admin and not is_loopback(request):
            return _error(403, "scheduler changes are accepted from loopback only", "forbidden")
        try:
            body = await _body(request) if request.method == "POST" else {}
            result = await run_in_threadpool(action, body)
        except _BadRequest as error:
            return _error(400, str(error), "bad_request")
        except NotOwner as error:
            return _error(503, str(error), "not_owner", owner=error.owner)
        except UnknownCapture as error:
            return _error(404, str(error), "not_found")
        return JSONResponse(result)

    def tasks(body: dict[str, Any]) -> dict[str, Any]:
        assert service is not None
        return service.owner.status()

    def move(body: dict[str, Any]) -> dict[str, Any]:
        assert service is not None
        task, capture = _text(body, "task"), _text(body, "capture")
        return {"accepted": service.owner.move_table(task, capture)}

    def rebalance(body: dict[str, Any]) -> dict[str, Any]:
        assert service is not None
        cluster = body.get("cluster")
        if cluster is not None and not isinstance(cluster, str):
            raise _BadRequest('"cluster" must be a string')
        return {"accepted": service.owner.rebalance(cluster)}

    def drain(body: dict[str, Any]) -> dict[str, Any]:
        assert service is not None
        return {"remaining": service.owner.drain_capture(_text(body, "capture"))}

    async def tasks_endpoint(request: Request) -> Response:
        return await call(request, tasks, admin=False)

    async def move_endpoint(request: Request) -> Response:
        return await call(request, move, admin=True)

    async def rebalance_endpoint(request: Request) -> Response:
        return await call(request, rebalance, admin=True)

    async def drain_endpoint(request: Request) -> Response:
        return await call(request, drain, admin=True)

    return [
        Route("/api/scheduler/tasks", tasks_endpoint, methods=["GET"]),
        Route("/api/scheduler/move", move_endpoint, methods=["POST"]),
        Route("/api/scheduler/rebalance", rebalance_endpoint, methods=["POST"]),
        Route("/api/scheduler/drain", drain_endpoint, methods=["POST"]),
    ]


__all__ = ["scheduler_routes"]
