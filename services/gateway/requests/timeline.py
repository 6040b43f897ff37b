"""A request's timeline (contracts/timeline.py) from its record alone: the record holds the
route, the orchestrator's loop (its decision, each attempt's result and verdict, with their
times and usage), the approvals and the end, each written by a step that writes it anyway. A
part the record does not hold (no longer kept, or never recorded by an older version) is said
in an `unavailable` entry, never left out silently."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from contracts import Attempt, LoopState, RequestRecord, Usage
from contracts.events import RequestCancelled, RequestCompleted, RequestFailed
from contracts.timeline import Timeline, TimelineEntry

Price = Callable[[Usage], float]
# What a timeline shows of its record as the record has it.
_KEPT = {
    "request_id",
    "principal",
    "success_criteria",
    "state",
    "status",
    "final_output",
    "replay",
    "trace_id",
}


def build(record: RequestRecord, session: str, price: Price) -> Timeline:
    """The timeline of `record` (`session`: its session as the client names it), each step's
    usage priced by `price`."""
    entries = [_accepted(record)]
    loop = record.loop
    outcome = record.outcome
    if loop is not None:
        entries.extend(_orchestrated(record, loop, price))
    elif isinstance(outcome, RequestCompleted) and outcome.route in ("direct", "cached"):
        entries.append(_answered(record, outcome, price))
    elif isinstance(outcome, RequestCompleted) and outcome.route == "orchestrated":
        entries.append(
            _unavailable(
                "The orchestrator's steps are not in this request's record (it ended before "
                "the orchestrator had it, or was recorded by an older version)."
            )
        )
    entries.extend(_approvals(record))
    entries.extend(_end(record, price))
    route = outcome.route if isinstance(outcome, RequestCompleted) else None
    if route is None and loop is not None:
        route = "orchestrated"
    usage = outcome.usage if isinstance(outcome, RequestCompleted) else _usage_of(record)
    return Timeline(
        session=session,
        message=record.text,
        route=route,
        usage=usage,
        cost_usd=price(usage),
        entries=entries,
        **record.model_dump(include=_KEPT),
    )


def _usage_of(record: RequestRecord) -> Usage:
    loop = record.loop
    return loop.request.usage + loop.usage if loop is not None else Usage()


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None or end < start:
        return None
    return int((end - start).total_seconds() * 1000)


def _accepted(record: RequestRecord) -> TimelineEntry:
    detail = record.text
    if record.replay is not None:
        r = record.replay
        models = ", ".join(f"{role}={m}" for role, m in sorted(r.models.items()))
        detail = (
            f"Replay of {r.of} from {r.from_step}"
            + (f" with {models}" if models else "")
            + f": {record.text}"
        )
    return TimelineEntry(
        step="accepted",
        at=record.created_at,
        title="accepted by the gateway",
        detail=detail,
        success_criteria=record.success_criteria,
    )


def _answered(record: RequestRecord, outcome: RequestCompleted, price: Price) -> TimelineEntry:
    step = "direct" if outcome.route == "direct" else "cached"
    title = (
        "answered directly by the frontline"
        if step == "direct"
        else "answered from the semantic cache"
    )
    return TimelineEntry(
        step=step,
        at=record.completed_at,
        duration_ms=_ms(record.created_at, record.completed_at),
        title=title,
        output=outcome.output,
        sources=outcome.sources,
        usage=outcome.usage,
        cost_usd=price(outcome.usage),
    )


def _orchestrated(record: RequestRecord, loop: LoopState, price: Price) -> list[TimelineEntry]:
    req = loop.request
    out = [
        TimelineEntry(
            step="routed",
            at=req.ts,
            duration_ms=_ms(record.created_at, req.ts),
            title="routed to the orchestrator by the frontline",
            detail=req.reason,
            usage=req.usage,
            cost_usd=price(req.usage),
            recorded_from=record.replay.of if record.replay is not None else None,
        )
    ]
    decision = loop.decision
    replayed = record.replay is not None and record.replay.from_step != "decision"
    if decision is not None:
        used = loop.decision_usage
        out.append(
            TimelineEntry(
                step="decided",
                at=loop.decided_at,
                duration_ms=_ms(req.ts, loop.decided_at),
                title=f"decided: the {decision.worker_type} worker",
                worker_type=decision.worker_type,
                task=decision.task_description,
                parameters=decision.parameters,
                success_criteria=decision.success_criteria,
                usage=used,
                cost_usd=price(used) if used is not None else None,
                recorded_from=record.replay.of if replayed and record.replay else None,
            )
        )
    elif loop.failure is not None:
        out.append(
            TimelineEntry(
                step="decided",
                title="no decision",
                error=loop.failure.error,
                usage=loop.usage,
                cost_usd=price(loop.usage),
            )
        )
    previous: Attempt | None = None
    for attempt in loop.attempts:
        out.append(_attempt(loop, attempt, previous, price))
        out.extend(_verdict(attempt, price))
        previous = attempt
    for pair in loop.clarifications:
        out.append(TimelineEntry(step="clarification", title="asked and answered", detail=pair))
    for question in loop.questions:
        out.append(
            TimelineEntry(step="clarification", title="asked, waiting", detail=question.question)
        )
    if loop.approval is not None:  # asked, not decided yet
        waiting = loop.approval
        out.append(
            TimelineEntry(
                step="approval",
                at=waiting.created_at,
                title=f"approval of {waiting.action}: waiting for {', '.join(waiting.approvers)}",
                detail=f"digest {waiting.digest}; asked because {waiting.reason}",
                attempt=waiting.attempt,
                approval=waiting,
            )
        )
    if loop.budget_note:
        out.append(
            TimelineEntry(step="budget", title="a budget stopped it", detail=loop.budget_note)
        )
    return out


def _attempt(
    loop: LoopState, attempt: Attempt, previous: Attempt | None, price: Price
) -> TimelineEntry:
    decision = loop.decision
    started = (
        datetime.fromtimestamp(attempt.started_ns / 1e9, UTC)
        if attempt.started_ns is not None
        else None
    )
    feedback_in, suggestions_in = None, []
    if previous is not None:
        if previous.verdict is not None:
            feedback_in, suggestions_in = previous.verdict.feedback, previous.verdict.suggestions
        elif previous.result is not None and previous.result.error:
            feedback_in = f"The previous attempt failed: {previous.result.error}"
    result = attempt.result
    kind = result.worker_type if result else (decision.worker_type if decision else None)
    entry = TimelineEntry(
        step="attempt",
        at=started or (result.ts if result else None),
        duration_ms=_ms(started, result.ts if result else None),
        title=f"attempt {attempt.n}" + (f" with {kind}" if kind else ""),
        attempt=attempt.n,
        worker_type=kind,
        task=decision.task_description if decision else None,
        success_criteria=decision.success_criteria if decision else None,
        feedback_in=feedback_in,
        suggestions_in=list(suggestions_in),
        recorded_from=attempt.recorded_from,
    )
    if attempt.approval_id is not None:
        entry = entry.model_copy(update={"detail": f"acts on approval {attempt.approval_id}"})
    if result is None:
        return entry.model_copy(update={"title": entry.title + " (no result yet)"})
    detail = entry.detail
    if result.usage.tool_calls > len(result.tool_calls):
        kept = len(result.tool_calls)
        detail = (
            f"{detail} {result.usage.tool_calls} tool calls made; {kept} of them kept here "
            "(the rest are no longer available)."
        ).strip()
    if result.approval is not None:
        detail = f"{detail} Asked approval of {result.approval.action}.".strip()
    if result.budget_stop:
        detail = f"{detail} Stopped at its {result.budget_stop}.".strip()
    return entry.model_copy(
        update={
            "title": entry.title + ("" if result.success else " (failed)"),
            "detail": detail,
            "output": result.output or None,
            "error": result.error,
            "sources": result.sources,
            "tool_calls": result.tool_calls,
            "usage": result.usage,
            "cost_usd": price(result.usage),
        }
    )


def _verdict(attempt: Attempt, price: Price) -> list[TimelineEntry]:
    result_at = attempt.result.ts if attempt.result is not None else None
    used = attempt.verdict_usage
    if attempt.verdict is not None:
        v = attempt.verdict
        return [
            TimelineEntry(
                step="verdict",
                at=attempt.verdict_at,
                duration_ms=_ms(result_at, attempt.verdict_at),
                title=f"verdict on attempt {attempt.n}: {'passed' if v.passed else 'failed'}, "
                f"score {v.score}",
                attempt=attempt.n,
                passed=v.passed,
                score=v.score,
                feedback=v.feedback,
                suggestions=list(v.suggestions),
                detail="; ".join(v.questions) if v.user_input_needed else "",
                usage=used,
                cost_usd=price(used) if used is not None else None,
            )
        ]
    if attempt.verdict_error is not None:
        return [
            TimelineEntry(
                step="verdict",
                at=attempt.verdict_at,
                duration_ms=_ms(result_at, attempt.verdict_at),
                title=f"no verdict on attempt {attempt.n}",
                attempt=attempt.n,
                error=attempt.verdict_error,
            )
        ]
    return []


def _approvals(record: RequestRecord) -> list[TimelineEntry]:
    out = []
    for approval in record.approvals:
        last = approval.decisions[-1] if approval.decisions else None
        decided = f"{last.decision} by {last.by}" if last is not None else approval.state
        out.append(
            TimelineEntry(
                step="approval",
                at=approval.created_at,
                duration_ms=_ms(approval.created_at, last.at if last else None),
                title=f"approval of {approval.action}: {decided}",
                detail=f"digest {approval.digest}; asked because {approval.reason}",
                attempt=approval.attempt,
                approval=approval,
            )
        )
    return out


def _end(record: RequestRecord, price: Price) -> list[TimelineEntry]:
    outcome = record.outcome
    at = record.completed_at
    # Every end is an entry of when it ended and how long the request took.
    end = partial(TimelineEntry, at=at, duration_ms=_ms(record.created_at, at))
    if isinstance(outcome, RequestCompleted):
        return [
            end(
                step="ended",
                title=f"ended {outcome.status} ({outcome.route}, {outcome.attempts} attempt(s))",
                output=outcome.output,
                sources=outcome.sources,
                score=outcome.score,
                feedback=outcome.feedback,
                usage=outcome.usage,
                cost_usd=outcome.cost_usd if outcome.cost_usd is not None else price(outcome.usage),
            )
        ]
    if isinstance(outcome, RequestFailed):
        return [end(step="ended", title=f"ended failed ({outcome.code})", error=outcome.error)]
    if isinstance(outcome, RequestCancelled):
        return [end(step="cancelled", title="cancelled", detail=outcome.reason)]
    if record.ended:
        return [_unavailable(f"It ended {record.state}, but how it ended is not recorded.")]
    return []


def _unavailable(what: str) -> TimelineEntry:
    return TimelineEntry(step="unavailable", title="no longer available", detail=what)
