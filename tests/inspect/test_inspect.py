"""A request's story and its replay, through the public interfaces: `GET
/api/requests/{id}/timeline`, `sidekick inspect` (text and `--json`), `sidekick replay`,
`sidekick eval --from-requests`, on a system of the module's own (its own nats-server, so the
last test can restart it and every service)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, api, token
from tests.support.harness import System, sidekick
from tests.support.scripts import in_turn, script_email, verdict
from tests.support.systems import SEND_FREELY, Systems, restarted

OPERATOR = "trent"
PRICES = (
    "fake-frontline=1:2;fake-orchestrator=1:2;fake-worker=1:2;fake-evaluator=1:2;other-model=5:6"
)


@pytest.fixture(scope="module")
def storied(systems: Systems, own_nats: NatsServer, sendgrid: FakeSendGrid) -> Iterator[System]:
    """Tokens per principal, trent an operator, email sent without asking, prices for every
    fake model (and for `other-model`, a replay's)."""
    yield from systems.run(
        nats_url=own_nats.url,
        auth=True,
        workers="GENERAL,EMAIL",
        sendgrid=sendgrid,
        approvals=SEND_FREELY,
        SIDEKICK_APPROVERS=OPERATOR,
        SIDEKICK_PRICES=PRICES,
    )


def cli(system: System, principal: str, *args: str) -> tuple[int, str]:
    """`sidekick ARGS` as `principal` (its token in $SIDEKICK_TOKEN), against the gateway."""
    env = {**os.environ, "SIDEKICK_TOKEN": token(principal)}
    done = sidekick(*args, "--url", system.http_url, env=env, timeout=180)
    return done.returncode, done.stdout + done.stderr


async def retried_once(system: System, fake_llm: FakeOpenAI, principal: str) -> str:
    """A request whose first attempt fails its evaluation and whose second passes."""
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 40, "Name the moon.", ["Say the moon pulls the sea."]),
        verdict(True, 92, "Good."),
    )
    async with AuthClient(system.ws_url, principal, events=True) as client:
        request_id = await client.ack("search why tides happen")
        done = await client.until_end_of(request_id)
    assert done.end["status"] == "completed", done.frames
    return request_id


async def timeline(system: System, principal: str, request_id: str) -> tuple[int, Any]:
    async with api(system.http_url, principal) as http:
        resp = await http.get(f"/api/requests/{request_id}/timeline")
    return resp.status_code, resp.json()


def steps(body: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(e["step"], e["attempt"]) for e in body["entries"]]


# A `retried_once` request's steps, (step, attempt), up to its second verdict.
RETRIED: list[tuple[str, int | None]] = [
    ("accepted", None),
    ("routed", None),
    ("decided", None),
    ("attempt", 1),
    ("verdict", 1),
    ("attempt", 2),
    ("verdict", 2),
]


async def test_a_retried_request_shows_its_whole_story_in_order_to_its_owner_and_operators(
    storied: System, fake_llm: FakeOpenAI
) -> None:
    request_id = await retried_once(storied, fake_llm, "alice")
    status, body = await timeline(storied, "alice", request_id)
    assert status == 200, body
    assert steps(body) == [*RETRIED, ("ended", None)]
    by = {(e["step"], e["attempt"]): e for e in body["entries"]}
    assert by[("routed", None)]["detail"] == "tools"
    decided = by[("decided", None)]
    assert decided["worker_type"] == "GENERAL"
    assert decided["success_criteria"] == "A clear, correct answer."
    first, second = by[("verdict", 1)], by[("verdict", 2)]
    assert (first["passed"], first["score"], first["feedback"]) == (False, 40, "Name the moon.")
    assert first["suggestions"] == ["Say the moon pulls the sea."]
    assert (second["passed"], second["score"]) == (True, 92)
    # The first verdict's feedback is what the second attempt was given.
    assert by[("attempt", 1)]["feedback_in"] is None
    assert by[("attempt", 2)]["feedback_in"] == "Name the moon."
    assert by[("attempt", 2)]["suggestions_in"] == ["Say the moon pulls the sea."]
    for key in [("attempt", 1), ("verdict", 1), ("attempt", 2), ("verdict", 2)]:
        entry = by[key]
        assert entry["usage"]["calls"] >= 1, entry
        assert entry["cost_usd"] > 0, entry
        assert entry["at"] is not None, entry
    assert "fake-worker" in by[("attempt", 2)]["usage"]["models"]
    times = [e["at"] for e in body["entries"]]
    assert times == sorted(times)
    assert body["cost_usd"] > 0 and body["usage"]["calls"] >= 6
    assert body["route"] == "orchestrated"

    assert (await timeline(storied, "bob", request_id))[0] == 404
    assert (await timeline(storied, "bob", "no-such-request"))[0] == 404
    status, seen = await timeline(storied, OPERATOR, request_id)
    assert status == 200 and steps(seen) == steps(body)


