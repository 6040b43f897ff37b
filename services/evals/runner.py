"""Running one case against a live system, as a client does: a WebSocket in events mode, one
session per (case, mode), the semantic cache skipped so the two modes cannot share answers."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
import websockets

from services.evals.cases import Case, CheckResult, Outcome, run_checks

Mode = Literal["loop", "single"]
MODES: tuple[Mode, ...] = ("loop", "single")
RATE_LIMIT_RETRIES = 6
ANSWER_CHARS = 4000  # kept per result in the report


@dataclass
class Target:
    """Where the system under test is, and how to talk to it."""

    ws_url: str
    http_url: str
    token: str | None = None
    timeout: float = 300.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@dataclass
class CaseRun:
    """One case in one mode: what came back, and what the checks made of it."""

    case: Case
    mode: Mode
    outcome: Outcome
    latency_s: float
    attempts: int = 0
    score: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    # Tokens (in, out) per model that answered, from the end frame's usage.models.
    models: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The system's own cost of the case (the end frame's cost_usd), when it priced it, and
    # whether its usage was counted by Sidekick (a server reported none): an estimate.
    cost_usd: float | None = None
    estimated: bool = False
    checks: list[CheckResult] = field(default_factory=list)
    judge: dict[str, Any] | None = None

    @property
    def checks_passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def passed(self) -> bool:
        judged = self.judge is None or bool(self.judge.get("passed"))
        return self.checks_passed and judged


def http_url_of(ws_url: str) -> str:
    base = ws_url.removesuffix("/ws")
    return "https://" + base[6:] if base.startswith("wss://") else "http://" + base[5:]


async def run_case(target: Target, case: Case, mode: Mode) -> CaseRun:
    session = f"eval-{target.run_id}-{case.id}-{mode}"
    started = time.monotonic()
    try:
        frames = await asyncio.wait_for(converse(target, case, mode, session), target.timeout)
        outcome, meta = read_outcome(frames)
    except TimeoutError:
        outcome, meta = Outcome(status="timeout", text="", error="no end within the timeout"), {}
    except (OSError, websockets.WebSocketException) as exc:
        outcome, meta = Outcome(status="unreachable", text="", error=str(exc)), {}
    latency = time.monotonic() - started
    if case.checks.outbox is not None:
        outcome = replace(outcome, outbox=await outbox_count(target, session))
    usage = meta.get("usage") or {}
    run = CaseRun(
        case=case,
        mode=mode,
        outcome=outcome,
        latency_s=latency,
        attempts=int(meta.get("attempts") or 0),
        score=meta.get("score"),
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        model=usage.get("model"),
        models=models_of(usage),
        cost_usd=meta.get("cost_usd"),
        estimated=bool(meta.get("usage_estimated") or usage.get("counted_calls")),
    )
    run.checks = run_checks(case.checks, outcome)
    return run


def models_of(usage: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Tokens per answering model, when the system says (it has since usage.models)."""
    raw = usage.get("models")
    if not isinstance(raw, dict):
        return {}
    return {
        str(name): (int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0))
        for name, u in raw.items()
        if isinstance(u, dict)
    }


async def converse(target: Target, case: Case, mode: Mode, session: str) -> list[dict[str, Any]]:
    """Send the case's message; the frames of its request up to its end. A rate-limited
    message is sent again after the wait the gateway asks for (or a growing one)."""
    async with websockets.connect(
        target.ws_url, max_size=None, additional_headers=target.headers
    ) as ws:
        await ws.send(json.dumps({"init": True, "uuid": session, "events": True}))
        while json.loads(await ws.recv()).get("event") != "ready":
            pass
        for retry in range(RATE_LIMIT_RETRIES + 1):
            request_id = uuid.uuid4().hex
            frame: dict[str, Any] = {
                "uuid": session,
                "message": case.message,
                "request_id": request_id,
                "use_evaluator": mode == "loop",
                "skip_cache": True,
            }
            if case.success_criteria:
                frame["success_criteria"] = case.success_criteria
            await ws.send(json.dumps(frame))
            frames = await until_end(ws, request_id)
            end = frames[-1]
            if end.get("status") == "rejected" and retry < RATE_LIMIT_RETRIES:
                code = (end.get("metadata") or {}).get("code")
                if code in ("rate_limited", "unavailable"):
                    await asyncio.sleep(min(2**retry, 30))
                    continue
            if end.get("status") == "awaiting_clarification":
                # The questions are the answer; the parked request is not left waiting.
                await ws.send(json.dumps({"cancel": request_id}))
            return frames
    raise AssertionError("unreachable")  # pragma: no cover


async def until_end(ws: Any, request_id: str) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    current = request_id
    while True:
        f = json.loads(await ws.recv())
        rid = f.get("request_id") or (f.get("error") or {}).get("request_id")
        if f.get("event") == "ack" and f.get("action") == "answer" and rid:
            current = rid  # the message answered an open question of the session instead
        if rid is not None and rid != current:
            continue
        frames.append(f)
        if "on_chat_model_end" in f:
            return frames
        if "error" in f and rid is None:  # refused before it became a request: no end frame
            return [*frames, {"on_chat_model_end": True, "status": "rejected", "metadata": {}}]


def read_outcome(frames: list[dict[str, Any]]) -> tuple[Outcome, dict[str, Any]]:
    end = frames[-1]
    meta: dict[str, Any] = dict(end.get("metadata") or {})
    text = "".join(str(f["on_chat_model_stream"]) for f in frames if "on_chat_model_stream" in f)
    errors = [f["error"] for f in frames if "error" in f]
    questions = [q for f in frames if f.get("event") == "clarification" for q in f["questions"]]
    routes = [f["stage"] for f in frames if f.get("stage") in ("direct", "routed")]
    workers = [
        f["worker_type"] for f in frames if f.get("event") == "progress" and f.get("worker_type")
    ]
    first = routes[0] if routes else ""
    route = meta.get("route") or {"direct": "direct", "routed": "orchestrated"}.get(first)
    outcome = Outcome(
        status=str(end.get("status") or "completed"),
        text=text,
        route=route,
        worker_type=meta.get("worker_type") or (workers[-1] if workers else None),
        error_code=meta.get("code") or (errors[-1].get("code") if errors else None),
        error=" ".join(str(e.get("message", "")) for e in errors),
        sources=tuple(str(s.get("url", "")) for s in meta.get("sources") or []),
        questions=len(questions),
    )
    return outcome, meta


async def outbox_count(target: Target, session: str) -> int | None:
    """Mails of the session in the outbox (`GET /api/outbox?session=`); None if unreadable."""
    try:
        async with httpx.AsyncClient(timeout=15) as http:
            resp = await http.get(
                f"{target.http_url}/api/outbox",
                params={"session": session, "limit": "20"},
                headers=target.headers,
            )
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    return len(resp.json().get("entries") or [])
