"""`browser.new_domain=ask` on live services (the real nats-server, the services as processes,
a scripted model, real Chromium on two local sites: `site` as 127.0.0.1 and `away` as
localhost, another host). A link on an approved page to the other host is not followed: its
server gets nothing, and the model is told to call browser_navigate, which parks the request
for a person's approval; after a yes the other host opens. The browser's side in detail (302s,
scripts, forms, pop-ups, `deny`, `allow`): tests/workers/test_browser_new_hosts.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.approvals import parked
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.fakes.site import FakeSite
from tests.support.gateway_client import AuthClient
from tests.support.harness import Conversation, System
from tests.support.scripts import decide_tools, tool_results
from tests.support.systems import Systems

pytestmark = pytest.mark.timeout(300)

MODEL = "fake-browser-approvals"


@pytest.fixture(scope="module")
def away() -> Iterator[FakeSite]:
    with FakeSite() as fake:
        fake.page("/", "<title>Away</title><p>the other host</p>")
        yield fake


def away_host_port(away: FakeSite) -> str:
    return f"localhost:{away.url.rsplit(':', 1)[1]}"


@pytest.fixture(scope="module")
def gated(systems: Systems, site: FakeSite, away: FakeSite) -> Iterator[System]:
    yield from systems.run(
        tools=MODEL,
        keyless=True,
        auth=True,
        approvals="browser.new_domain=ask",
        SIDEKICK_EGRESS_ALLOW=f"{site.host_port},{away_host_port(away)}",
    )


def pages(site: FakeSite) -> list[str]:
    """What `site` was asked for (the browser's own favicon fetches aside)."""
    return [p for p in site.hits if p != "/favicon.ico"]


async def test_a_link_to_another_host_is_not_followed_and_the_model_asks_for_it_instead(
    gated: System, fake_llm: FakeOpenAI, site: FakeSite, away: FakeSite
) -> None:
    tag = uuid.uuid4().hex[:8]
    far = f"http://{away_host_port(away)}/"
    home = site.page(f"/home-{tag}", f'<title>Home</title><a id="out" href="{far}">Away</a>')
    steps = [
        tool_call("browser_navigate", {"url": home}),
        tool_call("browser_click", {"selector": "#out"}),
        tool_call("browser_navigate", {"url": far}),  # as the click's result says
    ]

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(steps):
            return Reply(tool_calls=[steps[len(results)]])
        return Reply("The tools said: " + " | ".join(r["content"] for r in results))

    fake_llm.script("fake-orchestrator", decide_tools("follow my link"))
    fake_llm.script(MODEL, model)
    async with AuthClient(gated.ws_url, "zoe", events=True) as zoe:
        request_id = await zoe.ack("Please route this: follow my link")
        first = await parked(zoe, request_id)
        assert (first["action"], first["arguments"]) == (
            "browser.new_domain",
            {"domain": "127.0.0.1"},
        )
        await zoe.send({"uuid": zoe.uuid, "message": "yes", "reply_to": request_id})
        second = await parked(zoe, request_id)  # the click was stopped; browser_navigate asks
        assert second["arguments"] == {"domain": "localhost"}
        assert f"the browser would open {far}, on a host not opened" in second["reason"]
        assert pages(away) == []
        await zoe.send({"uuid": zoe.uuid, "message": "yes", "reply_to": request_id})
        done: Conversation = await zoe.until_end_of(request_id, timeout=120)
    assert done.end["status"] == "completed", done.frames
    stopped = (
        f"ERROR: The browser did not open {far}: the page (a link, a form or a script) led "
        "there, to localhost, a host not opened in this run. Nothing was loaded from it. The "
        "operator's approval policy asks a person before the browser opens a new host: to go "
        f"there, call browser_navigate with {far}, and a person will be asked to approve it."
    )
    assert stopped in done.text
    assert f"Opened {far} (HTTP 200)" in done.text
    # Only the approved browser_navigate reached the other host; the clicks never did.
    assert pages(away) == ["/"]
