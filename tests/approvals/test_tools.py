"""The operator's approval policy over the TOOLS worker's consequential tools, on live services
(the real nats-server, the five services as processes), a scripted model that calls the tools,
the fake Pushover, a real MCP server over stdio and real Chromium on a local site.

The policy here: notify and the MCP tool `vault__tally` ask, python_run is denied, a browser
navigation to a new host asks, and `vault__reverse` is left to an operator. Asking parks the
request with the call's exact arguments; a yes runs exactly those once (a SIGKILLed worker and
the redelivered task included), a no becomes a tool result the model answers from, a changed
call asks anew and the old approval stays unused, and a denied tool is never run."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from contracts.approvals import digest_of
from tests.support.approvals import answer, approved_then_killed, operator_approves, parked
from tests.support.dirs import searchable_root
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.fakes.pushover import FakePushover
from tests.support.fakes.site import FakeSite
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import Conversation, System
from tests.support.mcp_server import stdio_entry
from tests.support.page import chromium, send
from tests.support.scripts import decide_tools, tool_results
from tests.support.systems import Systems
from tests.support.waits import wait_for
from tests.support.xss import nothing_ran, watched_page

pytestmark = pytest.mark.timeout(300)

MODEL = "fake-tool-approvals"
OPERATOR = "zack"
POLICY = (
    "notify=ask;vault__tally=ask;python_run=deny;browser.new_domain=ask;"
    "vault__reverse=ask;vault__reverse:approver=operator"
)
Script = Callable[[dict[str, Any]], Reply]


files = searchable_root()


@pytest.fixture(scope="module")
def tally(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tally") / "notes.txt"


@pytest.fixture(scope="module")
def gated(
    systems: Systems,
    pushover: FakePushover,
    site: FakeSite,
    tally: Path,
    files: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[System]:
    config = tmp_path_factory.mktemp("mcp") / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"vault": stdio_entry(MCP_TEST_TALLY=str(tally))}}))
    yield from systems.run(
        tools=MODEL,
        SIDEKICK_FILES_ROOT=str(files),
        keyless=True,
        SIDEKICK_MCP_CONFIG=str(config),
        auth=True,
        pushover=pushover,
        approvals=POLICY,
        SIDEKICK_APPROVERS=OPERATOR,
        SIDEKICK_EGRESS_ALLOW=site.host_port,
        # A claim left `started` by a killed worker counts as unknown after 3 + 15 s.
        SIDEKICK_HTTP_TIMEOUT="3",
    )


def call_then_answer(name: str, args: dict[str, Any]) -> Script:
    """Each run: call the tool, then answer with what the tool said."""

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call(name, args)])
        return Reply("The tool said: " + results[-1]["content"])

    return model


def runs(fake_llm: FakeOpenAI) -> int:
    """How many runs of the tools worker began (model calls with no tool result yet)."""
    return len([c for c in fake_llm.chat_calls(MODEL) if not tool_results(c)])


async def ask_parked(
    client: AuthClient, fake_llm: FakeOpenAI, model: Script, text: str
) -> tuple[str, dict[str, Any]]:
    """Ask for `text` with the worker model `model`; (request id, the approval it parks on)."""
    fake_llm.script("fake-orchestrator", decide_tools(text))
    fake_llm.script(MODEL, model)
    request_id = await client.ack(f"Please route this: {text}")
    return request_id, await parked(client, request_id)


@asynccontextmanager
async def asked_to_notify(
    system: System, fake_llm: FakeOpenAI, principal: str, message: str
) -> AsyncIterator[tuple[AuthClient, str, dict[str, Any]]]:
    """`principal`'s socket, on which it asked to be notified with `message` and read the
    approval it parks on: (the client, the request id, the approval)."""
    model = call_then_answer("notify", {"message": message})
    async with AuthClient(system.ws_url, principal, events=True) as client:
        request_id, approval = await ask_parked(client, fake_llm, model, "notify me")
        yield client, request_id, approval


async def decide(client: AuthClient, request_id: str, words: str) -> Conversation:
    await client.send({"uuid": client.uuid, "message": words, "reply_to": request_id})
    return await client.until_end_of(request_id, timeout=120)


async def test_notify_asks_with_its_message_and_a_yes_pushes_it_exactly_once(
    gated: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    message = f"Your report {uuid.uuid4().hex[:6]} is ready"
    async with asked_to_notify(gated, fake_llm, "otto", message) as (otto, request_id, approval):
        assert (approval["action"], approval["arguments"]) == ("notify", {"message": message})
        assert approval["digest"] == digest_of("notify", {"message": message})
        assert "the variable approval policy says ask for notify" in approval["reason"]
        assert pushover.sent(message) == 0 and runs(fake_llm) == 1
        async with api(gated.http_url, "otto") as http:
            state = (await http.get(f"/api/workflows/{request_id}")).json()
        (question,) = state["state"]["clarification_questions"]
        assert question["question"].startswith(
            f"Sidekick is about to send you this push notification:\n\n{message}\n\n"
        )
        done = await decide(otto, request_id, "yes")
    assert done.end["status"] == "completed", done.frames
    assert done.text.startswith("The tool said: Notification sent (Pushover request ")
    assert pushover.sent(message) == 1


async def test_no_to_a_notification_pushes_nothing_and_the_answer_says_it_was_declined(
    gated: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    message = f"Declined note {uuid.uuid4().hex[:6]}"
    async with asked_to_notify(gated, fake_llm, "paula", message) as (paula, request_id, _):
        done = await decide(paula, request_id, "no")
    assert done.end["status"] == "completed", done.frames
    assert pushover.sent(message) == 0
    assert f"The user declined to run notify (message: {message}); it was not run" in done.text


async def test_the_worker_killed_mid_push_after_approval_pushes_exactly_once(
    gated: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    message = f"Killed mid-push {uuid.uuid4().hex[:6]}"
    async with asked_to_notify(gated, fake_llm, "ruth", message) as (ruth, request_id, _):
        await approved_then_killed(ruth, request_id, gated, pushover, "the push")
        done = await ruth.until_end_of(request_id, timeout=150)
    # The redelivered task found the approved push already claimed: not pushed again.
    assert pushover.sent(message) == 1
    assert "this approved notify call may or may not have run" in done.text
    assert runs(fake_llm) == 3  # asked; approved and killed; redelivered


async def test_an_mcp_tool_the_policy_asks_about_runs_once_after_a_yes(
    gated: System, fake_llm: FakeOpenAI, tally: Path
) -> None:
    await wait_for(lambda: "'vault' (stdio: python" in gated.log("workers"), 60)
    note = f"note-{uuid.uuid4().hex[:8]}"

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < 2:  # the same call twice: the approval is for one run
            return Reply(tool_calls=[tool_call("vault__tally", {"note": note})])
        return Reply("The server said: " + " / ".join(r["content"] for r in results))

    async with AuthClient(gated.ws_url, "sam", events=True) as sam:
        request_id, approval = await ask_parked(sam, fake_llm, model, "tally my note")
        assert (approval["action"], approval["arguments"]) == ("vault__tally", {"note": note})
        assert not tally.exists() or note not in tally.read_text()
        done = await decide(sam, request_id, "yes")
    assert done.end["status"] == "completed", done.frames
    assert [line for line in tally.read_text().splitlines() if line == note] == [note]
    assert f"tallied '{note}'" in done.text
    assert "This approved vault__tally call already ran; it was not run again." in done.text


async def test_an_mcp_tool_left_to_operators_waits_for_an_operator_and_runs_on_their_yes(
    gated: System, fake_llm: FakeOpenAI
) -> None:
    await wait_for(lambda: "'vault' (stdio: python" in gated.log("workers"), 60)
    word = uuid.uuid4().hex[:10]
    model = call_then_answer("vault__reverse", {"text": word})
    async with AuthClient(gated.ws_url, "xena", events=True) as xena:
        request_id, approval = await ask_parked(xena, fake_llm, model, "reverse my word")
        assert (approval["approver"], approval["approvers"]) == ("operator", [OPERATOR])
        refused = await answer(xena, request_id, "yes")
        assert refused[-1]["error"]["code"] == "conflict"
        done = await operator_approves(xena, gated.http_url, OPERATOR, request_id, approval)
    assert done[-1]["status"] == "completed", done[-1]
    assert f"{word[::-1]} (reversed by pid " in Conversation(done).text


async def test_a_denied_python_run_is_not_run_and_the_model_is_told(
    gated: System, fake_llm: FakeOpenAI, files: Path
) -> None:
    marker = f"ran-{uuid.uuid4().hex[:8]}"
    code = f"open({marker!r}, 'w').write('x'); print('ran')"
    fake_llm.script("fake-orchestrator", decide_tools("run my program"))
    fake_llm.script(MODEL, call_then_answer("python_run", {"code": code}))
    async with AuthClient(gated.ws_url, "tess", events=True) as tess:
        request_id = await tess.ack("Please route this: run my program")
        done = await tess.until_end_of(request_id)
    assert done.end["status"] == "completed", done.frames
    assert [f for f in done.frames if f.get("event") == "clarification"] == []
    assert done.text.startswith(
        "The tool said: ERROR: the operator's approval policy forbids python_run "
        "(the variable approval policy says deny for python_run); it was not run."
    )
    assert list(files.rglob(marker)) == []


async def test_a_changed_notification_after_a_yes_asks_again_and_the_old_approval_is_unused(
    gated: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    first, changed = (f"{word} {uuid.uuid4().hex[:6]}" for word in ("Lunch at 12", "Lunch at 1"))
    messages = itertools.chain([first], itertools.repeat(changed))

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:  # the first run says one thing, every later run another
            return Reply(tool_calls=[tool_call("notify", {"message": next(messages)})])
        return Reply("The tool said: " + results[-1]["content"])

    async with AuthClient(gated.ws_url, "vera", events=True) as vera:
        request_id, old = await ask_parked(vera, fake_llm, model, "notify me")
        await vera.send({"uuid": vera.uuid, "message": "yes", "reply_to": request_id})
        new = await parked(vera, request_id)
        assert old["arguments"] == {"message": first}
        assert new["arguments"] == {"message": changed}
        assert new["approval_id"] != old["approval_id"]
        assert "these are not the arguments of notify that were approved" in new["reason"]
        assert pushover.sent(first) == pushover.sent(changed) == 0
        done = await decide(vera, request_id, "yes")
    assert done.end["status"] == "completed", done.frames
    assert (pushover.sent(first), pushover.sent(changed)) == (0, 1)


async def test_a_new_host_in_the_browser_asks_first_and_then_its_pages_open(
    gated: System, fake_llm: FakeOpenAI, site: FakeSite
) -> None:
    tag = uuid.uuid4().hex[:8]
    one = site.page(f"/one-{tag}", "<title>One</title><p>first page</p>")
    two = site.page(f"/two-{tag}", f"<title>Two</title><p>second page {tag}</p>")

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < 2:  # two pages of one host: only the first is new
            url = one if not results else two
            return Reply(tool_calls=[tool_call("browser_navigate", {"url": url})])
        if len(results) == 2:
            return Reply(tool_calls=[tool_call("browser_text", {})])
        return Reply("The page said: " + results[-1]["content"])

    async with AuthClient(gated.ws_url, "wade", events=True) as wade:
        request_id, approval = await ask_parked(wade, fake_llm, model, "browse my site")
        assert approval["action"] == "browser.new_domain"
        assert approval["arguments"] == {"domain": "127.0.0.1"}
        opens = f"the browser would open {one}, on a host not opened in this run"
        assert opens in approval["reason"]
        assert f"/one-{tag}" not in site.hits
        done = await decide(wade, request_id, "yes")
    assert done.end["status"] == "completed", done.frames
    assert f"second page {tag}" in done.text
    assert [h for h in site.hits if tag in h] == [f"/one-{tag}", f"/two-{tag}"]


async def test_the_page_shows_a_notification_to_approve_as_text(
    gated: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    attack = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> **b**'
    fake_llm.script("fake-orchestrator", decide_tools("notify me"))
    fake_llm.script(MODEL, call_then_answer("notify", {"message": attack, "title": attack}))
    async with chromium() as browser:
        page = await watched_page(browser, gated, "yara")
        await send(page, "Please route this: notify me")
        box = page.locator(".turn").nth(0).locator(".approve")
        await expect(box.get_by_role("button", name="Approve")).to_be_focused()
        await expect(box.locator("dt")).to_have_text(["Action", "Title"])
        await expect(box.locator("dd")).to_have_text(["notify", attack])
        await expect(box.locator(".action-body")).to_have_text(attack)
        assert await box.locator("img, script, strong").count() == 0
        await box.get_by_role("button", name="Deny").click()
        turn = page.locator(".turn").nth(0)
        await expect(turn.locator(".answer")).to_contain_text("declined to run notify")
        await nothing_ran(page)
    assert pushover.sent(attack) == 0
