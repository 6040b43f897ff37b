"""What `/v1` answers look like: OpenAI's error bodies, a completion's text, usage and the added
`sidekick` field, one model card, and the call a completion waits on."""

from __future__ import annotations

import asyncio

from starlette.responses import JSONResponse, Response

from contracts import (
    AnyEvent,
    ClarificationRequested,
    Outcome,
    RequestCancelled,
    RequestCompleted,
)
from contracts.frames import ProgressEvent
from contracts.openai import (
    CompletionUsage,
    ModelCard,
    OpenAIError,
    OpenAIErrorBody,
    SidekickInfo,
)
from services.gateway.core.errors import GatewayError, Invalid, RateLimited, Unauthorized
from services.gateway.core.outcomes import end_metadata, end_status, questions_text

CREATED = 1_735_689_600  # the models' "created" (2025-01-01): a fixed date, as they do not change
WAIT = 600.0  # seconds a call waits for its answer
ERROR_TYPES = {
    401: "authentication_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_error",
}


def openai_error(status: int, message: str, code: str | None, param: str | None = None) -> Response:
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = OpenAIError(error=OpenAIErrorBody(message=message, type=kind, param=param, code=code))
    return JSONResponse(body.model_dump(mode="json"), status_code=status)


def refused(exc: GatewayError) -> Response:
    status = 400 if isinstance(exc, Invalid) and exc.http_status == 422 else exc.http_status
    code = "invalid_api_key" if isinstance(exc, Unauthorized) else exc.code
    response = openai_error(status, exc.message, code)
    if isinstance(exc, RateLimited):
        response.headers["retry-after"] = str(exc.retry_after)
    return response


class Call:
    """One completion call: the request it waits on, its conversation, its events."""

    def __init__(self, request_id: str, session: str, events: asyncio.Queue[AnyEvent]) -> None:
        self.request_id = request_id
        self.session = session
        self.events = events
        self.ended = False


def answer_of(outcome: Outcome) -> str:
    if isinstance(outcome, RequestCompleted):
        return outcome.output
    if isinstance(outcome, ClarificationRequested):
        return questions_text(outcome)
    if isinstance(outcome, RequestCancelled):
        return f"(Cancelled: {outcome.reason}.)"
    return outcome.error


def usage_of(outcome: Outcome) -> CompletionUsage:
    used = outcome.usage if isinstance(outcome, RequestCompleted) else None
    prompt, completion = (used.input_tokens, used.output_tokens) if used else (0, 0)
    return CompletionUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def card(name: str) -> ModelCard:
    return ModelCard(id=name, object="model", created=CREATED, owned_by="sidekick")


def info(call: Call, outcome: Outcome, progress: list[ProgressEvent]) -> SidekickInfo:
    return SidekickInfo(
        request_id=call.request_id,
        session=call.session,
        status=end_status(outcome),
        progress=progress,
        questions=list(outcome.questions) if isinstance(outcome, ClarificationRequested) else [],
        metadata=end_metadata(outcome),
    )


def timeout_error(call: Call) -> OpenAIError:
    return OpenAIError(
        error=OpenAIErrorBody(
            message=f"No answer within {WAIT:g} s (request {call.request_id}).",
            type="server_error",
            code="timeout",
        )
    )
