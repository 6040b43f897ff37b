"""`sidekick doctor` against the tiny local model's real servers: it reads the modes the server
takes, checks embeddings with a real call (the chat server has none: llama.cpp answers 500), and
writes what it learned to the `endpoints` bucket, from which a starting process learns it."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from services.cli.localmodel import CHAT_MODEL, EMBEDDINGS_MODEL
from services.runtime.base.settings import Settings
from services.runtime.bus.natsserver import NatsServer
from services.runtime.hosting import endpoints
from services.runtime.llm.modes import MODES
from tests.support.harness import bootstrap_process, sidekick
from tests.support.realmodel import RealModel

pytestmark = pytest.mark.real_model


def doctor(env: dict[str, str]) -> dict[str, Any]:
    done = sidekick("doctor", "--json", env=env, timeout=240)
    assert done.stdout, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def model(found: dict[str, Any], label: str) -> dict[str, Any]:
    return next(m for m in found["models"] if m["label"] == label)


async def test_doctor_reads_the_real_server_and_shares_what_it_learned(
    real_model: RealModel, nats_server: NatsServer
) -> None:
    local = real_model.local
    namespace = "t" + uuid.uuid4().hex[:10]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env = {
        **base,
        "SIDEKICK_LLM_BASE_URL": local.chat_url,
        "SIDEKICK_LLM_MODEL": CHAT_MODEL,
        "SIDEKICK_NATS_URL": nats_server.url,
        "SIDEKICK_NAMESPACE": namespace,
        "SIDEKICK_WORKERS": "GENERAL",
    }
    made = bootstrap_process(env)
    assert made.returncode == 0, made.stderr

    # Embeddings at the chat server (the shared URL): a real call fails, so it is broken.
    found = doctor(env)
    embeddings = model(found, "embeddings")
    assert embeddings["capabilities"]["embeddings"]["ok"] is False
    assert any(line.startswith("embeddings:") for line in found["broken"]), found["broken"]
    frontline = model(found, "frontline")
    assert frontline["capabilities"]["json_schema"]["ok"] is False
    assert frontline["capabilities"]["tools"]["ok"] is True
    assert frontline["mode"] == "tools" and frontline["usage_reported"] is False

    # At the embeddings instance it works.
    found = doctor(
        {
            **env,
            "SIDEKICK_EMBEDDINGS_BASE_URL": local.embeddings_url,
            "SIDEKICK_EMBEDDINGS_MODEL": EMBEDDINGS_MODEL,
        }
    )
    assert model(found, "embeddings")["capabilities"]["embeddings"]["ok"] is True
    assert next(r for r in found["services"] if r["name"] == "endpoints")["ok"] is True

    # What doctor wrote is what a starting process learns, before any call of its own.
    key = (local.chat_url, CHAT_MODEL)
    nc = NATS()
    await nc.connect(nats_server.url)
    try:
        kv = await nc.jetstream().key_value(Subjects(namespace).bucket("endpoints"))
        facts = await endpoints.read(kv, key)
        assert facts is not None and facts.mode == "tools" and facts.usage_reported is False
        MODES.forget()
        settings = Settings(llm_base_url=local.chat_url, llm_model=CHAT_MODEL)
        await endpoints.share(kv, settings, "test")
        assert MODES.mode(key, None) == "tools"
        assert MODES.facts(key) == ("tools", False)
    finally:
        MODES.listeners.clear()
        MODES.forget()
        await nc.close()
