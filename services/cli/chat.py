"""`sidekick chat`: a terminal client over the WebSocket (events mode). One turn at a time: it
sends your line, shows the request's steps and the answer as they come (chatview.py), and asks
for the next line when the request ends. Ctrl-C cancels the running request; Ctrl-D (or a
second Ctrl-C at the prompt) quits. A clarification question is answered by the next line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import uuid
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

from services.cli.chatview import Frame, View, make_view

# Errors the gateway sends without an end frame: the turn is over all the same.
ENDLESS_ERRORS = {"invalid_json", "invalid_frame", "frame_too_large", "message_too_long"}


class Turns:
    """Reads every frame the gateway sends and tells the view; knows which request is ours."""

    def __init__(self, ws: ClientConnection, view: View) -> None:
        self.ws = ws
        self.view = view
        self.ready = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self.current: str | None = None
        self.shown: str | None = None  # the request whose text the view is showing

    def started(self, request_id: str) -> None:
        self.current = request_id
        self.idle.clear()
        self.view.begin()
        self.shown = request_id

    def show(self, request_id: str | None) -> None:
        """Frames of another request than the one on screen: a new block (a replayed answer,
        or ours again after one)."""
        if request_id is None or request_id == self.shown:
            return
        self.view.begin(replayed=request_id != self.current)
        self.shown = request_id

    def finished(self) -> None:
        self.current = None
        self.shown = None
        self.idle.set()

    async def read(self) -> None:
        async for raw in self.ws:
            self.on_frame(json.loads(raw))

    def on_frame(self, f: Frame) -> None:
        rid = f.get("request_id")
        if f.get("event") == "ready":
            self.ready.set()
        elif f.get("event") == "ack":
            if f.get("action") == "answer" and rid:
                self.current = self.shown = rid  # our line answered a parked request
        elif f.get("event") == "replay":
            self.view.begin(replayed=True)
            self.shown = rid
        elif f.get("event") == "progress":
            self.show(rid)
            self.view.progress(f)
        elif f.get("event") == "clarification":
            self.show(rid)
            self.view.clarification(list(f.get("questions") or []))
        elif "on_chat_model_stream" in f:
            self.show(rid)
            self.view.chunk(str(f["on_chat_model_stream"]))
        elif "on_chat_model_end" in f:
            self.view.end(f)
            if rid is None or rid == self.current or self.current is None:
                self.finished()
            else:
                self.shown = None
        elif "error" in f:
            err = f["error"]
            self.view.error(str(err.get("code")), str(err.get("message")))
            if err.get("request_id") is None and err.get("code") in ENDLESS_ERRORS:
                self.finished()


def read_line(view: View) -> asyncio.Future[str | None]:
    """The next line typed, read in a daemon thread so a blocked read never holds up exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def work() -> None:
        try:
            line = view.prompt()
        except (EOFError, KeyboardInterrupt):
            line = None

        def deliver() -> None:
            if not future.done():
                future.set_result(line)

        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=work, daemon=True).start()
    return future


async def chat(
    url: str,
    session: str | None,
    criteria: str | None,
    show_events: bool,
    token: str | None = None,
    plain: bool | None = None,
) -> int:
    view = make_view(plain, quiet=not show_events)
    session = session or uuid.uuid4().hex[:12]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with websockets.connect(url, max_size=None, additional_headers=headers) as ws:
            return await converse(ws, view, url, session, criteria)
    finally:
        view.close()


async def converse(
    ws: ClientConnection, view: View, url: str, session: str, criteria: str | None
) -> int:
    turns = Turns(ws, view)
    reader = asyncio.create_task(turns.read())
    quit_now = asyncio.Event()
    loop = asyncio.get_running_loop()
    sending: set[asyncio.Task[None]] = set()

    def on_interrupt() -> None:
        if turns.current is not None and not turns.idle.is_set():
            view.info("cancelling… (Ctrl-C again at the prompt quits)")
            task = loop.create_task(ws.send(json.dumps({"cancel": turns.current})))
            sending.add(task)
            task.add_done_callback(sending.discard)
        else:
            quit_now.set()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        await ws.send(json.dumps({"init": True, "uuid": session, "events": True}))
        await wait_for_any(turns.ready.wait(), reader)
        view.info(f"connected to {url} as session {session}; type a message, Ctrl-D to quit")
        while not reader.done():
            await wait_for_any(turns.idle.wait(), reader)
            if reader.done():
                break
            line = read_line(view)
            await wait_for_any(line, reader, quit_now.wait())
            if quit_now.is_set() or reader.done() or line.result() is None:
                return 0
            text = str(line.result()).strip()
            if not text:
                continue
            request_id = uuid.uuid4().hex
            frame: dict[str, Any] = {"uuid": session, "message": text, "request_id": request_id}
            if criteria:
                frame["success_criteria"] = criteria
            turns.started(request_id)
            await ws.send(json.dumps(frame))
        error = reader.exception() if reader.done() and not reader.cancelled() else None
        view.info(f"the gateway closed the connection{f' ({error})' if error else ''}")
        return 1
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, websockets.ConnectionClosed):
            await reader


async def wait_for_any(*waits: Any) -> None:
    """Until the first of these awaitables is done (the others keep running or are dropped)."""
    tasks = [w if isinstance(w, asyncio.Future) else asyncio.ensure_future(w) for w in waits]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task, w in zip(tasks, waits, strict=True):
        if task is not w:  # made here: ours to drop
            task.cancel()
