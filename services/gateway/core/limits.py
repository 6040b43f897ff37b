"""Per-principal limits on new work: requests per minute and requests in flight.

Counted per gateway process (a replica counts what it accepted). A request leaves the in-flight
count when its end (or a clarification question) reaches this gateway on the bus; an entry
whose end never came expires after `stale_after` seconds so a lost event cannot block a user.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from services.gateway.core.errors import RateLimited


@dataclass
class Refusal:
    """Why a request was refused, and after how many seconds it may be tried again."""

    message: str
    retry_after: int


@dataclass
class Limits:
    per_minute: int  # 0 = unlimited
    concurrent: int  # 0 = unlimited
    stale_after: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    _recent: dict[str, deque[float]] = field(default_factory=dict)
    _inflight: dict[str, dict[str, float]] = field(default_factory=dict)
    _owner: dict[str, str] = field(default_factory=dict)

    def admit(self, principal: str, request_id: str) -> Refusal | None:
        """Count a new request (or a resumed one) for `principal`, or say why not."""
        now = self.clock()
        if self.per_minute:
            recent = self._recent.setdefault(principal, deque())
            while recent and now - recent[0] >= 60:
                recent.popleft()
            if len(recent) >= self.per_minute:
                wait = max(1, int(60 - (now - recent[0])) + 1)
                return Refusal(
                    f"Rate limit: at most {self.per_minute} requests per minute; "
                    f"try again in {wait}s.",
                    wait,
                )
        if self.concurrent and request_id not in self._owner:
            flying = self._inflight.setdefault(principal, {})
            for rid, since in list(flying.items()):
                if now - since > self.stale_after:
                    self.release(rid)
            if len(flying) >= self.concurrent:
                return Refusal(
                    f"Too many requests in flight: at most {self.concurrent} at once; "
                    "wait for one to finish (or cancel one).",
                    5,
                )
        if self.per_minute:
            self._recent[principal].append(now)
        if self.concurrent:
            self._inflight.setdefault(principal, {})[request_id] = now
            self._owner[request_id] = principal
        return None

    def take(self, principal: str, request_id: str) -> None:
        """Count it as `admit` does, or raise RateLimited saying why not."""
        refusal = self.admit(principal, request_id)
        if refusal is not None:
            raise RateLimited(refusal.message, refusal.retry_after)

    def release(self, request_id: str) -> None:
        principal = self._owner.pop(request_id, None)
        if principal is None:
            return
        flying = self._inflight.get(principal)
        if flying is not None:
            flying.pop(request_id, None)
            if not flying:
                del self._inflight[principal]

    def in_flight(self, principal: str) -> int:
        return len(self._inflight.get(principal, {}))
