"""A request's usage and cost where a client sees them, all from the orchestrator's and the
frontline's one accounting (the price table, here set with SIDEKICK_PRICES): the end frame,
the workflows API's state, `/v1`'s metadata and `sidekick eval`. Usage a server did not report
is counted by Sidekick (an estimate), priced the same, and marked as estimated everywhere.
Every fake model call reports 11 tokens in and 7 out, unless told to report none."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient, api, token, wait_status
from tests.support.harness import System, sidekick
from tests.support.systems import Systems

# USD per million tokens (in, out) of each fake role's model.
PRICES = {
    "fake-frontline": (1.0, 2.0),
    "fake-orchestrator": (3.0, 4.0),
    "fake-worker": (5.0, 6.0),
    "fake-evaluator": (7.0, 8.0),
}


def priced(usage: dict[str, Any]) -> float:
    """The usage at PRICES, model by model (what the system's price table must give)."""
    total = 0.0
    for model, used in usage["models"].items():
        given, taken = PRICES[model]
        total += (used["input_tokens"] * given + used["output_tokens"] * taken) / 1_000_000
    return round(total, 6)


@pytest.fixture(scope="module")
def priced_system(systems: Systems, fake_brave: FakeBrave) -> Iterator[System]:
    prices = ";".join(f"{m}={i}:{o}" for m, (i, o) in PRICES.items())
    yield from systems.run(
        workers="GENERAL,RESEARCH", auth=True, brave=fake_brave, SIDEKICK_PRICES=prices
    )


async def test_the_cost_is_in_the_end_frame_the_workflows_state_and_v1(
    priced_system: System,
) -> None:
    async with AuthClient(priced_system.ws_url, "judy", events=True) as judy:
        ended = (await judy.until_end_of(await judy.ack("search the tides"))).end["metadata"]
    assert {"fake-worker", "fake-evaluator"} <= set(ended["usage"]["models"])
    assert ended["cost_usd"] == priced(ended["usage"]) > 0
    assert ended["usage_estimated"] is False and ended["usage"]["counted_calls"] == 0

    async with api(priced_system.http_url, "judy") as http:
        created = await http.post("/api/workflows", json={"text": "research the tides"})
        assert created.status_code == 201, created.text
        state = (await wait_status(http, created.json()["workflow_id"], "completed"))["state"]
        v1 = await http.post(
            "/v1/chat/completions",
            json={"model": "sidekick", "messages": [{"role": "user", "content": "hello"}]},
        )
    # The research pipeline's planner and synthesizer, and the evaluator: 11 + 7 tokens each.
    assert state["usage"]["calls"] == 3 and state["usage"]["input_tokens"] == 33
    assert state["cost_usd"] == priced(state["usage"]) == 0.000327
    assert state["usage_estimated"] is False
    # A direct answer is priced too: the frontline's one call.
    assert v1.status_code == 200, v1.text
    meta = v1.json()["sidekick"]["metadata"]
    assert meta["usage"]["models"] == {
        "fake-frontline": {"input_tokens": 11, "output_tokens": 7, "calls": 1}
    }
    assert meta["cost_usd"] == 0.000025 and meta["usage_estimated"] is False
    assert v1.json()["usage"]["total_tokens"] == 18


async def test_usage_no_server_reported_is_counted_priced_the_same_and_marked_estimated(
    priced_system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.no_usage = True
    async with AuthClient(priced_system.ws_url, "mallory", events=True) as mallory:
        ended = (await mallory.until_end_of(await mallory.ack("search the tides"))).end
    meta = ended["metadata"]
    used = meta["usage"]
    assert used["calls"] >= 3 and used["counted_calls"] == used["calls"]
    assert used["input_tokens"] > 0 and used["output_tokens"] > 0  # counted, not zero
    assert meta["usage_estimated"] is True
    assert meta["cost_usd"] == priced(used) > 0

    async with api(priced_system.http_url, "mallory") as http:
        created = await http.post("/api/workflows", json={"text": "research the tides"})
        state = (await wait_status(http, created.json()["workflow_id"], "completed"))["state"]
    assert state["usage_estimated"] is True
    assert state["usage"]["counted_calls"] == state["usage"]["calls"] == 3
    assert state["cost_usd"] == priced(state["usage"]) > 0


CASES = [
    {"id": "hi", "kind": "direct", "message": "hello", "criteria": "A greeting."},
    {"id": "tides", "kind": "search", "message": "search the tides", "criteria": "Tides."},
]


def sidekick_eval(system: System, cases: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    args = ["--url", system.ws_url, "--token", token("oscar"), "--cases", str(cases)]
    args += ["--modes", "single", "--json", str(out)]
    return sidekick("eval", *args, env={**env, "COLUMNS": "160"}, timeout=180)


def test_eval_reports_each_cases_cost_as_the_system_priced_it_and_marks_estimates(
    priced_system: System, fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    for estimated in (False, True):
        fake_llm.no_usage = estimated
        out = tmp_path / f"run-{estimated}.json"
        done = sidekick_eval(priced_system, cases, out)
        assert done.returncode == 0, done.stderr + done.stdout
        data = json.loads(out.read_text())
        assert data["priced_by"] == "the system (end frames' cost_usd)"
        results = {r["case"]: r for r in data["results"]}
        assert results["hi"]["route"] == "direct" and results["tides"]["status"] == "completed"
        for r in results.values():
            usage = {"models": r["models"]}
            assert r["cost_usd"] == priced(usage) > 0, r  # the end frame's cost, per case
            assert r["usage_estimated"] is estimated
        summary = data["summary"]["single"]
        assert summary["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in results.values()))
        assert summary["estimated"] == (2 if estimated else 0)
        assert "cost per case" in done.stdout
        for r in results.values():  # printed per case, to the millionth of a dollar
            assert f"${r['cost_usd']:.6f}" in done.stdout
        assert ("(estimated)" in done.stdout) is estimated
