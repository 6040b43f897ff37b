"""The one library of what the fake model says (tests/support/fakes/openai_server.py plays it): a
script is a function of the request's body returning a `Reply`, text or a dict (JSON, rendered
as the request asked for it).

    reading a request   last_user, all_text, structured, schema_of, tool_results
    what a role says    verdict, decision, research_plan, the defaults (DEFAULTS)
    scripts             decide, decide_tools, by_schema, invalid_once, emailing, calls_for_ever,
                        books (an app's frontend tool)
    scripting a fake    in_turn, evaluator_asks, held, evaluator_held, script_email

The defaults, which every test starts from (the fake is reset to them before each test):
- frontline: route when the last user message has a tool-ish word, else answer directly;
- orchestrator: GENERAL with the message as task;
- worker: "Answer to: <task>" (the research pipeline's planner and synthesizer: their shapes);
- evaluator: passed, score 90."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from bench.fake_model import last_user
from tests.support.fakes.openai_replies import Reply, Script, tool_call

__all__ = ["last_user"]

ROUTE_WORDS = ("search", "email", "research", "latest", "news", "price", "browse", "route")
SCHEMA_IN_PROMPT = re.compile(r"JSON Schema of (\w+)")
EMAIL_BODY = "Hi Ada,\n\nThe meeting moved to 10am Friday.\n\nBest"


class Scriptable(Protocol):
    """The fake model (tests/support/fakes/openai_server.py, which plays these scripts)."""

    def script(self, model: str, fn: Script) -> None: ...


def all_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body.get("messages", []))


def structured(body: dict[str, Any]) -> str | None:
    """The name of the schema a request asks for, however it asks (None: free text)."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return str(fmt["json_schema"]["name"])
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and "function" in choice:
        return str(choice["function"]["name"])
    for m in body.get("messages", []):
        found = (
            SCHEMA_IN_PROMPT.search(str(m.get("content"))) if m.get("role") == "system" else None
        )
        if found:
            return found.group(1)
    return "json_object" if fmt.get("type") == "json_object" else None


def schema_of(body: dict[str, Any]) -> str | None:
    """Name of the structured output a model call asks for as a JSON schema, if any."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    return str(name) if name else None


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages of a request the model got."""
    return [m for m in body["messages"] if m["role"] == "tool"]


def verdict(
    passed: bool,
    score: int,
    feedback: str,
    suggestions: list[str] | None = None,
    user_input_needed: bool = False,
    questions: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "passed": passed,
        "score": score,
        "feedback": feedback,
        "suggestions": suggestions or [],
        "user_input_needed": user_input_needed,
        "questions": questions or [],
    }


def decision(
    kind: str,
    task: str,
    success: str = "A correct answer that does what was asked.",
    **parameters: str,
) -> dict[str, Any]:
    """The orchestrator's reply: this worker kind, with these parameters."""
    return {
        "worker_type": kind,
        "task_description": task,
        "parameters": [{"name": k, "value": v} for k, v in parameters.items()],
        "success_criteria": success,
    }


def research_plan(goal: str, questions: list[str] | None = None) -> dict[str, Any]:
    """A research planner's reply: search for the goal, or ask these questions first."""
    return {
        "goal": goal,
        "steps": ["search", "summarise"],
        "search_queries": [goal[:80]],
        "requirements": ["answers the request"],
        "freshness_required": False,
        "clarification_needed": bool(questions),
        "questions": [{"id": f"q{n}", "question": q} for n, q in enumerate(questions or [], 1)],
    }


