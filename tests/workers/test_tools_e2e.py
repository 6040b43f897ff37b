"""The TOOLS worker end to end through the gateway's WebSocket: the five services as processes,
a scripted model that calls tools, real headless Chromium on a local site, and Wikipedia and
Pushover played by local fakes."""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.workers.tools.worker import SYSTEM
from tests.support.dirs import searchable_root
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.fakes.pushover import FakePushover
from tests.support.fakes.site import FakeSite
from tests.support.fakes.wikipedia import FakeWikipedia
from tests.support.harness import ROOT, Client, System
from tests.support.scripts import decide_tools, last_user, tool_results
from tests.support.systems import Systems
from tests.support.waits import wait_for

MODEL = "fake-tools-e2e"
MAX_STEPS = 4
SCREENSHOTS = ROOT / "tests" / "artifacts" / "tools-e2e"


QUOTA_MB = 16


files = searchable_root()


@pytest.fixture(scope="module")
def tools_system(
    systems: Systems, files: Path, wiki: FakeWikipedia, pushover: FakePushover, site: FakeSite
) -> Iterator[System]:
    yield from systems.run(
        tools=MODEL,
        keyless=True,
        pushover=pushover,
        # The tools themselves are tested here; the policy's asking (notify asks by default) in
        # tests/approvals/test_tools.py.
        approvals="notify=allow",
        SIDEKICK_TOOLS_MAX_STEPS=str(MAX_STEPS),
        SIDEKICK_FILES_ROOT=str(files),
        SIDEKICK_FILES_QUOTA_MB=str(QUOTA_MB),
        # The local site is operator-trusted here; nothing else on loopback is.
        SIDEKICK_EGRESS_ALLOW=site.host_port,
        SIDEKICK_BROWSER_SCREENSHOT_DIR=str(SCREENSHOTS),
        SIDEKICK_WIKIPEDIA_BASE_URL=wiki.url,
    )


async def test_the_model_browses_a_page_in_real_chromium_and_answers_with_what_it_says(
    tools_system: System, fake_llm: FakeOpenAI, site: FakeSite
) -> None:
    secret = uuid.uuid4().hex[:10]
    # Only a browser that runs the page's script sees the sentence: the HTML holds it reversed.
    sentence = f"The secret word is {secret}."
    url = site.page(
        f"/secret-{secret}",
        "<!doctype html><html><head><title>Secret page</title></head><body><p id=s></p>"
        f"<script>document.getElementById('s').textContent = "
        f"{sentence[::-1]!r}.split('').reverse().join('');</script></body></html>",
    )

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            address = re.search(r"http://127\.0\.0\.1:\d+/\S+", last_user(body))
            assert address is not None
            return Reply(tool_calls=[tool_call("browser_navigate", {"url": address.group(0)})])
        if len(results) == 1:
            return Reply(tool_calls=[tool_call("browser_text", {})])
        said = next(line for line in results[-1]["content"].splitlines() if "secret word" in line)
        return Reply(f"The page says: {said}")

    ask = f"Please browse {url} and tell me what it says"
    fake_llm.script("fake-orchestrator", decide_tools(ask))
    fake_llm.script(MODEL, model)
    convo = await tools_system.ask(ask)
    assert convo.errors == []
    assert convo.answer == f"The page says: {sentence}"
    assert convo.end["status"] == "completed"
    assert convo.end["metadata"]["worker_type"] == "TOOLS"
    assert [s["url"] for s in convo.end["metadata"]["sources"]] == [url]
    assert f"/secret-{secret}" in site.hits
    calls = fake_llm.chat_calls(MODEL)
    assert len(calls) == 3
    # Fetched text travels as tool results, never in the system prompt.
    for call in calls:
        assert call["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sentence in tool_results(calls[-1])[-1]["content"]
    shot = SCREENSHOTS / f"{convo.end['request_id']}-01.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_the_model_reads_wikipedia_through_the_tools(
    tools_system: System, fake_llm: FakeOpenAI, wiki: FakeWikipedia
) -> None:
    fact = f"Quince cheese was first recorded in batch {uuid.uuid4().hex[:6]}."
    wiki.article("Quince cheese", f"Quince cheese is a sweet paste. {fact}")

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call("wikipedia_search", {"query": "quince cheese"})])
        if len(results) == 1:
            title = re.search(r"^- (.+?) \(http", results[0]["content"], re.M)
            assert title is not None
            return Reply(tool_calls=[tool_call("wikipedia_page", {"title": title.group(1)})])
        return Reply("Wikipedia: " + results[-1]["content"].split(". ", 1)[1])

    fake_llm.script("fake-orchestrator", decide_tools("Look up quince cheese on Wikipedia"))
    fake_llm.script(MODEL, model)
    convo = await tools_system.ask("Please search Wikipedia for quince cheese")
    assert convo.answer == f"Wikipedia: {fact}"
    assert [s["url"] for s in convo.end["metadata"]["sources"]] == [
        f"{wiki.url}/wiki/Quince_cheese"
    ]


async def test_a_model_that_never_answers_is_stopped_at_the_step_limit_and_the_user_is_told(
    tools_system: System, fake_llm: FakeOpenAI
) -> None:
    def model(body: dict[str, Any]) -> Reply:
        return Reply(tool_calls=[tool_call("files_list", {})])

    fake_llm.script("fake-orchestrator", decide_tools("List my files"))
    fake_llm.script(MODEL, model)
    convo = await tools_system.ask("Please route this: list my files forever")
    assert convo.end["status"] == "failed"
    error = convo.only_error("worker_failed")
    assert f"stopped after {MAX_STEPS} model turns" in error
    assert "without a final answer" in error
    assert len(fake_llm.chat_calls(MODEL)) == MAX_STEPS
    assert fake_llm.chat_calls("fake-evaluator") == []  # nothing was passed off as an answer


