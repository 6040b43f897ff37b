"""A run's events on the wire, for one response: each event with its id, and a re-attached
stream framed so that it is a valid AG-UI stream from its first event.

- Every event carries its id twice: as the SSE `id:` (`<stream sequence>.<n>`) and as
  `metadata.sidekick.eventId`, since @ag-ui/client's SSE parser drops `id:` lines. A client
  re-attaches with the last id it saw (`Last-Event-ID`, or `forwardedProps.sidekick.
  lastEventId`: agui/inputs.py).
- A stream re-attached after an event id (`Cut`) gets exactly the events after it, each with its
  id, no duplicate and none missing; and before them the framing a fresh client needs: the
  run's `RUN_STARTED` (the same run), then, just before the first missed event, the opening
  event of each step, text message and tool call that was open at the cut (`STEP_STARTED`,
  `TEXT_MESSAGE_START`, `TOOL_CALL_START` with their ids as first sent: the client's reducer
  finds the message and the call it already has). Framing events carry no id, so a client's
  position never moves back. A client that had seen the run's end gets `RUN_STARTED` and that
  end again, as framing.
"""

from __future__ import annotations

from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from services.gateway.agui.inputs import Position

KEY = "sidekick"  # Sidekick's key in an event's metadata


def frame(event: BaseEvent, seq: int, k: int) -> bytes:
    """An event of the run, with its id."""
    event_id = f"{seq}.{k}"
    metadata = {**(event.metadata or {}), KEY: {"eventId": event_id}}
    data = event.model_copy(update={"metadata": metadata}).model_dump_json(by_alias=True)
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def framing(event: BaseEvent) -> bytes:
    """An event sent again to frame a re-attached stream: no id."""
    return f"data: {event.model_dump_json(by_alias=True)}\n\n".encode()


class Opened:
    """The steps, text messages and tool calls open at a point of a run's stream, in the order
    they were opened, by their opening events."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], BaseEvent] = {}

    def take(self, event: BaseEvent) -> None:
        if isinstance(event, StepStartedEvent):
            self._open[("step", event.step_name)] = event
        elif isinstance(event, StepFinishedEvent):
            self._open.pop(("step", event.step_name), None)
        elif isinstance(event, TextMessageStartEvent):
            self._open[("message", event.message_id)] = event
        elif isinstance(event, TextMessageEndEvent):
            self._open.pop(("message", event.message_id), None)
        elif isinstance(event, ToolCallStartEvent):
            self._open[("tool", event.tool_call_id)] = event
        elif isinstance(event, ToolCallEndEvent):
            self._open.pop(("tool", event.tool_call_id), None)

    def reopening(self) -> list[BaseEvent]:
        return list(self._open.values())


class Cut:
    """One response's events, given where its client re-attaches (`position`: the last event
    id it saw; None: from the start) and the run's first event (`started`, its id `first`)."""

    def __init__(self, position: Position | None, started: BaseEvent, first: Position) -> None:
        self.position = position
        # A client that saw the run start needs it again; one that re-attaches before it gets
        # it as a missed event.
        self.framed = position is not None and position >= first
        self.started = started
        self.opened = Opened()
        self.reopened = False
        self.sent = False  # an event past the position went out
        self.end: BaseEvent | None = None  # the run's end, when the client saw it

    def opening(self) -> list[bytes]:
        return [framing(self.started)] if self.framed else []

    def take(self, event: BaseEvent, seq: int, k: int) -> list[bytes]:
        """What to send for the run's event at `seq.k`: nothing when the client saw it."""
        if self.position is not None and (seq, k) <= self.position:
            self.opened.take(event)
            if isinstance(event, RunFinishedEvent | RunErrorEvent):
                self.end = event
            return []
        out: list[bytes] = []
        if self.framed and not self.reopened:
            self.reopened = True
            out += [framing(e) for e in self.opened.reopening()]
        self.sent = True
        out.append(frame(event, seq, k))
        return out

    def closing(self) -> list[bytes]:
        """At the run's end: its end again, when the client had seen it and nothing went out."""
        if self.framed and not self.sent and self.end is not None:
            return [framing(self.end)]
        return []
