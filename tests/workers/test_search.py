"""SEARCH in process against the fake Brave API and the fake model: the edges of an honest
search (no results, news that has nothing, rate limits)."""

from __future__ import annotations

import pytest

from services.workers.brave import is_news_query, normalise_url
from services.workers.search import SearchWorker
from services.workers.settings import WorkerSettings
from tests.support.fakes.brave import NEWS, WEB, FakeBrave, result
from tests.support.fakes.http import Response
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.workers_support import task, unconnected_deps


@pytest.fixture(autouse=True)
def _summaries(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-worker", lambda body: "From the results [1].")


def worker(fake_llm: FakeOpenAI, brave: FakeBrave) -> SearchWorker:
    settings = WorkerSettings(brave_api_key=brave.token, brave_base_url=brave.url)
    return SearchWorker(unconnected_deps(fake_llm), settings)


async def test_a_search_with_no_results_is_an_honest_error_and_no_answer_is_written(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.web["zxqv"] = []
    done = await worker(fake_llm, brave).run(task("SEARCH", "Find zxqv", query="zxqv"))
    assert not done.success and not done.retryable
    assert done.error == "Brave Search found no results for 'zxqv'; nothing to answer from."
    assert fake_llm.chat_calls("fake-worker") == []


async def test_a_news_search_with_nothing_falls_back_to_the_web(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.news["latest on quiet topic"] = []
    brave.web["latest on quiet topic"] = [result("Quiet", "https://quiet.example/", "calm")]
    done = await worker(fake_llm, brave).run(task("SEARCH", "News", query="latest on quiet topic"))
    assert done.success and [s.url for s in done.sources] == ["https://quiet.example/"]
    assert brave.queries(NEWS) == brave.queries(WEB) == ["latest on quiet topic"]


async def test_a_brave_rate_limit_is_an_error_a_new_attempt_may_fix(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.failure = Response(429, {"error": "rate limited"}, {"retry-after": "1"})
    done = await worker(fake_llm, brave).run(task("SEARCH", "Find y", query="y"))
    assert not done.success and done.retryable
    assert "HTTP 429" in (done.error or "")


def test_news_like_queries_are_told_apart_from_timeless_ones() -> None:
    assert is_news_query("latest AI news") and is_news_query("bitcoin price")
    assert not is_news_query("how do volcanoes form")


def test_two_spellings_of_one_page_share_a_key() -> None:
    assert normalise_url("HTTPS://Example.org/a/#top") == normalise_url("https://example.org/a")
    assert normalise_url("https://example.org/a?x=1") != normalise_url("https://example.org/a")
