"""An approval in a request's timeline: what was asked (the action, its digest), who decided
what and when; the attempt that acted on it. A system whose email worker asks first."""

from __future__ import annotations

from tests.support.approvals import answer, asked_to_email
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import api
from tests.support.harness import System


async def test_the_timeline_shows_what_was_asked_and_who_approved_it(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(asking, fake_llm, "lou") as (lou, request_id, approval):
        async with api(asking.http_url, "lou") as http:
            waiting = (await http.get(f"/api/requests/{request_id}/timeline")).json()
        frames = await answer(lou, request_id, "yes")
    assert frames[-1]["status"] == "completed", frames
    assert len(sendgrid.mails) == 1
    (asked,) = [e for e in waiting["entries"] if e["step"] == "approval"]
    assert asked["title"] == "approval of email.send: waiting for lou"
    assert approval["digest"] in asked["detail"]

    async with api(asking.http_url, "lou") as http:
        done = (await http.get(f"/api/requests/{request_id}/timeline")).json()
    (decided,) = [e for e in done["entries"] if e["step"] == "approval"]
    assert decided["title"] == "approval of email.send: approved by lou"
    assert decided["approval"]["digest"] == approval["digest"]
    assert decided["approval"]["arguments"]["to"] == "ada@example.com"
    assert decided["at"] is not None and decided["duration_ms"] is not None
    attempts = [e for e in done["entries"] if e["step"] == "attempt"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert "Asked approval of email.send" in attempts[0]["detail"]
    assert attempts[1]["detail"] == f"acts on approval {approval['approval_id']}"