async def test_inspect_prints_the_story_as_text_and_as_json(
    storied: System, fake_llm: FakeOpenAI
) -> None:
    request_id = await retried_once(storied, fake_llm, "carol")
    code, text = await asyncio.to_thread(cli, storied, "carol", "inspect", request_id)
    assert code == 0, text
    order = [
        "ROUTED",
        "DECIDED",
        "attempt 1 with GENERAL",
        "verdict on attempt 1: failed, score 40",
        "feedback: Name the moon.",
        "attempt 2 with GENERAL",
        "feedback carried in: Name the moon.",
        "verdict on attempt 2: passed, score 92",
        "ENDED",
        "total: ",
    ]
    places = [text.index(part) for part in order]
    assert places == sorted(places), text
    assert "$" in text and "tokens" in text

    code, out = await asyncio.to_thread(cli, storied, "carol", "inspect", request_id, "--json")
    assert code == 0, out
    printed = json.loads(out)
    _, body = await timeline(storied, "carol", request_id)
    assert printed == body

    code, refused = await asyncio.to_thread(cli, storied, "dave", "inspect", request_id)
    assert code == 1 and "No request" in refused


async def test_a_replay_from_attempt_2_with_another_model_is_a_new_request(
    storied: System, fake_llm: FakeOpenAI
) -> None:
    request_id = await retried_once(storied, fake_llm, "erin")
    _, before = await timeline(storied, "erin", request_id)
    fake_llm.script("other-model", lambda body: "Another answer: the moon pulls the sea.")
    in_turn(fake_llm, "fake-evaluator", verdict(True, 97, "Better."))
    code, out = await asyncio.to_thread(
        cli, storied, "erin", "replay", request_id, "--from", "attempt:2", "--model", "other-model"
    )
    assert code == 0, out
    assert "original" in out and "replay" in out
    assert "+Another answer: the moon pulls the sea." in out
    new_id = out.split(" as ")[1].split()[0]
    assert new_id.startswith("replay-") and new_id != request_id

    _, again = await timeline(storied, "erin", new_id)
    assert again["state"] == "completed"
    assert again["replay"]["of"] == request_id
    assert steps(again)[: len(RETRIED)] == RETRIED
    by = {(e["step"], e["attempt"]): e for e in again["entries"]}
    assert by[("attempt", 1)]["recorded_from"] == request_id  # taken as recorded
    assert by[("decided", None)]["recorded_from"] == request_id
    live = by[("attempt", 2)]
    assert live["recorded_from"] is None
    assert live["output"] == "Another answer: the moon pulls the sea."
    assert live["feedback_in"] == "Name the moon."  # the recorded verdict, carried in
    assert list(live["usage"]["models"]) == ["other-model"]
    assert by[("verdict", 2)]["score"] == 97
    _, after = await timeline(storied, "erin", request_id)
    assert after == before  # the original's record is unchanged


