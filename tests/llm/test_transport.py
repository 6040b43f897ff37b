"""The HTTP under a model call (services/runtime/llm/transport.py): it sends what the `openai`
SDK would send and fails the way the SDK would, against the fake OpenAI server."""

from __future__ import annotations

import openai
import pytest

from services.runtime.base.errors import LLMUnavailable
from services.runtime.base.settings import LLMConfig
from services.runtime.llm import LLMClient
from services.runtime.llm.transport import Target
from services.runtime.llm.types import Messages
from tests.support.fakes.openai_server import FakeOpenAI, Reply

HI: Messages = [{"role": "user", "content": "hi"}]


async def test_a_call_carries_the_sdks_key_organization_and_platform_headers(
    fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-operator")
    fake_llm.api_key = "sk-right"
    config = LLMConfig("frontline", fake_llm.base_url, "sk-right", "fake-frontline")
    done = await LLMClient(config, timeout=10, max_retries=0).complete(HI)
    assert done.text
    (call,) = fake_llm.calls("/v1/chat/completions")
    headers = {k.lower(): v for k, v in call.headers.items()}
    assert headers["authorization"] == "Bearer sk-right"
    assert headers["openai-organization"] == "org-operator"
    assert headers["user-agent"].startswith("AsyncOpenAI/Python")
    assert "openai-project" not in headers  # the SDK omits what is not set


async def test_a_wrong_key_is_the_sdks_authentication_error_and_not_retried(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.api_key = "sk-right"
    config = LLMConfig("frontline", fake_llm.base_url, "sk-wrong", "fake-frontline")
    with pytest.raises(LLMUnavailable) as info:
        await LLMClient(config, timeout=10, max_retries=2).complete(HI)
    assert isinstance(info.value.__cause__, openai.AuthenticationError)
    assert "Incorrect API key provided." in str(info.value)
    assert info.value.status == 401 and not info.value.transient
    assert len(fake_llm.calls("/v1/chat/completions")) == 1


async def test_a_server_error_keeps_its_status_body_and_headers(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: Reply(status=503, headers={"x-why": "busy"}))
    with pytest.raises(LLMUnavailable) as info:
        await fake_llm.client(retries=0).complete(HI)
    cause = info.value.__cause__
    assert isinstance(cause, openai.InternalServerError)
    assert cause.status_code == 503 and cause.response.headers["x-why"] == "busy"
    assert info.value.transient


async def test_nothing_listening_is_a_transient_connection_error(fake_llm: FakeOpenAI) -> None:
    gone = fake_llm.client(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(LLMUnavailable) as info:
        await gone.complete(HI)
    assert isinstance(info.value.__cause__, openai.APIConnectionError)
    assert info.value.transient and info.value.status is None


def test_the_proxy_the_environment_names_is_read_once_per_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "models.internal")
    remote = Target.of(openai.AsyncOpenAI(base_url="https://api.example.test/v1", api_key="k"))
    assert str(remote.proxy) == "http://proxy.internal:3128"
    assert remote.proxy_auth is not None and remote.proxy_auth.login == "user"
    local = Target.of(openai.AsyncOpenAI(base_url="https://models.internal/v1", api_key="k"))
    assert local.proxy is None, "NO_PROXY is honoured"
    monkeypatch.delenv("HTTPS_PROXY")
    plain = Target.of(openai.AsyncOpenAI(base_url="https://api.example.test/v1", api_key="k"))
    assert plain.proxy is None
