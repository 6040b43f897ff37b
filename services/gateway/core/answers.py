"""Answering a question a request is parked on: of several concurrent answers exactly one wins,
by moving the request's record from `awaiting_clarification` by compare-and-set (every other
one gets Conflict); only the answer that won counts against the limits; the orchestrator is
told (`ClarificationAnswered`), and the session's history gets the questions and the answer.
A decision on an approval goes through `services/gateway/core/approving.py` instead.

A request parked on the client's own tools (AG-UI frontend tools: its question carries
`tool_calls`) is answered only by the results of exactly those calls (`check_tool_results`),
and such results answer nothing else: words cannot stand in for a tool's result, nor a result
for a call that was never issued or was answered already."""

from __future__ import annotations

import logging
from collections.abc import Callable

from contracts import ClarificationAnswered, ClarificationRequested, Question, RequestRecord
from contracts.frontend import ToolCall
from services.gateway.core.copies import SessionCopies
from services.gateway.core.errors import Conflict, Invalid, RateLimited, Unavailable
from services.gateway.core.limits import Limits
from services.gateway.core.said import Answered, Taken, Words
from services.runtime.bus.core import Bus, msg_id
from services.runtime.requests.lifecycle import IllegalMove, Tracked, records
from services.runtime.requests.sessions import answered, asked_text, write_session

log = logging.getLogger("sidekick.gateway")


async def resume(
    bus: Bus,
    limits: Limits,
    tracked: Tracked,
    words: Words,
    taken: Callable[[Taken], None] | None,
    copies: SessionCopies | None = None,
) -> Answered:
    """Resume the parked request with `words` (its principal's). `taken` is told when this
    answer has won, before the request can go on. `copies`: the gateway's copies of the
    sessions it holds (the session's write starts from one)."""
    request_id, principal = tracked.value.request_id, tracked.value.principal
    parked, asked = tracked.revision, _asked(tracked.value)
    try:
        tracked = await records(bus).move(
            request_id,
            "decided",
            known=tracked,
            source="awaiting_clarification",
            clarification_questions=[],
        )
    except IllegalMove as exc:
        now = exc.current.value.status if exc.current is not None else "gone"
        raise Conflict(f"Request {request_id} is not waiting for an answer (it is {now}).") from exc
    try:  # only the answer that won counts against the limits
        limits.take(principal, request_id)
    except RateLimited:
        await _unanswer(bus, tracked)
        raise
    resumed = Answered(request_id, tracked.value)
    if taken is not None:
        taken(resumed)
    event = ClarificationAnswered(
        request_id=request_id,
        session_id=tracked.value.session_id,
        answers=words.answers,
        message=words.text,
        additional_context=words.additional_context,
        tool_results=words.tool_results,
    )
    try:
        await bus.publish(
            event,
            bus.subjects.request_answered,
            dedupe_key=bus.own_key(msg_id(request_id, "answered", parked)),
        )
    except Exception as exc:
        limits.release(request_id)
        await _unanswer(bus, tracked)
        raise Unavailable("Sidekick could not pass on the answer; please retry.") from exc
    if words.tool_results:  # a tool's result is not the user's words: no turn of the session
        return resumed
    said = words.text or "\n".join(
        filter(None, [*words.answers.values(), words.additional_context])
    )
    questions = asked_text(asked)
    record = tracked.value
    try:
        known = copies.get(record.session_id) if copies is not None else None
        written = await write_session(
            bus,
            record.session_id,
            lambda rec: answered(rec, request_id, record.text, questions, said),
            known=known,
        )
        if written is not None and copies is not None:
            copies.wrote(record.session_id, written)
    except Exception as exc:  # the answer is on its way; only the history lacks it
        log.warning("could not add the answer of %s to its session: %r", request_id, exc)
    return resumed


async def _unanswer(bus: Bus, tracked: Tracked) -> None:
    """Put a request whose answer could not be passed on back to waiting, so that the
    user's retry can answer it."""
    try:
        await records(bus).move(
            tracked.value.request_id,
            "awaiting_clarification",
            known=tracked,
            clarification_questions=_asked(tracked.value),
        )
    except Exception as exc:
        log.warning("could not reopen %s for answers: %r", tracked.value.request_id, exc)


def waiting_calls(record: RequestRecord) -> list[ToolCall]:
    """The client's tool calls the request is parked on (none: it waits for no tool)."""
    outcome = record.outcome
    if record.state != "awaiting_clarification" or not isinstance(outcome, ClarificationRequested):
        return []
    return list(outcome.tool_calls)


def check_tool_results(record: RequestRecord, words: Words) -> None:
    """Refuse words that cannot answer the request as it is parked: a request waiting for its
    client's tool results is answered by a result for each of those calls and nothing else
    (Conflict for a call never issued or answered already, Invalid for one missing), and tool
    results answer only such a request."""
    waiting = {c.call_id: c for c in waiting_calls(record)}
    request_id = record.request_id
    if not waiting:
        if words.tool_results:
            named = ", ".join(r.call_id for r in words.tool_results)[:200]
            raise Conflict(
                f"Request {request_id} waits for no tool result (tool call {named} was never "
                "issued to it, or was answered already)."
            )
        return
    if not words.tool_results:
        names = ", ".join(sorted({c.name for c in waiting.values()}))
        raise Conflict(
            f"Request {request_id} waits for the results of its client's tool calls ({names}); "
            "only a run that carries them (a `tool` message per toolCallId) answers it."
        )
    given = [r.call_id for r in words.tool_results]
    unknown = [c for c in given if c not in waiting]
    if unknown:
        raise Conflict(
            f"Tool call {', '.join(unknown)[:200]} was never issued to request {request_id} "
            "(or was answered already); nothing was changed."
        )
    if len(set(given)) != len(given):
        raise Invalid("Each tool call takes one result; a toolCallId is given twice.")
    missing = [c for c in waiting if c not in given]
    if missing:
        raise Invalid(f"Results are missing for tool calls {', '.join(missing)}.")


def _asked(record: RequestRecord) -> list[Question]:
    """The questions of the request's open clarification."""
    outcome = record.outcome
    return list(outcome.questions) if isinstance(outcome, ClarificationRequested) else []