async def test_a_notification_in_a_task_delivered_twice_is_pushed_once(
    tools_system: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    release = threading.Event()
    first_run = {"held": False}
    message = f"Your report {uuid.uuid4().hex[:6]} is ready"

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:  # the same call id on every delivery, as a replayed task has
            return Reply(tool_calls=[tool_call("notify", {"message": message}, "call_notify_1")])
        if not first_run["held"]:
            first_run["held"] = True  # the worker is killed while it waits for this reply
            return Reply("never delivered", wait=release)
        return Reply(f"Notify said: {results[-1]['content']}")

    fake_llm.script("fake-orchestrator", decide_tools("Send me a notification"))
    fake_llm.script(MODEL, model)
    async with Client(tools_system.ws_url, events=True) as client:
        await client.send({"uuid": client.uuid, "message": "Please route: notify me"})
        await wait_for(lambda: first_run["held"] and len(pushover.messages) == 1, 60)
        tools_system.kill("workers")
        release.set()
        await asyncio.to_thread(tools_system.restart, "workers")
        convo = await client.until_end(timeout=120)
    assert convo.end["status"] == "completed"
    assert [m["message"] for m in pushover.messages] == [message]
    assert convo.answer.startswith("Notify said: Notification already sent for this call")
    results = [r["content"] for c in fake_llm.chat_calls(MODEL) for r in tool_results(c)]
    assert results[0].startswith("Notification sent (Pushover request")
    assert results[-1].startswith("Notification already sent for this call")


ATTACK = """
import os, socket, time
marker = {marker!r}
for folder in ('/tmp', '/var/tmp', '/dev/shm'):
    open(os.path.join(folder, marker), 'w').write('x')
for path in ('/proc/{gateway}/cmdline', '/proc/{gateway}/environ', '/etc/passwd'):
    try:
        print('READ', path, open(path, 'rb').read()[:60])
    except OSError as exc:
        print('REFUSED', path, type(exc).__name__)
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=3)
    print('CONNECTED gateway')
except OSError as exc:
    print('REFUSED gateway', type(exc).__name__)
print('PIDS', len([p for p in os.listdir('/proc') if p.isdigit()]))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for i in range(600):
            open('beacon.txt', 'a').write('.')
            time.sleep(0.05)
    os._exit(0)
os.symlink('/etc/passwd', 'door')
time.sleep(0.3)
"""


async def test_hostile_code_sent_through_the_websocket_stays_in_its_sandbox(
    tools_system: System, fake_llm: FakeOpenAI
) -> None:
    marker = f"sidekick-escape-{uuid.uuid4().hex[:8]}"
    code = ATTACK.format(
        marker=marker, gateway=tools_system.procs["gateway"].pid, port=tools_system.gateway_port
    )

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call("python_run", {"code": code}, "call_py")])
        if len(results) == 1:
            return Reply(tool_calls=[tool_call("files_read", {"path": "door"}, "call_fr")])
        return Reply("\n=====\n".join(r["content"] for r in results))

    fake_llm.script("fake-orchestrator", decide_tools("Run my program"))
    fake_llm.script(MODEL, model)
    convo = await tools_system.ask("Please route this: run my program")
    ran, read = convo.text.split("\n=====\n")
    assert "exit status: 0" in ran, ran
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not (Path(folder) / marker).exists()
    assert ran.count("REFUSED") == 4 and "READ" not in ran and "CONNECTED" not in ran, ran
    pids = int(ran.split("PIDS ", 1)[1].split()[0])
    assert pids < 10, ran
    assert read.startswith("ERROR: Refused path 'door'") and "root:" not in read, read
    # The daemon died with its run: the beacon it kept writing stops growing.
    files = Path(tools_system.env["SIDEKICK_FILES_ROOT"])
    (beacon,) = files.glob("*/beacon.txt")
    size = beacon.stat().st_size
    await asyncio.sleep(1.0)
    assert beacon.stat().st_size == size


async def test_code_sent_through_the_websocket_cannot_fill_the_disk(
    tools_system: System, fake_llm: FakeOpenAI
) -> None:
    # 200 files of 1 MiB, about 50 MiB/s: 200 MiB and "done" if nothing stopped it.
    code = (
        "import time\n"
        "for i in range(200):\n"
        "    with open(f'fill{i}', 'wb') as f: f.write(b'x' * (1 << 20))\n"
        "    time.sleep(0.02)\n"
        "print('done')\n"
    )

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call("python_run", {"code": code}, "call_fill")])
        return Reply(results[0]["content"])

    fake_llm.script("fake-orchestrator", decide_tools("Fill the disk"))
    fake_llm.script(MODEL, model)
    convo = await tools_system.ask("Please route this: fill the disk")
    assert f"went past its quota of {QUOTA_MB} MiB" in convo.text, convo.text
    assert "done" not in convo.text.split("--- stdout", 1)[-1], convo.text
    files = Path(tools_system.env["SIDEKICK_FILES_ROOT"])
    sizes = [sum(f.stat().st_blocks * 512 for f in d.rglob("*")) for d in files.iterdir()]
    assert max(sizes) < 3 * QUOTA_MB * 1024 * 1024, sizes