def default_frontline(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
    if structured(body):
        text = last_user(body).lower()
        route = any(w in text for w in ROUTE_WORDS)
        return {"route_to_orchestrator": route, "reason": "tools" if route else "small talk"}
    return "Hello there! How can I help you today?"


def default_orchestrator(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
    text = last_user(body)
    task = text.split("\n")[1] if "\n" in text else "task"
    return decision("GENERAL", task, "A clear, correct answer.")


def default_worker(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
    first = last_user(body).split("\n")[0]
    schema = structured(body)
    if schema == "ResearchPlan":  # the research pipeline's planner: plan, never ask
        return research_plan(first.removeprefix("Research task: "))
    if schema == "ResearchSynthesis":
        goal = first.removeprefix("Research goal: ")
        return {"answer_markdown": f"Answer to: {goal} [1]", "confidence": "high", "citations": [1]}
    return "Answer to: " + first


def default_evaluator(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
    return verdict(True, 90, "Looks good.")


DEFAULTS: dict[str, Script] = {
    "fake-frontline": default_frontline,
    "fake-orchestrator": default_orchestrator,
    "fake-worker": default_worker,
    "fake-evaluator": default_evaluator,
}


def decide(kind: str, task: str, **parameters: str) -> Script:
    """The orchestrator's script: this worker kind, with these parameters."""
    return lambda body: decision(kind, task, **parameters)


def decide_tools(task: str) -> Script:
    """The orchestrator's script: TOOLS, with this task."""
    return lambda body: decision("TOOLS", task, "Does what the user asked, using the tools.")


def calls_for_ever(tool: str, prefix: str = "call_") -> Script:
    """A model that never answers: each turn calls `tool` again, under a new call id."""
    turns = itertools.count(1)
    return lambda body: Reply(tool_calls=[tool_call(tool, {}, f"{prefix}{next(turns)}")])


def books(body: dict[str, Any]) -> Reply | str:
    """The TOOLS worker's model: ask the app to confirm a booking (its frontend tool
    `confirm_booking`, tests/support/agui.py's BOOKING), then answer with what it said."""
    results = tool_results(body)
    if not results:
        asked = tool_call("confirm_booking", {"people": 2, "time": "19:00"}, "call_book_1")
        return Reply(tool_calls=[asked])
    return f"Booked: {results[-1]['content']}"


def by_schema(replies: dict[str | None, Callable[[dict[str, Any]], Any]]) -> Script:
    """A worker script answering each structured output (or plain text, key None) its way."""
    return lambda body: replies[schema_of(body)](body)


def invalid_once(schema: str, bad: str, then: Any) -> Script:
    """A script for calls asking for `schema` (it checks they do): `bad` first, `then` after."""
    replies = iter([bad])

    def script(body: dict[str, Any]) -> Any:
        assert schema_of(body) == schema, body
        return next(replies, then)

    return script


def emailing(text: str, to: str) -> dict[str, Any] | None:
    """The orchestrator's EMAIL decision for a load's request `email ... #N ...`, to `to`
    (formatted with the request's number as `n`); None for any other request."""
    if "email" not in text:
        return None
    n = text.split("#")[1].split()[0]
    parameters = {"to": to.format(n=n), "subject": f"Report {n}", "body": "say the report is ready"}
    return decision("EMAIL", f"email number {n}", "sent", **parameters)


def in_turn(fake_llm: Scriptable, model: str, *replies: Any) -> None:
    """`model` answers its calls with `replies`, one each, in order."""
    left = iter(replies)
    fake_llm.script(model, lambda body: next(left))


def evaluator_asks(fake_llm: Scriptable, question: str = "Which city?") -> None:
    """The evaluator's first verdict asks the user `question` (the request waits for the
    answer); its second passes."""
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 20, question, user_input_needed=True, questions=[question]),
        verdict(True, 90, "Good."),
    )


@contextmanager
def held(fake_llm: Scriptable, model: str, content: str) -> Iterator[threading.Event]:
    """`model` answers `content` only once the event is set, so requests stay in flight while
    the test acts; leaving the block sets it."""
    hold = threading.Event()
    fake_llm.script(model, lambda body: Reply(content, wait=hold))
    try:
        yield hold
    finally:
        hold.set()


def evaluator_held(
    fake_llm: Scriptable, judged: dict[str, Any] | None = None
) -> AbstractContextManager[threading.Event]:
    """Every verdict (`judged`, a pass by default) held, as `held` holds a reply."""
    return held(fake_llm, "fake-evaluator", json.dumps(judged or verdict(True, 90, "ok")))


def script_email(fake_llm: Scriptable, *bodies: str) -> None:
    """The orchestrator sends an email to ada@example.com; the worker's drafts have these
    bodies (EMAIL_BODY by default), one per draft, the last one repeated."""
    fake_llm.script(
        "fake-orchestrator",
        decide("EMAIL", "Email Ada", to="ada@example.com", subject="Friday"),
    )
    given = bodies or (EMAIL_BODY,)
    drafts = itertools.chain(given, itertools.repeat(given[-1]))
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": "x", "body": next(drafts)}}),
    )
