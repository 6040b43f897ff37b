"""With no model configured everything starts, and a message gets a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.natsserver import NatsServer
from tests.support.harness import Client, System


@pytest.fixture(scope="module")
def bare_system(nats_server: NatsServer, logs_dir: Path) -> Iterator[System]:
    sys_ = System(nats_server.url, {}, logs_dir).start_all()
    yield sys_
    sys_.stop()


async def test_a_message_without_a_model_gets_an_error_naming_the_variables(
    bare_system: System,
) -> None:
    async with Client(bare_system.ws_url) as client:
        convo = await client.ask("hello")
    (error,) = convo.errors
    assert error["code"] == "llm_not_configured"
    for variable in ("SIDEKICK_LLM_BASE_URL", "OPENAI_BASE_URL", "SIDEKICK_LLM_API_KEY"):
        assert variable in error["message"]
    assert "SIDEKICK_LLM_BASE_URL" in convo.text  # old clients read it as text
    assert convo.frames[-1] == {"on_chat_model_end": True}
