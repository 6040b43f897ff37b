"""SEARCH, RESEARCH and EMAIL end to end through the gateway's WebSocket, with the five
services as processes and Brave, SendGrid and the web played by local fakes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects, WorkerTask
from services.workers.freshness import NOTE
from tests.support.fakes.brave import NEWS, WEB, FakeBrave, result
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.pages import PageServer
from tests.support.fakes.sendgrid import SEND, SENDER, FakeSendGrid
from tests.support.harness import System
from tests.support.scripts import by_schema, decide
from tests.support.systems import SEND_FREELY, Systems
from tests.support.waits import wait_for
from tests.support.workers_support import every_kind


@pytest.fixture(scope="module")
def keyed(
    systems: Systems, brave: FakeBrave, sendgrid: FakeSendGrid, pages: PageServer
) -> Iterator[System]:
    # These tests are about sending; approvals have their own (tests/approvals/).
    yield from every_kind(
        systems,
        brave=brave,
        sendgrid=sendgrid,
        approvals=SEND_FREELY,
        # The page server (under both its names) is operator-trusted here.
        SIDEKICK_EGRESS_ALLOW=f"127.0.0.1:{pages.port},localhost:{pages.port}",
    )


def user_and_system(call: dict[str, Any]) -> tuple[str, str]:
    system = "\n".join(m["content"] for m in call["messages"] if m["role"] == "system")
    user = "\n".join(m["content"] for m in call["messages"] if m["role"] == "user")
    return user, system


async def test_a_search_request_is_answered_from_brave_results_that_it_cites(
    keyed: System, fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.web["rust 2024 edition"] = [
        result(
            "Rust 2024",
            "https://blog.example/rust-2024",
            "The <strong>2024</strong> edition",
            "3 days ago",
        ),
        result("Edition guide", "https://docs.example/edition", "What changed &amp; why"),
    ]
    fake_llm.script(
        "fake-orchestrator",
        decide("SEARCH", "Find the Rust 2024 edition", query="rust 2024 edition"),
    )
    fake_llm.script("fake-worker", lambda body: "It shipped [1] with a guide [2].")
    convo = await keyed.ask("search for the rust 2024 edition")
    assert convo.errors == []
    assert convo.end["status"] == "completed"
    assert convo.answer.startswith("It shipped [1] with a guide [2].")
    assert "[1] [Rust 2024](https://blog.example/rust-2024) (3 days ago)" in convo.text
    sources = convo.end["metadata"]["sources"]
    assert [s["url"] for s in sources] == [
        "https://blog.example/rust-2024",
        "https://docs.example/edition",
    ]
    assert sources[0]["snippet"] == "The 2024 edition" and sources[0]["age"] == "3 days ago"
    assert sources[1]["snippet"] == "What changed & why"
    (call,) = brave.calls(WEB)
    assert brave.queries(WEB) == ["rust 2024 edition"]
    assert {k.lower(): v for k, v in call.headers.items()}["x-subscription-token"] == brave.token
    # The results went to the model as user-role data, never into its system prompt.
    (worker_call,) = fake_llm.chat_calls("fake-worker")
    user, system = user_and_system(worker_call)
    assert "What changed & why" in user and "What changed" not in system


async def test_a_news_like_search_uses_the_news_endpoint(
    keyed: System, fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.news["latest ai news"] = [
        result("AI today", "https://news.example/ai", "Models", "1 hour ago")
    ]
    fake_llm.script("fake-orchestrator", decide("SEARCH", "AI news", query="latest ai news"))
    fake_llm.script("fake-worker", lambda body: "Models are news [1].")
    convo = await keyed.ask("search the latest ai news")
    assert convo.end["status"] == "completed"
    assert brave.queries(NEWS) == ["latest ai news"] and brave.calls(WEB) == []
    assert [s["url"] for s in convo.end["metadata"]["sources"]] == ["https://news.example/ai"]


async def test_a_brave_api_error_ends_in_an_honest_error_not_an_answer(
    keyed: System, fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    real_token = brave.token
    fake_llm.script("fake-orchestrator", decide("SEARCH", "Find x", query="x marks the spot"))
    brave.token = "another-token"  # the key the workers send is now refused
    try:
        convo = await keyed.ask("search for x marks the spot")
    finally:
        brave.token = real_token
    error = convo.only_error("worker_failed")
    assert "Brave Search refused the request (HTTP 422)" in error
    assert "subscription token is invalid" in error
    assert fake_llm.chat_calls("fake-worker") == []


async def test_research_with_two_live_sources_on_two_domains_completes_without_the_note(
    keyed: System, fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.news["latest python release news"] = [
        result("Python 4 is out", pages.url("/live", "127.0.0.1"), "Released today", "1 hour ago")
    ]
    brave.web["python release notes"] = [
        result("What's new", pages.url("/no-head", "localhost"), "The changes"),
    ]
    plan = {
        "goal": "Summarise the newest Python release",
        "steps": ["find the release", "read the notes"],
        "search_queries": ["latest python release news", "python release notes"],
        "requirements": ["version", "main changes"],
        "freshness_required": True,
        "clarification_needed": False,
        "questions": [],
    }
    fake_llm.script("fake-orchestrator", decide("RESEARCH", "Research the newest Python release"))
    fake_llm.script(
        "fake-worker",
        by_schema(
            {
                "ResearchPlan": lambda body: plan,
                "ResearchSynthesis": lambda body: {
                    "answer_markdown": "## Python 4\nIt is out [1]; see the notes [2].",
                    "confidence": "high",
                    "citations": [1, 2],
                },
            }
        ),
    )
    convo = await keyed.ask("research the latest python release")
    assert convo.errors == [] and convo.end["status"] == "completed"
    assert convo.answer.startswith("## Python 4\nIt is out [1]; see the notes [2].")
    assert "Confidence: high" in convo.text
    assert NOTE not in convo.text
    assert {s["url"] for s in convo.end["metadata"]["sources"]} == {
        pages.url("/live", "127.0.0.1"),
        pages.url("/no-head", "localhost"),
    }
    assert convo.end["metadata"]["usage"]["calls"] >= 2


async def test_research_with_one_live_source_ends_with_the_freshness_note(
    keyed: System, fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.web["bitcoin price today"] = [
        result("BTC", pages.url("/live", "127.0.0.1"), "price"),
        result("BTC elsewhere", pages.url("/gone", "localhost"), "gone"),
    ]
    fake_llm.script("fake-orchestrator", decide("RESEARCH", "Research the bitcoin price"))
    fake_llm.script(
        "fake-worker",
        by_schema(
            {
                "ResearchPlan": lambda body: {
                    "goal": "Current bitcoin price",
                    "steps": ["search"],
                    "search_queries": ["bitcoin price today"],
                    "requirements": ["price"],
                    "freshness_required": True,
                    "clarification_needed": False,
                    "questions": [],
                },
                "ResearchSynthesis": lambda body: {
                    "answer_markdown": "About a lot [1][2].",
                    "confidence": "low",
                    "citations": [1, 2],
                },
            }
        ),
    )
    convo = await keyed.ask("research the bitcoin price right now")
    assert convo.end["status"] == "completed"
    assert convo.text.endswith("\n\n" + NOTE)


async def test_an_email_request_is_sent_once_through_sendgrid(
    keyed: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    fake_llm.script(
        "fake-orchestrator",
        decide(
            "EMAIL",
            "Email Ada a reminder about Friday",
            to="ada@example.com",
            subject="Friday at 10",
            body="remind her of the 10am meeting",
        ),
    )
    fake_llm.script(
        "fake-worker",
        by_schema(
            {"EmailDraft": lambda body: {"subject": "x", "body": "Hi Ada,\n\n10am Friday.\n\nBest"}}
        ),
    )
    convo = await keyed.ask("email ada about friday")
    assert convo.errors == [] and convo.end["status"] == "completed"
    (mail,) = sendgrid.mails
    assert mail["personalizations"][0]["to"] == [{"email": "ada@example.com"}]
    assert mail["from"] == {"email": SENDER}
    assert mail["subject"] == "Friday at 10"  # the parameter wins over the draft's
    assert mail["content"] == [{"type": "text/plain", "value": "Hi Ada,\n\n10am Friday.\n\nBest"}]
    assert {k.lower(): v for k, v in sendgrid.calls(SEND)[0].headers.items()}[
        "authorization"
    ] == f"Bearer {sendgrid.key}"
    assert "Email sent to ada@example.com via SendGrid (message id fake-message-1)" in convo.text
    # The email worker fetched nothing: its one model call was the draft.
    (draft,) = fake_llm.chat_calls("fake-worker")
    assert "remind her of the 10am meeting" in user_and_system(draft)[0]


async def test_an_email_task_delivered_twice_is_sent_once(
    keyed: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, nc: NATS
) -> None:
    request_id = "twice-" + uuid.uuid4().hex[:8]
    fake_llm.script(
        "fake-orchestrator", decide("EMAIL", "Email Bo", to="bo@example.com", subject="Hello")
    )
    fake_llm.script(
        "fake-worker", by_schema({"EmailDraft": lambda body: {"subject": "Hi", "body": "Hi Bo"}})
    )
    convo = await keyed.ask("email bo hello", request_id=request_id)
    assert convo.end["status"] == "completed" and len(sendgrid.mails) == 1

    # Deliver the very same task again, as a redelivery would, under another message id.
    s = Subjects(keyed.namespace)
    js = nc.jetstream()
    stored = await js.get_last_msg(s.work_stream, s.worker_run("EMAIL"))
    assert WorkerTask.model_validate_json(stored.data or b"").request_id == request_id
    ack = await js.publish(
        s.worker_run("EMAIL"),
        stored.data or b"",
        stream=s.work_stream,
        headers={"Nats-Msg-Id": f"{request_id}:again"},
    )
    consumer = f"{keyed.namespace}_worker_email"

    async def handled() -> bool:
        info = await js.consumer_info(s.work_stream, consumer)
        return bool(info.ack_floor and (info.ack_floor.stream_seq or 0) >= ack.seq)

    await wait_for(handled)
    assert len(sendgrid.mails) == 1
    assert len(fake_llm.chat_calls("fake-worker")) == 2  # it did run again, and did not send


async def test_an_invalid_recipient_gets_a_clear_error_and_nothing_is_sent(
    keyed: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    fake_llm.script("fake-orchestrator", decide("EMAIL", "Email Bob", to="bob-at-example"))
    convo = await keyed.ask("email bob the notes")
    error = convo.only_error("worker_failed")
    assert "Invalid recipient 'bob-at-example': not a valid email address" in error
    assert sendgrid.mails == []
    assert fake_llm.chat_calls("fake-worker") == []
    assert convo.end["status"] == "failed"
