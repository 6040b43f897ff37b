"""A person's decision on an approval cannot be silenced, attacked with the workers' own NATS
user (as a compromised worker process would): the WORK stream drops a second message with an
id it has seen, on any of its subjects, and the gateway used to pass a decision on under the
plain id `<request>:answered:<revision>` (the revision of the request's record as parked: a
counter of the status bucket, small and guessable). A message the worker stored first under
exactly that id, on a subject of its own, does not keep the decision off the stream: it reaches
the orchestrator as the gateway's message (not by the orchestrator's sweep, which resumes a
request whose decision was recorded but never passed on: a rescue one sweep late, 15 s by
default), and the approved email is sent once."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.js.errors import NotFoundError

from contracts import ClarificationAnswered, Subjects
from services.runtime.bus.core import msg_id
from services.runtime.requests.lifecycle import Requests
from tests.support.approvals import answer, asked_to_email
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import System
from tests.support.natsusers import as_role, publish_as
from tests.support.scripts import EMAIL_BODY


async def test_no_role_can_silence_a_persons_approval(
    asking: System, nc: NATS, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    s = Subjects(asking.namespace)
    requests = Requests(await nc.jetstream().key_value(s.status_bucket), "gateway")
    async with asked_to_email(asking, fake_llm, "alice") as (alice, request_id, _):
        parked = await requests.load(request_id)
        assert parked is not None and parked.value.state == "awaiting_approval", parked
        assert sendgrid.mails == []
        # Stored first under the id the gateway used to pass the decision on with.
        old_key = msg_id(request_id, "answered", parked.revision)
        async with as_role(asking, "workers") as workers:
            await publish_as(workers, s.worker_completed, b'{"stale": true}', old_key)
        done = await answer(alice, request_id, "yes")
    try:
        passed = await nc.jetstream().get_last_msg(s.work_stream, s.request_answered)
    except NotFoundError:
        raise AssertionError("the decision never reached the WORK stream: silenced") from None
    decision = ClarificationAnswered.model_validate_json(passed.data or b"")
    assert (decision.request_id, decision.message) == (request_id, "approved"), decision
    assert (passed.headers or {}).get("Nats-Msg-Id") != old_key
    log = asking.log_path("orchestrator").read_text().splitlines()
    rescued = [line for line in log if request_id in line and "not passed on" in line]
    assert rescued == [], "the decision was silenced; the sweep resumed the request"
    assert done[-1].get("status") == "completed", done[-1]
    (mail,) = sendgrid.mails
    assert mail["content"] == [{"type": "text/plain", "value": EMAIL_BODY}]
