"""What a person says into a session, from any surface, and what became of it.

`Intake.say(principal, session, words, to=..., surface=...)` takes `Words` and either a new
request (`Submission`) or the parked request they answer (`Reply`), and returns one `Said`:

    Accepted    a new request was taken (or a retried id was recognised): where it stands
    Answered    the words answered the parked request (a question or an approval)
    Waiting     the session waits for an answer, and the surface asked not to answer it
    TooLong     over the message limit (the numbers, for each surface's own wording)
    Refused     a GatewayError (limits, budget, busy, conflict, the bus): the surface renders it

Each surface turns a `Said` into its own shape: a frame, a status code, a JSON-RPC error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from contracts import RequestRecord, Turn
from contracts.base import IfBusy
from contracts.frontend import ContextItem, FrontendTool, ToolResult
from contracts.replay import Replay
from services.gateway.core.errors import GatewayError

Surface = Literal["ws", "workflows", "openai", "a2a", "agui", "requests"]
# What words do when the session has a request parked on the user: answer it, leave it and
# refuse (`Waiting`: A2A answers a task only by its id), or start a new request all the same.
OnParked = Literal["answer", "refuse", "new"]


@dataclass(frozen=True)
class Words:
    """What a person says: text, answers by question id, and what else goes with an answer."""

    text: str = ""
    answers: dict[str, str] = field(default_factory=dict)
    additional_context: str | None = None
    approval_id: str | None = None  # the approval an answer decides, when the client named it
    # The client's results of the tool calls the request waits for (AG-UI frontend tools).
    tool_results: list[ToolResult] = field(default_factory=list)


@dataclass(frozen=True)
class Submission:
    """A new request made of the words, and how it runs."""

    request_id: str
    chosen: bool = False  # the client chose the id: a retry of it is answered, not run again
    success_criteria: str | None = None
    use_evaluator: bool = True
    skip_cache: bool = False
    planned: bool = False
    preferences: dict[str, str] = field(default_factory=dict)
    if_busy: IfBusy = "enqueue"
    history: list[Turn] = field(default_factory=list)
    on_parked: OnParked = "answer"
    frontend_tools: list[FrontendTool] = field(default_factory=list)  # the client runs these
    context: list[ContextItem] = field(default_factory=list)  # the client app's, as data
    # The session's requests parked on the user step out of its lane, so this one need not wait
    # for their answers (A2A: a context holds several tasks; services/runtime/requests/lanes.py).
    parked_aside: bool = False
    # A client is notified of it (A2A push notifications: its webhook is kept already).
    push: bool = False
    replay: Replay | None = None  # a replay of a recorded request (services/gateway/requests/)


@dataclass(frozen=True)
class Reply:
    """The words answer this request, which the client named."""

    request_id: str


@dataclass(frozen=True)
class Accepted:
    """A new request taken: whether it is new (not a retried id), and where it stands."""

    request_id: str
    fresh: bool
    behind: str | None = None  # the session's request it waits for, when queued
    position: int = 0


@dataclass(frozen=True)
class Answered:
    """The parked request the words answered; it goes on."""

    request_id: str
    record: RequestRecord


@dataclass(frozen=True)
class Waiting:
    """The session's request `parked` waits for an answer; these words did not give it one."""

    parked: str


@dataclass(frozen=True)
class TooLong:
    """The text is over the message limit."""

    limit: int
    length: int

    @property
    def message(self) -> str:
        return f"Messages are limited to {self.limit} characters."


@dataclass(frozen=True)
class Refused:
    """Not taken. `request_id`: the request it concerns once known (the new one, or the parked
    one answered), None when the session could not be read; `answering`: it was an answer."""

    error: GatewayError
    request_id: str | None = None
    answering: bool = False


Taken = Accepted | Answered
Said = Accepted | Answered | Waiting | TooLong | Refused
