"""JSON-RPC 2.0 at `POST /a2a`: the A2A 1.0 methods and their 0.3 names (legacy.py), behind the
gateway's bearer tokens, principals, size and rate limits.

    SendMessage / message/send             a new task, or the answer to one in INPUT_REQUIRED
    SendStreamingMessage / message/stream  the same, answered as SSE (task, then updates)
    GetTask / tasks/get                    the task (another principal's: TaskNotFound)
    ListTasks                              the principal's tasks, newest first, by cursor
    CancelTask / tasks/cancel              cancel (TaskNotCancelable once it ended)
    SubscribeToTask / tasks/resubscribe    SSE: the task now, then its updates
    Create/Get/List/DeleteTaskPushNotificationConfig  (0.3: tasks/pushNotificationConfig/
                                           set|get|list|delete) a task's webhooks (push.py)

Errors: -32700 parse, -32600 invalid request, -32601 unknown method, -32602 invalid params,
-32603 internal; -32001 TaskNotFound (also a push config that is not there), -32002
TaskNotCancelable, -32003 PushNotificationNotSupported (every push-notification method, when
SIDEKICK_A2A_PUSH is off), -32004 UnsupportedOperation, -32005 ContentTypeNotSupported,
-32007 ExtendedAgentCardNotConfigured, -32009 VersionNotSupported (an A2A-Version header other
than 1.x or 0.3).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contracts.a2a import StreamResponse
from services.gateway.a2a import legacy
from services.gateway.a2a.card import Offer, card
from services.gateway.a2a.errors import RpcError
from services.gateway.a2a.push import Pusher, Signer
from services.gateway.a2a.service import TaskService
from services.gateway.a2a.webhooks import Webhooks
from services.gateway.core.auth import Auth
from services.gateway.core.errors import GatewayError, RateLimited, Unauthorized, Unavailable
from services.gateway.core.feed import Feed
from services.gateway.core.http import MAX_BODY_BYTES, error_response, principal_of
from services.gateway.core.intake import Intake
from services.runtime.walls import jsonlimits
from services.runtime.walls.egress import Egress

Id = str | int | None
STREAMING = {"SendStreamingMessage", "SubscribeToTask"}
UNARY = {"SendMessage", "GetTask", "ListTasks", "CancelTask"}
PushHandler = Callable[[Webhooks, dict[str, Any], str, bool], Awaitable[Any]]
PUSH: dict[str, PushHandler] = {
    "CreateTaskPushNotificationConfig": Webhooks.create,
    "GetTaskPushNotificationConfig": Webhooks.get,
    "ListTaskPushNotificationConfigs": Webhooks.list,
    "DeleteTaskPushNotificationConfig": Webhooks.delete,
}
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def rpc_error(id_: Id, code: int, message: str, status: int = 200) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


def refused(id_: Id, exc: GatewayError) -> Response:
    """A gateway refusal as JSON-RPC: auth and rate limits keep their HTTP status."""
    if isinstance(exc, Unauthorized):
        return error_response(exc)
    if isinstance(exc, RateLimited):
        response = rpc_error(id_, -32000, exc.message, 429)
        response.headers["retry-after"] = str(exc.retry_after)
        return response
    code = {"not_found": -32001, "invalid_body": -32602, "unavailable": -32603}.get(
        exc.code, -32000
    )
    return rpc_error(id_, code, exc.message)


class A2AApi:
    def __init__(
        self, intake: Intake, auth: Auth, feed: Feed, offer: Offer, egress: Egress
    ) -> None:
        self.auth = auth
        self.offer = offer
        self.webhooks = Webhooks(intake, egress, offer.push)
        self.pusher = Pusher(self.webhooks, Signer())
        self.tasks = TaskService(intake, feed, self.webhooks)
        self.pusher.register()

    def routes(self) -> list[Route]:
        return [
            Route("/.well-known/agent-card.json", self.card, methods=["GET"]),
            Route("/.well-known/agent.json", self.card, methods=["GET"]),
            # Beside the endpoint too: some clients look for the card under the URL they call
            # (the A2A conformance kit's access-control check does).
            Route("/a2a/.well-known/agent-card.json", self.card, methods=["GET"]),
            Route("/a2a", self.call, methods=["POST"]),
            Route("/.well-known/jwks.json", self.jwks, methods=["GET"]),
        ]

    async def jwks(self, request: Request) -> Response:
        """The public keys the push notifications' JWTs are signed with (every gateway's)."""
        try:
            keys = await self.pusher.jwks()
        except Exception as exc:
            return error_response(Unavailable(f"The keys cannot be read now ({exc!r})."))
        return JSONResponse(keys, headers={"cache-control": "max-age=300"})

    async def card(self, request: Request) -> Response:
        found = card(str(request.base_url), self.auth.required, self.offer)
        return JSONResponse(found.wire(), headers={"cache-control": "max-age=300"})

    async def call(self, request: Request) -> Response:
        try:
            principal = principal_of(request, self.auth)
        except GatewayError as exc:
            return error_response(exc)
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_BODY_BYTES:
                return rpc_error(
                    None, -32600, f"The body is limited to {MAX_BODY_BYTES} bytes.", 413
                )
        try:
            body = jsonlimits.loads(raw)
        except jsonlimits.TooDeep as exc:
            return rpc_error(None, -32700, f"Parse error: the body is {exc}.")
        except ValueError:
            return rpc_error(None, -32700, "Parse error: the body is not valid JSON.")
        if not isinstance(body, dict):
            return rpc_error(None, -32600, "Invalid request: one JSON-RPC request object.")
        id_ = body.get("id")
        if isinstance(id_, bool) or not isinstance(id_, str | int | None):
            return rpc_error(None, -32600, "Invalid request: id must be a string, number or null.")
        method = body.get("method")
        if body.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return rpc_error(
                id_, -32600, "Invalid request: jsonrpc must be '2.0', method a string."
            )
        params = body.get("params", {})
        if not isinstance(params, dict):
            return rpc_error(id_, -32602, "Invalid params: params must be an object.")
        old = method in legacy.METHODS
        name = legacy.METHODS.get(method, method)
        version = request.headers.get("a2a-version", "").strip()
        if version and not (version.startswith("1.") or version in ("1", "0.3") or old):
            return rpc_error(id_, -32009, f"A2A version {version[:20]} is not supported (1.0).")
        try:
            return await self._dispatch(id_, name, params, principal, old)
        except RpcError as exc:
            return rpc_error(id_, exc.code, exc.message)
        except GatewayError as exc:
            return refused(id_, exc)

    async def _dispatch(
        self, id_: Id, name: str, params: dict[str, Any], principal: str, old: bool
    ) -> Response:
        if name in PUSH:
            result = await PUSH[name](self.webhooks, params, principal, old)
            return JSONResponse({"jsonrpc": "2.0", "id": id_, "result": result})
        if name == "GetExtendedAgentCard":
            raise RpcError(-32007, "There is no extended agent card; the public one is all.")
        if name in STREAMING:
            stream = await self.tasks.stream(name, params, principal)
            return StreamingResponse(
                self._sse(id_, stream, old), media_type="text/event-stream", headers=SSE_HEADERS
            )
        handler = UNARY_HANDLERS.get(name)
        if handler is None:
            raise RpcError(-32601, f"Method not found: {name[:64]}.")
        result = await handler(self.tasks, params, principal)
        return JSONResponse({"jsonrpc": "2.0", "id": id_, "result": shaped(result, name, old)})

    async def _sse(
        self, id_: Id, stream: AsyncIterator[tuple[str, StreamResponse] | None], old: bool
    ) -> AsyncIterator[bytes]:
        try:
            async for item in stream:
                if item is None:
                    yield b": keep-alive\n\n"
                    continue
                event_id, response = item
                result = legacy.stream_event(response) if old else response.wire()
                data = json.dumps({"jsonrpc": "2.0", "id": id_, "result": result})
                yield f"id: {event_id}\ndata: {data}\n\n".encode()
        except (RpcError, GatewayError) as exc:
            code = exc.code if isinstance(exc, RpcError) else -32603
            error = {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": str(exc)}}
            yield f"event: error\ndata: {json.dumps(error)}\n\n".encode()


def shaped(result: BaseModel, name: str, old: bool) -> dict[str, Any]:
    """A unary result as 1.0 has it (SendMessage: {"task": ...}) or as 0.3 did."""
    wire: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not old:
        return {"task": wire} if name == "SendMessage" else wire
    return legacy.task(wire)


Handler = Callable[[TaskService, dict[str, Any], str], Awaitable[BaseModel]]
UNARY_HANDLERS: dict[str, Handler] = {
    "SendMessage": TaskService.send,
    "GetTask": TaskService.get,
    "ListTasks": TaskService.list,
    "CancelTask": TaskService.cancel,
}
