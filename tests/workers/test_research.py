"""RESEARCH in process against the fakes (Brave, the model, a page server on two host names):
the planner -> researcher -> synthesizer -> validator pipeline, and the freshness rule."""

from __future__ import annotations

import json
from typing import Any

import httpx

from contracts import Source, WorkerTask, WorkflowStatus
from services.workers import freshness
from services.workers.research import ResearchWorker
from services.workers.settings import WorkerSettings
from tests.support.fakes.brave import NEWS, WEB, FakeBrave, result
from tests.support.fakes.http import Response
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.pages import PageServer
from tests.support.scripts import by_schema
from tests.support.workers_support import task, unconnected_deps


def worker(
    fake_llm: FakeOpenAI, brave: FakeBrave, allow: str = "", **overrides: Any
) -> ResearchWorker:
    values: dict[str, Any] = {
        "brave_api_key": brave.token,
        "brave_base_url": brave.url,
        "freshness_timeout": 3,
        **overrides,
    }
    settings = WorkerSettings(**values)
    return ResearchWorker(unconnected_deps(fake_llm, allow), settings)


def allow(pages: PageServer) -> str:
    """The page server, under both of its names, is an operator-trusted endpoint here."""
    return f"127.0.0.1:{pages.port},localhost:{pages.port}"


def plan(queries: list[str], *, fresh: bool, **extra: Any) -> dict[str, Any]:
    return {
        "goal": "Find out what changed",
        "steps": ["search", "compare", "summarise"],
        "search_queries": queries,
        "requirements": ["what changed", "when"],
        "freshness_required": fresh,
        "clarification_needed": False,
        "questions": [],
        **extra,
    }


def synthesis(answer: str, citations: list[int]) -> dict[str, Any]:
    return {"answer_markdown": answer, "confidence": "medium", "citations": citations}


def script_research(
    fake_llm: FakeOpenAI, the_plan: dict[str, Any], answer: str, cites: list[int] | None = None
) -> None:
    fake_llm.script(
        "fake-worker",
        by_schema(
            {
                "ResearchPlan": lambda body: the_plan,
                "ResearchSynthesis": lambda body: synthesis(answer, cites or [1, 2]),
            }
        ),
    )


async def test_two_live_sources_on_two_domains_pass_the_freshness_check(
    pages: PageServer,
) -> None:
    sources = [
        Source(title="a", url=pages.url("/live", "127.0.0.1")),
        Source(title="b", url=pages.url("/no-head", "localhost")),
    ]
    async with httpx.AsyncClient() as http:
        report = await freshness.check(http, sources, 3)
    assert report.ok and report.domains == {"127.0.0.1", "localhost"}
    # The page that refuses HEAD was asked again with GET.
    assert ("HEAD", f"localhost:{pages.port}", "/no-head") in pages.hits
    assert ("GET", f"localhost:{pages.port}", "/no-head") in pages.hits


async def test_two_live_sources_on_one_domain_do_not_pass_the_freshness_check(
    pages: PageServer,
) -> None:
    sources = [
        Source(title="a", url=pages.url("/live")),
        Source(title="b", url=pages.url("/no-head")),
    ]
    async with httpx.AsyncClient() as http:
        report = await freshness.check(http, sources, 3)
    assert len(report.live) == 2 and not report.ok


