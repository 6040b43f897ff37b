"""The load generator's side of the WebSocket: a seed-protocol client that times one request
from its message frame to its end frame, and the percentile arithmetic."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

# Markers the fake model understands (see bench/fake_model.py).
PATHS: dict[str, tuple[str, int]] = {
    # path: (message, model calls per request)
    "direct": ("hello there", 1),
    "orchestrated_1": ("please look this up #orch", 4),
    "orchestrated_3": ("please look this up #orch #fail2", 8),
}
_serial = itertools.count(1)


def unique(message: str) -> str:
    """Every request's text differs, as real users' do (so no cache answers it)."""
    return f"{message} q{next(_serial)}"


# What the answer must contain for the request to count as served as intended.
EXPECT = {"direct": "help you today", "orchestrated_1": "ATTEMPT=1", "orchestrated_3": "ATTEMPT=3"}


@dataclass
class Outcome:
    """One request as the client saw it. Times are CLOCK_MONOTONIC ns."""

    sent_ns: int
    end_ns: int = 0
    first_frame_ns: int = 0
    text: str = ""
    error: str | None = None

    @property
    def latency_ms(self) -> float:
        return (self.end_ns - self.sent_ns) / 1e6

    @property
    def first_token_ns(self) -> int | None:
        """The fake model's stamp on its first token, if the answer carries one."""
        if self.text.startswith("t0="):
            return int(self.text[3:].split(" ", 1)[0])
        return None


class Session:
    """One WebSocket with one session uuid (rotate with `new_session`)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token
        self.ws: ClientConnection | None = None
        self.uuid = uuid.uuid4().hex[:16]

    async def open(self, *, open_timeout: float = 30.0) -> Session:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        self.ws = await connect(
            self.url, max_size=None, open_timeout=open_timeout, additional_headers=headers
        )
        await self.ws.send(json.dumps({"init": True, "uuid": self.uuid}))
        return self

    def new_session(self) -> None:
        self.uuid = uuid.uuid4().hex[:16]

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def request(self, message: str, expect: str, limit_s: float = 60.0) -> Outcome:
        assert self.ws is not None
        ws = self.ws
        frame = json.dumps({"uuid": self.uuid, "message": unique(message)})
        out = Outcome(sent_ns=time.monotonic_ns())
        parts: list[str] = []
        try:
            async with asyncio.timeout(limit_s):
                await ws.send(frame)
                while True:
                    raw = await ws.recv()
                    now = time.monotonic_ns()
                    data: dict[str, Any] = json.loads(raw)
                    chunk = data.get("on_chat_model_stream")
                    if chunk is not None:
                        if not out.first_frame_ns:
                            out.first_frame_ns = now
                        parts.append(chunk)
                    if "error" in data and out.error is None:
                        out.error = str(data["error"].get("code", "error"))
                    if "on_chat_model_end" in data:
                        out.end_ns = now
                        break
        except TimeoutError:
            out.error = "timeout"
        except Exception as exc:  # a closed socket ends the session's run, counted as an error
            out.error = type(exc).__name__
        out.text = "".join(parts)
        if out.error is None and expect not in out.text:
            out.error = "unexpected_answer"
        return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "mean": round(sum(values) / len(values), 3),
        "max": round(max(values), 3),
    }
