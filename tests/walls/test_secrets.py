"""Which secrets each process `sidekick up` starts may hold (services/runtime/walls/secrets.py):
every key a role's settings read reaches that role, and no other role."""

from __future__ import annotations

import os

import pytest

from services.cli.up import SECRETS
from services.runtime.base.settings import ROLES, Settings

environment, is_secret = SECRETS.environment, SECRETS.is_secret

SOURCE = {
    "SIDEKICK_LLM_API_KEY": "shared",
    "SIDEKICK_LLM_FALLBACK_API_KEY": "shared-fallback",
    "SIDEKICK_FRONTLINE_LLM_API_KEY": "f",
    "SIDEKICK_FRONTLINE_LLM_FALLBACK_API_KEY": "f-fallback",
    "SIDEKICK_ORCHESTRATOR_LLM_API_KEY": "o",
    "SIDEKICK_EVALUATOR_LLM_FALLBACK_API_KEY": "e-fallback",
    "SIDEKICK_WORKER_LLM_FALLBACK_API_KEY": "w-fallback",
    "SIDEKICK_EMBEDDINGS_API_KEY": "emb",
    "BRAVE_SEARCH_API_KEY": "brave",
    "SIDEKICK_AUTH_TOKENS": "tokens",
    "SIDEKICK_WORKER_LLM_FALLBACK_BASE_URL": "http://127.0.0.1:11434/v1",
    "SIDEKICK_WORKER_LLM_FALLBACK_MODEL": "llama3.1",
    "SIDEKICK_FRONTLINE_LLM_STRUCTURED": "tools",
}


def test_the_new_model_settings_are_configuration_and_their_keys_secrets() -> None:
    for name in ("FALLBACK_BASE_URL", "FALLBACK_MODEL", "STRUCTURED"):
        assert not is_secret(f"SIDEKICK_WORKER_LLM_{name}")
    assert is_secret("SIDEKICK_WORKER_LLM_FALLBACK_API_KEY")
    assert is_secret("SIDEKICK_LLM_FALLBACK_API_KEY")


def test_each_role_gets_its_own_keys_and_fallback_keys_and_no_other_roles() -> None:
    frontline = environment("frontline", SOURCE)
    assert frontline["SIDEKICK_FRONTLINE_LLM_FALLBACK_API_KEY"] == "f-fallback"
    assert frontline["SIDEKICK_LLM_FALLBACK_API_KEY"] == "shared-fallback"
    assert "SIDEKICK_EVALUATOR_LLM_FALLBACK_API_KEY" not in frontline
    assert "SIDEKICK_EMBEDDINGS_API_KEY" not in frontline
    orchestrator = environment("orchestrator", SOURCE)
    assert orchestrator["SIDEKICK_EMBEDDINGS_API_KEY"] == "emb", "the cache embeds there"
    assert "SIDEKICK_FRONTLINE_LLM_API_KEY" not in orchestrator
    workers = environment("workers", SOURCE)
    assert workers["SIDEKICK_WORKER_LLM_FALLBACK_API_KEY"] == "w-fallback"
    assert workers["SIDEKICK_WORKER_LLM_FALLBACK_MODEL"] == "llama3.1", "configuration passes"
    gateway = environment("gateway", SOURCE)
    assert not any("API_KEY" in k for k in gateway)
    assert gateway["SIDEKICK_FRONTLINE_LLM_STRUCTURED"] == "tools"


def test_what_each_role_reads_from_its_environment_is_what_it_would_read_from_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A role's model settings (keys included) are the same from its filtered environment as
    from the whole one: no key it uses is withheld."""
    holder = {"frontline": "frontline", "orchestrator": "orchestrator", "evaluator": "evaluator"}
    holder |= {"worker": "workers", "embeddings": "orchestrator"}
    for role in ROLES:
        assert settings_from(monkeypatch, environment(holder[role], SOURCE)).llm(role) == (
            settings_from(monkeypatch, SOURCE).llm(role)
        ), role


def settings_from(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    for name in os.environ:
        if name.startswith(("SIDEKICK_", "OPENAI_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()