async def test_research_with_two_live_sources_on_two_domains_has_no_freshness_note(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.news["latest rust release news"] = [
        result("Rust 9 released", pages.url("/live", "127.0.0.1"), "Rust 9 is out", "2 hours ago")
    ]
    brave.web["rust release notes"] = [
        result("Release notes", pages.url("/no-head", "localhost"), "What is new in Rust 9"),
        # The same page again, as another query found it: merged once.
        result("Rust 9 released (dup)", pages.url("/live", "127.0.0.1") + "/", "dup"),
    ]
    script_research(
        fake_llm,
        plan(["latest rust release news", "rust release notes"], fresh=True),
        "Rust 9 came out today [1], with new notes [2].",
    )
    done = await worker(fake_llm, brave, allow(pages)).run(
        task("RESEARCH", "What is in the latest Rust release?")
    )
    assert done.success, done.error
    assert freshness.NOTE not in done.output
    assert done.output.startswith("Rust 9 came out today [1], with new notes [2].")
    assert [s.url for s in done.sources] == [
        pages.url("/live", "127.0.0.1"),
        pages.url("/no-head", "localhost"),
    ]
    # The researcher ran the plan's searches: news for the news-like one, web for the other.
    assert brave.queries(NEWS) == ["latest rust release news"]
    assert "rust release notes" in brave.queries(WEB)
    # Fetched text reached the synthesizer as user-role data, never in a system prompt.
    synth = next(
        c for c in fake_llm.chat_calls("fake-worker") if "ResearchSynthesis" in json.dumps(c)
    )
    system = [m["content"] for m in synth["messages"] if m["role"] == "system"]
    user = [m["content"] for m in synth["messages"] if m["role"] == "user"]
    assert not any("What is new in Rust 9" in s for s in system)
    assert any("What is new in Rust 9" in u for u in user)
    assert done.usage.calls == 2


async def test_research_with_one_live_source_ends_with_the_freshness_note(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.web["gpu prices today"] = [
        result("GPU prices", pages.url("/live", "127.0.0.1"), "prices"),
        result("Old GPU prices", pages.url("/gone", "localhost"), "gone"),
    ]
    script_research(fake_llm, plan(["gpu prices today"], fresh=True), "GPUs cost a lot [1][2].")
    done = await worker(fake_llm, brave, allow(pages)).run(
        task("RESEARCH", "What do GPUs cost right now?")
    )
    assert done.success, done.error
    assert done.output.endswith("\n\n" + freshness.NOTE)
    assert done.output.count(freshness.NOTE) == 1


async def test_research_with_no_reachable_source_ends_with_the_freshness_note(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.web["election results"] = [
        result("Gone", pages.url("/gone", "127.0.0.1"), "404"),
        result("Nobody listens here", "http://localhost:9/results", "closed port"),
    ]
    script_research(fake_llm, plan(["election results"], fresh=True), "Counting goes on [1][2].")
    done = await worker(fake_llm, brave, allow(pages)).run(
        task("RESEARCH", "Who is winning the election?")
    )
    assert done.success, done.error
    assert done.output.endswith(freshness.NOTE)


async def test_sources_on_inside_addresses_are_never_probed_and_do_not_count(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    """A search result may name any address; the validator probes none that is not public (the
    page server is on loopback and, here, not an operator-trusted endpoint)."""
    port = pages.port
    inside = [
        f"http://127.0.0.1:{port}/live",
        f"http://localhost:{port}/live",
        f"http://[::1]:{port}/live",
        f"http://[::ffff:127.0.0.1]:{port}/live",
        f"http://2130706433:{port}/live",
        f"http://0x7f.1:{port}/live",
        f"http://0177.0.0.1:{port}/live",
        f"http://127.1:{port}/live",
        f"http://0.0.0.0:{port}/live",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
    ]
    found = [result(f"r{i}", u, "x") for i, u in enumerate(inside)]
    brave.web["exchange rates today"] = brave.news["exchange rates today"] = found
    numbers = list(range(1, 11))  # the validator checks ten sources at most
    cites = "".join(f"[{n}]" for n in numbers)
    script_research(
        fake_llm, plan(["exchange rates today"], fresh=True), f"Rates {cites}.", numbers
    )
    hits_before = len(pages.hits)
    done = await worker(fake_llm, brave).run(task("RESEARCH", "Exchange rates right now?"))
    assert done.success, done.error
    assert done.output.endswith(freshness.NOTE)
    assert len(done.sources) == 10
    assert len(pages.hits) == hits_before  # not one probe reached the page server


async def test_research_that_needs_no_freshness_is_not_checked_or_noted(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.web["history of the printing press"] = [
        result("Printing press", pages.url("/gone"), "Gutenberg, around 1440"),
    ]
    script_research(
        fake_llm, plan(["history of the printing press"], fresh=False), "Gutenberg, c. 1440 [1]."
    )
    hits_before = len(pages.hits)
    done = await worker(fake_llm, brave).run(task("RESEARCH", "Who invented the printing press?"))
    assert done.success and freshness.NOTE not in done.output
    assert len(pages.hits) == hits_before


async def test_a_planner_that_needs_clarification_returns_its_questions_without_searching(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    questions = [
        {"id": "q1", "question": "Which dates are you travelling?"},
        {"id": "q2", "question": "What is your budget?"},
    ]
    fake_llm.script(
        "fake-worker",
        by_schema(
            {
                "ResearchPlan": lambda body: plan(
                    [], fresh=False, clarification_needed=True, questions=questions
                )
            }
        ),
    )
    done = await worker(fake_llm, brave).run(task("RESEARCH", "Plan my trip to Japan"))
    assert done.success
    assert done.clarification_questions == [q["question"] for q in questions]
    assert "Which dates are you travelling?" in done.output
    assert "What is your budget?" in done.output
    assert brave.requests == []


async def test_research_when_every_search_fails_is_an_honest_error(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    brave.failure = Response(503, {"error": "unavailable"})
    script_research(fake_llm, plan(["a", "b"], fresh=False), "should not be written")
    done = await worker(fake_llm, brave).run(task("RESEARCH", "Research a and b"))
    assert not done.success and done.retryable
    assert "Brave Search is unavailable (HTTP 503)" in (done.error or "")
    assert not any("ResearchSynthesis" in json.dumps(c) for c in fake_llm.chat_calls("fake-worker"))


async def test_research_without_a_brave_key_says_so_and_calls_no_model(
    fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    done = await worker(fake_llm, brave, brave_api_key="").run(task("RESEARCH", "Research x"))
    assert not done.success and "BRAVE_SEARCH_API_KEY" in (done.error or "")
    assert fake_llm.chat_calls("fake-worker") == [] and brave.requests == []


async def test_research_shows_each_pipeline_step_in_the_request_status(
    fake_llm: FakeOpenAI, brave: FakeBrave, pages: PageServer
) -> None:
    brave.news["latest chip news"] = [
        result("Chips", pages.url("/live", "127.0.0.1"), "new chips", "1 hour ago")
    ]
    script_research(fake_llm, plan(["latest chip news"], fresh=True), "New chips [1].")
    steps: list[tuple[str, str]] = []

    async def record(task: WorkerTask, status: WorkflowStatus, detail: str) -> None:
        steps.append((task.request_id, status))

    deps = unconnected_deps(fake_llm)
    deps.stage = record
    settings = WorkerSettings(brave_api_key=brave.token, brave_base_url=brave.url)
    done = await ResearchWorker(deps, settings).run(task("RESEARCH", "latest chip news?"))
    assert done.success, done.error
    # The workflow seed's words, in its order: planning first (the planner is a model call).
    assert steps == [
        ("r1", "planning"),
        ("r1", "researching"),
        ("r1", "synthesizing"),
        ("r1", "validating"),
    ]
