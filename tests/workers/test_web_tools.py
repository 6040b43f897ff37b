"""wikipedia_* against a fake MediaWiki Action API and web_search against a fake Brave API,
both real HTTP servers; the tools are called by name with JSON arguments, as the loop does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from services.workers.tools.catalog import USER_AGENT
from services.workers.tools.toolbox import Call, RunContext, ToolBox
from services.workers.tools.websearch import WebSearch
from services.workers.tools.wikipedia import Wikipedia
from tests.support.fakes.brave import FakeBrave, result
from tests.support.fakes.wikipedia import FakeWikipedia

MARMALADE = (
    "Marmalade is a fruit preserve made from the juice and peel of citrus fruits boiled with "
    "sugar and water. The best-known version is made from bitter Seville oranges."
)


@pytest.fixture(scope="module")
def wiki() -> Iterator[FakeWikipedia]:
    with FakeWikipedia() as fake:
        fake.article("Marmalade", MARMALADE)
        fake.article("Seville orange", "The Seville orange is a bitter orange used for marmalade.")
        fake.article("Jam", "Jam is a fruit preserve made from crushed fruit.")
        fake.redirects["Orange marmalade"] = "Marmalade"
        yield fake


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5, headers={"User-Agent": USER_AGENT}) as client:
        yield client


def new_call() -> Call:
    return Call(RunContext(request_id="r-web", session_id="s", attempt=1), call_id="call_w")


async def test_wikipedia_search_lists_matching_articles_with_links(
    wiki: FakeWikipedia, http: httpx.AsyncClient
) -> None:
    box = ToolBox(Wikipedia(http, wiki.url).tools(), result_chars=5000, call_timeout=10)
    outcome = await box.call("wikipedia_search", json.dumps({"query": "bitter orange"}), new_call())
    assert outcome.ok, outcome.content
    assert f"Marmalade ({wiki.url}/wiki/Marmalade)" in outcome.content
    assert "Seville orange" in outcome.content and "Jam" not in outcome.content
    assert "<span" not in outcome.content  # the highlight markup is stripped
    (request,) = wiki.calls("/w/api.php")
    params = parse_qs(urlsplit(request.path).query)
    assert params["list"] == ["search"] and params["srsearch"] == ["bitter orange"]
    assert request.headers["User-Agent"] == USER_AGENT  # Wikipedia asks every client for one


async def test_wikipedia_page_returns_the_text_and_records_the_source(
    wiki: FakeWikipedia, http: httpx.AsyncClient
) -> None:
    box = ToolBox(Wikipedia(http, wiki.url).tools(), result_chars=5000, call_timeout=10)
    call = new_call()
    outcome = await box.call("wikipedia_page", json.dumps({"title": "Orange marmalade"}), call)
    assert outcome.ok, outcome.content
    assert outcome.content.startswith(f"Marmalade\n{wiki.url}/wiki/Marmalade")
    assert MARMALADE in outcome.content
    assert [s.url for s in call.run.sources] == [f"{wiki.url}/wiki/Marmalade"]


async def test_a_missing_wikipedia_page_is_a_tool_error(
    wiki: FakeWikipedia, http: httpx.AsyncClient
) -> None:
    box = ToolBox(Wikipedia(http, wiki.url).tools(), result_chars=5000, call_timeout=10)
    outcome = await box.call("wikipedia_page", json.dumps({"title": "Quince cheese"}), new_call())
    assert not outcome.ok
    assert "no Wikipedia article titled 'Quince cheese'" in outcome.content


async def test_an_unreachable_wikipedia_is_a_tool_error(http: httpx.AsyncClient) -> None:
    box = ToolBox(Wikipedia(http, "http://127.0.0.1:9").tools(), result_chars=5000, call_timeout=10)
    outcome = await box.call("wikipedia_search", json.dumps({"query": "x"}), new_call())
    assert not outcome.ok and "Wikipedia could not be reached" in outcome.content


async def test_web_search_returns_brave_results_as_sources(
    brave: FakeBrave, http: httpx.AsyncClient
) -> None:
    brave.web["marmalade history"] = [
        result(
            "History of marmalade",
            "https://example.org/marmalade",
            "From <strong>Seville</strong>",
            "2 days ago",
        ),
        result("Dundee", "https://example.net/dundee", "Where marmalade was industrialised."),
    ]
    web = WebSearch(http, api_key=brave.token, base_url=brave.url)
    box = ToolBox(web.tools(), result_chars=5000, call_timeout=10)
    call = new_call()
    outcome = await box.call("web_search", json.dumps({"query": "marmalade history"}), call)
    assert outcome.ok, outcome.content
    assert "History of marmalade (2 days ago)" in outcome.content
    assert "From Seville" in outcome.content
    assert [s.url for s in call.run.sources] == [
        "https://example.org/marmalade",
        "https://example.net/dundee",
    ]
    assert brave.queries() == ["marmalade history"]


async def test_web_search_without_a_key_tells_the_model_which_variable_to_set(
    brave: FakeBrave, http: httpx.AsyncClient
) -> None:
    brave.reset()
    box = ToolBox(
        WebSearch(http, api_key="", base_url=brave.url).tools(), result_chars=5000, call_timeout=10
    )
    outcome = await box.call("web_search", json.dumps({"query": "anything"}), new_call())
    assert not outcome.ok
    assert "not configured" in outcome.content and "BRAVE_SEARCH_API_KEY" in outcome.content
    assert brave.requests == []  # nothing was sent without a key
