"""A mixed load for a system with replicas: sessions, each its own WebSocket on one of the
gateways, each sending its requests one after another, as a person would: routed requests,
some whose first attempt the evaluator fails (a retry with its feedback), some where the
evaluator asks the user (answered on the socket), some cancelled right after they were taken,
some emails (the fake SendGrid sends them), some small talk. Each request's end frames are
counted per request id: every request must end exactly once."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client
from tests.support.scripts import all_text, decision, emailing, last_user, structured, verdict

FINAL = ("completed", "partial", "failed", "cancelled")
KINDS = ("fail", "ask", "cancel", "email", "chat", "plain", "plain", "plain", "fail", "plain")
CITY = "Lisbon"


def text_of(session: int, n: int) -> tuple[str, str]:
    """The kind and text of request n of a session (the fake model reads the markers)."""
    kind = KINDS[(session + n) % len(KINDS)]
    if kind == "chat":
        return kind, f"hello, how are you s{session} n{n}"
    if kind == "email":
        return kind, f"email report #s{session}n{n} please"
    return kind, f"search the thing s{session} n{n} #{kind}"


def script(fake: FakeOpenAI, hold: threading.Event | None = None, pace: float = 0.0) -> None:
    """The fake model for this load. `hold`: worker calls wait for it; `pace`: seconds each
    worker call takes (a request stays in flight a while, so cancels and kills find it)."""

    def frontline(body: dict[str, Any]) -> Any:
        route = "hello" not in last_user(body)
        if not structured(body):  # the direct answer
            return "Hello there! How can I help you today?"
        return {"route_to_orchestrator": route, "reason": "work" if route else "small talk"}

    def orchestrator(body: dict[str, Any]) -> Any:
        text = last_user(body)
        task = text.split("\n")[1] if "\n" in text else text
        return emailing(text, "{n}@example.com") or decision("GENERAL", task, "an answer")

    def worker(body: dict[str, Any]) -> Any:
        if body.get("response_format"):  # the email worker's draft
            return Reply(json.dumps({"subject": "Report", "body": "It is ready."}), wait=hold)
        revised = " (revised)" if "redo please" in all_text(body) else ""
        answer = "Answer to: " + last_user(body).split("\n")[0] + revised
        return Reply(answer, delay=pace, wait=hold)

    def evaluator(body: dict[str, Any]) -> Any:
        text = all_text(body)
        if "#fail" in text and "(revised)" not in text:
            return verdict(False, 20, "redo please")
        if "#ask" in text and CITY not in text:
            return verdict(
                False,
                20,
                "Which city?",
                user_input_needed=True,
                questions=["Which city do you mean?"],
            )
        return verdict(True, 90, "ok")

    fake.script("fake-frontline", frontline)
    fake.script("fake-orchestrator", orchestrator)
    fake.script("fake-worker", worker)
    fake.script("fake-evaluator", evaluator)


@dataclass
class Tally:
    """What the clients saw: each request's final end frames, and requests that never ended."""

    kinds: dict[str, str] = field(default_factory=dict)
    ends: dict[str, list[str]] = field(default_factory=dict)
    stuck: list[str] = field(default_factory=list)
    lost_sockets: Counter[str] = field(default_factory=Counter)

    def statuses(self) -> Counter[str]:
        return Counter(s for seen in self.ends.values() for s in seen)


async def one_request(client: Client, rid: str, kind: str, text: str, tally: Tally) -> None:
    """Send one request and read frames until its final end (answering its clarification,
    cancelling it once taken, as its kind says)."""
    tally.kinds[rid] = kind
    ends = tally.ends.setdefault(rid, [])
    await client.send({"uuid": client.uuid, "message": text, "request_id": rid})
    while True:
        frame = await client.recv(timeout=60)
        if frame.get("request_id") != rid:
            continue
        if kind == "cancel" and frame.get("event") == "ack" and frame.get("action") == "message":
            await client.send({"cancel": rid})
        if "on_chat_model_end" not in frame:
            continue
        if frame.get("status") == "awaiting_clarification":
            await client.send({"uuid": client.uuid, "message": CITY, "reply_to": rid})
            continue
        ends.append(str(frame.get("status")))
        if frame.get("status") in FINAL:
            # A second end for the same request would come right behind the first.
            await _no_second_end(client, rid, ends)
            return


async def _no_second_end(client: Client, rid: str, ends: list[str]) -> None:
    try:
        while True:
            frame = await client.recv(timeout=0.05)
            if frame.get("request_id") == rid and "on_chat_model_end" in frame:
                ends.append(str(frame.get("status")))
    except TimeoutError:
        return


async def session(url: str, k: int, requests: int, tally: Tally, prefix: str) -> None:
    """Session k on the gateway at `url`: `requests` requests, one after another."""
    async with Client(url, uuid_=f"{prefix}s{k}", events=True) as client:
        for n in range(requests):
            kind, text = text_of(k, n)
            rid = f"{prefix}-{k}-{n}"
            try:
                await one_request(client, rid, kind, text, tally)
            except TimeoutError:
                tally.stuck.append(rid)
            except Exception as exc:  # the socket went: the rest of this session is not sent
                tally.lost_sockets[type(exc).__name__] += 1
                tally.stuck.append(rid)
                return


async def run_sessions(
    urls: list[str], sessions: int, requests: int, tally: Tally, prefix: str, budget: float
) -> None:
    """`sessions` sessions at once, spread over the gateways at `urls` (session k on k mod G),
    for at most `budget` seconds: a request sent and not ended by then is stuck."""
    runs = [
        asyncio.create_task(session(urls[k % len(urls)], k, requests, tally, prefix))
        for k in range(sessions)
    ]
    _, late = await asyncio.wait(runs, timeout=budget)
    for run in late:
        run.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    tally.stuck += [rid for rid, ends in tally.ends.items() if not ends and rid not in tally.stuck]