async def test_a_replayed_email_sends_nothing_and_says_what_it_would_have_sent(
    storied: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(storied.ws_url, "frank", events=True) as client:
        request_id = await client.ack("email Ada that the meeting moved")
        done = await client.until_end_of(request_id)
    assert done.end["status"] == "completed", done.frames
    assert len(sendgrid.mails) == 1
    sendgrid.reset()

    code, out = await asyncio.to_thread(
        cli, storied, "frank", "replay", request_id, "--from", "attempt:1"
    )
    assert code == 0, out
    assert sendgrid.mails == []
    assert "not performed" in out and "ada@example.com" in out and "email.send" in out
    new_id = out.split(" as ")[1].split()[0]
    _, again = await timeline(storied, "frank", new_id)
    assert again["state"] == "completed"
    assert "REPLAY: not performed" in again["final_output"]
    assert "The meeting moved to 10am Friday." in again["final_output"]


async def test_a_request_marked_replay_by_its_id_alone_sends_no_email(
    storied: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    """The attack: a request that carries no replay field but a replay's id (as one whose field
    was lost on the way would). The worker goes by either mark, so nothing is sent."""
    script_email(fake_llm)
    async with AuthClient(storied.ws_url, "grace", events=True) as client:
        request_id = await client.ack(
            "email Ada that the meeting moved", request_id=f"replay-{uuid.uuid4().hex}"
        )
        done = await client.until_end_of(request_id)
    assert done.end["status"] == "completed", done.frames
    assert sendgrid.mails == []
    assert "REPLAY: not performed" in done.text


async def test_a_replay_of_a_step_never_reached_is_refused_with_the_reason(
    storied: System, fake_llm: FakeOpenAI
) -> None:
    request_id = await retried_once(storied, fake_llm, "heidi")
    async with api(storied.http_url, "heidi") as http:
        late = await http.post(f"/api/requests/{request_id}/replay", json={"from": "attempt:7"})
        bad = await http.post(f"/api/requests/{request_id}/replay", json={"from": "somewhere"})
        role = await http.post(
            f"/api/requests/{request_id}/replay", json={"role_models": {"judge": "x"}}
        )
    async with api(storied.http_url, "ivan") as http:
        other = await http.post(f"/api/requests/{request_id}/replay", json={})
    assert late.status_code == 409 and "no attempt 7" in late.json()["error"]["message"]
    assert bad.status_code == 422
    assert role.status_code == 422 and "judge" in role.json()["error"]["message"]
    assert other.status_code == 404


async def test_eval_runs_recorded_requests_as_cases(
    storied: System, fake_llm: FakeOpenAI, tmp_path: Any
) -> None:
    in_turn(fake_llm, "fake-evaluator", *[verdict(False, 10, "Wrong.")] * 3)
    async with AuthClient(storied.ws_url, "judy", events=True) as client:
        request_id = await client.ack("search the height of Everest")
        done = await client.until_end_of(request_id)
    assert done.end["status"] == "partial", done.frames  # the recorded failure
    fake_llm.script("fake-evaluator", lambda body: verdict(True, 90, "Right."))
    out_file, saved = tmp_path / "report.json", tmp_path / "cases.jsonl"
    ws = storied.ws_url
    env = {**os.environ, "SIDEKICK_TOKEN": token("judy")}
    ran = await asyncio.to_thread(
        sidekick,
        "eval",
        "--from-requests",
        request_id,
        "--url",
        ws,
        "--modes",
        "loop",
        "--json",
        str(out_file),
        "--save-cases",
        str(saved),
        env=env,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(out_file.read_text())
    lines = saved.read_text().splitlines()
    assert len(lines) == 1, lines
    case = json.loads(lines[0])
    assert case["message"] == "search the height of Everest"
    assert case["id"] == f"req-{request_id}"
    results = [r for r in report["results"] if r["case"] == case["id"]]
    assert [r["passed"] for r in results] == [True], report

    # The same failure found by age: the caller's requests that failed or ended partial.
    async with api(storied.http_url, "judy") as http:
        listed = (await http.get("/api/requests", params={"failed_since": 3600})).json()
    assert [r["request_id"] for r in listed["requests"]] == [request_id]
    again = await asyncio.to_thread(
        sidekick,
        "eval",
        "--failed-since",
        "1h",
        "--url",
        ws,
        "--modes",
        "loop",
        "--json",
        str(tmp_path / "again.json"),
        env=env,
        timeout=180,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = json.loads((tmp_path / "again.json").read_text())
    assert [r["case"] for r in rerun["results"]] == [case["id"]]


async def test_inspect_and_replay_work_after_every_service_and_nats_restart(
    storied: System, own_nats: NatsServer, fake_llm: FakeOpenAI
) -> None:
    request_id = await retried_once(storied, fake_llm, "mallory")
    _, before = await timeline(storied, "mallory", request_id)
    await restarted(storied, own_nats)
    status, after = await timeline(storied, "mallory", request_id)
    assert status == 200 and after == before
    in_turn(fake_llm, "fake-evaluator", verdict(True, 95, "Fine."))
    code, out = await asyncio.to_thread(
        cli, storied, "mallory", "replay", request_id, "--from", "evaluation:2"
    )
    assert code == 0, out
    new_id = out.split(" as ")[1].split()[0]
    _, again = await timeline(storied, "mallory", new_id)
    assert again["state"] == "completed"
    by = {(e["step"], e["attempt"]): e for e in again["entries"]}
    assert by[("attempt", 2)]["recorded_from"] == request_id
    assert by[("verdict", 2)]["score"] == 95
