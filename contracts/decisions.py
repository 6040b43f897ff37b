"""The structured outputs asked of the model. Each is sent as an OpenAI `json_schema`
response format (strict) and validated on return."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contracts.base import Model

WorkerType = Literal["SEARCH", "RESEARCH", "EMAIL", "GENERAL", "TOOLS", "NONE"]

WORKER_DESCRIPTIONS: dict[str, str] = {
    "SEARCH": "Web search (Brave): current facts, news, prices; the answer cites its sources.",
    "RESEARCH": "Multi-step research: plan, search several queries, synthesise, check freshness.",
    "EMAIL": "Compose and send an email; parameters: to, subject, and what the body says.",
    "GENERAL": "Writing, reasoning, explaining, summarising: anything answerable without tools.",
    "TOOLS": "Browse web pages, run Python, read/write files, Wikipedia, push notifications.",
    "NONE": "The request cannot or must not be done; task_description says why.",
}


class FrontlineDecision(Model):
    """The frontline's choice: answer directly, or route to the orchestrator."""

    route_to_orchestrator: bool = Field(
        description="True for web search, email, current data, research or tool work."
    )
    reason: str = Field(description="One short sentence: why this choice.")


class RouteCall(Model):
    """Hand the request to the orchestrator instead of answering it."""

    reason: str = Field(
        description="One short sentence: what it needs (web search, current data, email, "
        "research, tools, ...)."
    )


class Parameter(Model):
    """One named parameter for a worker (strict schemas cannot carry free-form maps)."""

    name: str = Field(description="Parameter name, e.g. 'query', 'to', 'subject'.")
    value: str = Field(description="Parameter value.")


class OrchestratorDecision(Model):
    """Which worker does the task, and how success is judged."""

    worker_type: WorkerType = Field(description="The worker kind that should do the task.")
    task_description: str = Field(description="What the worker must do, self-contained.")
    parameters: list[Parameter] = Field(description="Named inputs for the worker.")
    success_criteria: str = Field(description="How the evaluator will judge the output.")


class Question(Model):
    """A question put to the user."""

    id: str = Field(description="Stable id, e.g. 'q1'.")
    question: str = Field(description="The question text.")


class Verdict(Model):
    """The evaluator's judgement of one worker output."""

    passed: bool = Field(description="True when the output meets the success criteria.")
    score: int = Field(ge=0, le=100, description="Quality from 0 to 100.")
    feedback: str = Field(description="What is wrong or missing, one or two sentences.")
    suggestions: list[str] = Field(description="Concrete changes for the next attempt.")
    user_input_needed: bool = Field(
        description="True only if the task cannot be done without asking the user."
    )
    questions: list[str] = Field(description="Questions for the user when input is needed.")
