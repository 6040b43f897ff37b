"""The agent card as this instance has it (worker kinds, browsing, MCP servers, the approval
policy, push notifications), free of words that name a server's internals; the A2A lanes'
parking aside; push notifications off. In memory: no process is started."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contracts import ClarificationRequested, Question, SessionRecord
from services.gateway.a2a.card import Offer, WorkerSide, card
from services.gateway.a2a.errors import RpcError
from services.gateway.a2a.webhooks import Webhooks
from services.runtime.base.settings import Settings
from services.runtime.requests.lanes import claimed
from services.runtime.requests.sessions import after_outcome

pytestmark = pytest.mark.fast

# Words a public card must not hold (the A2A conformance kit's check looks for the like):
# credentials, addresses of a private network, and setting names.
SENSITIVE = [
    r"api[_-]?key|secret|token|password|credential",
    r"127\.0\.0\.1|192\.168\.|\b10\.|172\.(1[6-9]|2\d|3[01])\.",
    r"(internal|private|admin|debug|test).*(url|endpoint|host)",
    r"sidekick_[a-z_]+",
]


def words(found: object) -> str:
    return str(found).lower()


def test_the_card_offers_what_the_settings_turn_on(tmp_path: Path) -> None:
    chromium = tmp_path / "chromium"
    chromium.write_text("")
    side = WorkerSide(chromium_path=str(chromium), mcp_config=tmp_path / "mcp.json")
    on = Offer.of(Settings(workers="GENERAL,SEARCH,EMAIL,TOOLS"), side)
    assert on.browsing and on.mcp and on.push and on.email == "ask"
    made = card("https://sidekick.example.com/", True, on)
    assert {s.id for s in made.skills} == {"general", "search", "email", "tools"}
    (email,) = [s for s in made.skills if s.id == "email"]
    assert "waits for your approval" in email.description
    (tools,) = [s for s in made.skills if s.id == "tools"]
    assert "browse web pages" in tools.description and "MCP" in tools.description
    assert made.capabilities.push_notifications


def test_what_is_off_is_not_offered(tmp_path: Path) -> None:
    side = WorkerSide(chromium_path=str(tmp_path / "none"), approvals="email.send=allow")
    off = Offer.of(Settings(workers="GENERAL,TOOLS", a2a_push=False), side)
    made = card("https://sidekick.example.com/", False, off)
    assert {s.id for s in made.skills} == {"general", "tools"}
    (tools,) = [s for s in made.skills if s.id == "tools"]
    assert "browse" not in tools.description and "MCP" not in tools.description
    assert not made.capabilities.push_notifications
    assert "push notification" not in made.description
    assert made.security_schemes is None
    allowed = Offer.of(Settings(workers="EMAIL"), side)
    (email,) = [s for s in card("https://x.example/", False, allowed).skills if s.id == "email"]
    assert "you did not write" in email.description  # allow still asks for a new address


@pytest.mark.parametrize("auth", [True, False])
def test_the_public_card_names_no_credential_setting_or_private_address(auth: bool) -> None:
    shown = words(
        card(
            "https://sidekick.example.com/", auth, Offer(browsing=True, mcp=True, push=True)
        ).wire()
    )
    found = {p: re.findall(p, shown) for p in SENSITIVE}
    assert not any(found.values()), found


def test_a_context_whose_requests_park_aside_hands_the_lane_on_when_one_parks() -> None:
    now = datetime.now(UTC)
    lane = SessionRecord(active="first", queued=["second"], parked_aside=True)
    asked = ClarificationRequested(
        request_id="first",
        session_id="s",
        source="evaluator",
        questions=[Question(id="q1", question="City?")],
    )
    after = after_outcome(lane, asked, "Weather?")
    assert after is not None
    assert (after.parked, after.active, after.queued, after.handoff) == (
        "first",
        "second",
        [],
        "first",
    )
    held = after_outcome(lane.model_copy(update={"parked_aside": False}), asked, "Weather?")
    assert held is not None and held.active == "first" and held.queued == ["second"]
    # The parked one, answered later, goes on outside the lane: its end leaves the lane be.
    third, position, _ = claimed(after, "third", "enqueue", now)
    assert (third.active, third.queued, position) == ("second", ["third"], 1)


async def test_with_push_notifications_off_every_config_method_is_not_supported() -> None:
    hooks = Webhooks.__new__(Webhooks)
    hooks.enabled = False
    for method in (Webhooks.create, Webhooks.get, Webhooks.list, Webhooks.delete):
        with pytest.raises(RpcError) as refused:
            await method(hooks, {"taskId": "t", "id": "c", "url": "https://x.example/"}, "p", False)
        assert refused.value.code == -32003
