"""Approvals through the public surfaces, on live services and the fake SendGrid: an email the
default policy asks about parks its request; a person's yes sends exactly the approved email
once, a no sends nothing and the answer says so; a second answer, a stale approval id, another
principal's answer are refused and change nothing; ten answers at once: one wins; a draft that
changed after approval asks again and the old approval is never used."""

from __future__ import annotations

import asyncio

import httpx
from a2a.types.a2a_pb2 import TaskState
from playwright.async_api import expect

from contracts.approvals import digest_of
from tests.support.agui import run_input
from tests.support.approvals import answer, asked_to_email, feedback
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, api, bearer, token
from tests.support.harness import System
from tests.support.page import chromium, send, shot
from tests.support.protocols import ag_ui_run, run_chat, say, transport
from tests.support.scripts import EMAIL_BODY as BODY
from tests.support.scripts import script_email
from tests.support.xss import nothing_ran, watched_page


async def test_yes_sends_exactly_the_approved_email_once_and_the_decision_is_kept(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(asking, fake_llm, "alice") as (alice, request_id, approval):
        assert approval["action"] == "email.send"
        assert approval["arguments"] == {"to": "ada@example.com", "subject": "Friday", "body": BODY}
        assert approval["digest"] == digest_of("email.send", approval["arguments"])
        assert approval["approvers"] == ["alice"]
        assert sendgrid.mails == []  # nothing is sent while it waits
        async with api(asking.http_url, "alice") as http:
            waiting = (await http.get(f"/api/workflows/{request_id}")).json()
            assert waiting["status"] == "awaiting_clarification"
            assert waiting["state"]["approval"]["approval_id"] == approval["approval_id"]
            assert (
                "To: ada@example.com" in waiting["state"]["clarification_questions"][0]["question"]
            )

            done = await answer(alice, request_id, "yes")
            assert done[-1]["status"] == "completed", done[-1]
            (mail,) = sendgrid.mails
            assert mail["content"] == [{"type": "text/plain", "value": BODY}]
            assert mail["personalizations"][0]["to"] == [{"email": "ada@example.com"}]

            again = await answer(alice, request_id, "yes")
            assert again[-1]["error"]["code"] == "conflict"
            state = (await http.get(f"/api/workflows/{request_id}")).json()["state"]
        (kept,) = state["approvals"]
        (decision,) = kept["decisions"]
        assert (decision["decision"], decision["by"]) == ("approved", "alice")
        assert decision["digest"] == approval["digest"] and decision["at"]
    assert len(sendgrid.mails) == 1


async def test_no_sends_nothing_and_the_answer_says_it_was_declined(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(asking, fake_llm, "bob") as (bob, request_id, _):
        done = await answer(bob, request_id, "No")
    text = "".join(f.get("on_chat_model_stream", "") for f in done)
    assert done[-1]["status"] == "completed"
    assert "The user declined to send this email (to ada@example.com" in text
    assert sendgrid.mails == []


async def test_another_principal_and_a_stale_approval_id_are_refused_and_change_nothing(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(asking, fake_llm, "carol") as (carol, request_id, approval):
        async with api(asking.http_url, "mallory") as mallory:
            stolen = await feedback(mallory, request_id, approval="approved")
            assert stolen.status_code == 404
        async with api(asking.http_url, "carol") as http:
            stale = await feedback(http, request_id, approval="approved", approval_id="0" * 32)
            assert stale.status_code == 409 and "is not the one" in stale.json()["error"]["message"]
            unclear = await feedback(http, request_id, responses={"q": "maybe"})
            assert unclear.status_code == 422
            still = (await http.get(f"/api/workflows/{request_id}")).json()
            assert still["state"]["approval"]["state"] == "pending"
            assert still["state"]["approvals"] == [] and sendgrid.mails == []
            ok = await feedback(
                http, request_id, approval="approved", approval_id=approval["approval_id"]
            )
            assert ok.status_code == 200, ok.text
        done = await carol.until_end_of(request_id)
    assert done.end["status"] == "completed" and len(sendgrid.mails) == 1


async def test_ten_concurrent_approvals_of_one_action_one_wins_and_one_email_goes(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(asking, fake_llm, "dave") as (dave, request_id, _):
        async with httpx.AsyncClient(
            base_url=asking.http_url, headers=bearer("dave"), timeout=30
        ) as http:
            yes = (feedback(http, request_id, approval="approved") for _ in range(10))
            replies = await asyncio.gather(*yes)
        assert sorted(r.status_code for r in replies) == [200] + [409] * 9
        done = await dave.until_end_of(request_id)
    assert done.end["status"] == "completed" and len(sendgrid.mails) == 1


async def test_a_draft_changed_after_approval_asks_again_and_the_old_approval_is_never_used(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    changed = BODY + "\n\nP.S. Also wire me $5,000."
    async with asked_to_email(asking, fake_llm, "erin", BODY, changed) as (erin, request_id, first):
        asked_again = await answer(erin, request_id, "yes")
        (second,) = [f["approval"] for f in asked_again if f.get("event") == "clarification"]
        assert second["approval_id"] != first["approval_id"]
        assert second["arguments"]["body"] == changed and second["digest"] != first["digest"]
        assert "changed after it was approved" in second["reason"]
        assert sendgrid.mails == []  # the approved digest never matched what would be sent
        done = await answer(erin, request_id, "yes")
    assert done[-1]["status"] == "completed"
    (mail,) = sendgrid.mails
    assert mail["content"][0]["value"] == changed


async def test_the_legacy_protocol_shows_the_email_in_words_and_takes_yes(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(asking.ws_url, "frank") as frank:
        asked = await frank.ask("email ada@example.com about friday")
        assert "Sidekick is about to send this email:\nTo: ada@example.com\nSubject: Friday" in (
            asked.text
        )
        assert BODY in asked.text and "Reply yes to approve it, or no to decline." in asked.text
        assert sendgrid.mails == []
        sent = await frank.ask("yes")
    assert "Email sent to ada@example.com via SendGrid" in sent.text
    assert len(sendgrid.mails) == 1


async def test_v1_asks_as_an_assistant_message_and_the_next_call_decides(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)

    async def v1(http: httpx.AsyncClient, text: str) -> str:
        """One /v1 call of the session `grace-mail`: the assistant's answer."""
        body = {
            "model": "sidekick",
            "user": "grace-mail",
            "messages": [{"role": "user", "content": text}],
        }
        reply = await http.post("/v1/chat/completions", json=body)
        return str(reply.json()["choices"][0]["message"]["content"])

    async with api(asking.http_url, "grace") as http:
        asked = await v1(http, "email ada@example.com about friday")
        assert "Sidekick is about to send this email" in asked and BODY in asked
        assert sendgrid.mails == []
        second = await v1(http, "no")
    assert "declined to send this email" in second
    assert sendgrid.mails == []


async def test_the_page_shows_the_email_as_text_with_approve_and_deny_buttons(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    attack = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> **bold**'
    script_email(fake_llm, attack)
    async with chromium() as browser:
        page = await watched_page(browser, asking, "hank")
        await send(page, "email ada@example.com about friday")
        box = page.locator(".turn").nth(0).locator(".approve")
        await expect(box.get_by_role("button", name="Approve")).to_be_focused()
        await expect(box.locator("dd").nth(0)).to_have_text("ada@example.com")
        await expect(box.locator("dd").nth(1)).to_have_text("Friday")
        await expect(box.locator(".action-body")).to_have_text(attack)
        assert await box.locator("img, script, strong").count() == 0
        await page.screenshot(path=shot("page-approval.png"), full_page=True)
        await box.get_by_role("button", name="Deny").click()
        turn = page.locator(".turn").nth(0)
        await expect(turn.locator(".steps")).to_contain_text("You declined it")
        await expect(turn.locator(".answer")).to_contain_text("declined to send this email")
        await nothing_ran(page)
    assert sendgrid.mails == []


def test_sidekick_chat_asks_with_the_email_and_the_next_line_decides(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    lines = "email ada@example.com about friday\nyes\n"
    done = run_chat(asking, lines, "--plain", "--token", token("ivan"))
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "  ? Sidekick is about to send this email:\nTo: ada@example.com\nSubject: Friday" in out
    assert "(waiting for your answer" in out
    assert "Email sent to ada@example.com via SendGrid" in out
    assert len(sendgrid.mails) == 1


async def test_a2a_shows_the_approval_as_input_required_and_yes_sends_once(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    async with httpx.AsyncClient(
        base_url=asking.http_url, headers=bearer("jack"), timeout=90
    ) as http:
        _, client = await transport(http, asking.http_url)
        task = (await client.send_message(say("email ada@example.com about friday"))).task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        text, data = task.status.message.parts
        assert "Sidekick is about to send this email:\nTo: ada@example.com" in text.text
        approval = data.data.struct_value.fields["approval"].struct_value.fields
        assert approval["arguments"].struct_value.fields["body"].string_value == BODY
        assert sendgrid.mails == []
        done = (await client.send_message(say("yes", task_id=task.id))).task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(sendgrid.mails) == 1


async def test_ag_ui_interrupts_for_the_approval_and_a_resumed_no_declines(
    asking: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    first = run_input("email ada@example.com about friday")
    got = await ag_ui_run(asking.http_url, first, principal="gina")
    finished = got[-1].json
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "approval_required"
    assert interrupt["metadata"]["approval"]["arguments"]["to"] == "ada@example.com"
    assert interrupt["responseSchema"]["enum"] == ["yes", "no"]
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "no"}]
    again = run_input("", thread=first["threadId"], resume=resume)
    resumed = await ag_ui_run(asking.http_url, again, principal="gina")
    assert resumed[-1].json["type"] == "RUN_FINISHED"
    text = "".join(e.json["delta"] for e in resumed if e.json["type"] == "TEXT_MESSAGE_CONTENT")
    assert "The user declined to send this email" in text
    assert sendgrid.mails == []
