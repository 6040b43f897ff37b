"""The list of secrets `sidekick up` builds every child's environment from
(services/runtime/walls/secrets.py): explicit, from the settings classes' marks and the secrets
read by hand, so a setting is never taken for a secret because of its name; and nats-server's
environment, which holds nothing but what its config reads."""

from __future__ import annotations

import pytest

from services.cli.up import SECRETS
from services.runtime.base.children import SERVICES
from services.runtime.base.settings import Settings, secrets_of, variables_of
from services.runtime.bus.natsauth import Credentials
from services.runtime.bus.natslogin import WHATS, variable
from services.runtime.walls.secrets import (
    NATS_LOGIN_SECRETS,
    NATS_SERVER,
    SecretList,
    nats_server_environment,
)
from services.workers.settings import WorkerSettings
from services.workers.tools.settings import ToolsSettings
from tests.support.code_reads import SETTINGS_CLASSES, env_names, read_variables

pytestmark = pytest.mark.fast

# The finding: settings whose names hold `_TOKENS` were taken for secrets and dropped.
TOKEN_LIMITS = (
    "SIDEKICK_BUDGET_DAILY_TOKENS",
    "SIDEKICK_BUDGET_SESSION_TOKENS",
    "SIDEKICK_BUDGET_REQUEST_TOKENS",
    "SIDEKICK_BUDGET_STEP_TOKENS",
    "SIDEKICK_LLM_MAX_TOKENS_SHORT",
    "SIDEKICK_LLM_MAX_TOKENS_ANSWER",
)


def test_limits_named_tokens_are_settings_every_service_is_given() -> None:
    source = {name: "866" for name in TOKEN_LIMITS}
    for service in SERVICES:
        assert SECRETS.environment(service, source) == source, service
    assert not any(SECRETS.is_secret(name) for name in TOKEN_LIMITS)


def test_every_setting_a_class_reads_that_is_not_marked_secret_reaches_every_service() -> None:
    marked = {n for cls in SETTINGS_CLASSES for n in secrets_of(cls)}
    settings = {n for cls in SETTINGS_CLASSES for n in env_names(cls)} - marked
    settings |= {n for n in read_variables() if not SECRETS.is_secret(n)}
    source = {name: f"value of {name}" for name in settings}
    for service in SERVICES:
        given = SECRETS.environment(service, source)
        assert given == source, sorted(set(source) - set(given))


def test_each_field_that_holds_a_key_is_marked_secret_with_the_roles_that_read_it() -> None:
    """A safety net for a new field: a SecretStr, or a name of a key's usual shape (only a hint
    here, to a reviewer: the mark decides, and `_TOKENS` limits are no keys)."""
    hints = ("API_KEY", "_TOKEN", "PASSWORD", "AUTH_TOKENS", "PUSHOVER_USER")
    for cls in SETTINGS_CLASSES:
        for field, info in cls.model_fields.items():
            for name in variables_of(cls)[field]:
                hinted = any(name.removesuffix("_FILE").endswith(h) for h in hints)
                if hinted or "SecretStr" in str(info.annotation):
                    assert name in secrets_of(cls), f"{name} ({cls.__name__}): mark it secret"
    assert secrets_of(Settings)["SIDEKICK_FRONTLINE_LLM_API_KEY"] == ("frontline",)
    assert secrets_of(Settings)["SIDEKICK_EMBEDDINGS_API_KEY"] == ("orchestrator",)
    assert secrets_of(Settings)["SIDEKICK_AUTH_TOKENS"] == ("gateway",)
    assert set(secrets_of(Settings)["OPENAI_API_KEY"]) == set(SERVICES) - {"gateway"}
    assert secrets_of(WorkerSettings)["BRAVE_SEARCH_API_KEY"] == ("workers",)
    assert secrets_of(ToolsSettings)["PUSHOVER_USER"] == ("workers",)


def test_a_nats_login_secret_reaches_its_own_service_and_the_shared_one_every_service() -> None:
    assert set(NATS_LOGIN_SECRETS) <= set(WHATS)
    source = {variable(what, s): f"{s}-{what}" for s in (*SERVICES, "admin") for what in WHATS}
    source |= {variable(what): f"shared-{what}" for what in WHATS}
    for service in SERVICES:
        given = SECRETS.environment(service, source)
        for what in WHATS:
            assert given[variable(what)] == f"shared-{what}"
            assert given[variable(what, service)] == f"{service}-{what}"
            for other in (*SERVICES, "admin"):
                if other != service:
                    # A user name, a CA or a certificate is no secret; the rest never leaves.
                    secret = what in NATS_LOGIN_SECRETS
                    assert (variable(what, other) in given) is not secret, (service, other, what)


def test_client_and_judge_secrets_and_other_programs_credentials_reach_no_service() -> None:
    source = {
        "SIDEKICK_TOKEN": "chat token",
        "SIDEKICK_JUDGE_LLM_API_KEY": "judge key",
        "SIDEKICK_NATS_PASSWORD_GATEWAY": "a server's",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GITHUB_TOKEN": "gh",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "HTTPS_PROXY": "http://proxy:3128",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/etc/otel/client.key",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer otel",
    }
    plain = {"PATH", "HOME", "HTTPS_PROXY", "OTEL_EXPORTER_OTLP_CLIENT_KEY"}
    for service in SERVICES:
        given = SECRETS.environment(service, source)
        assert set(given) == plain | {"OTEL_EXPORTER_OTLP_HEADERS"}, service


def test_the_list_refuses_a_secret_given_to_no_such_process() -> None:
    from pydantic_settings import BaseSettings

    from services.runtime.base.settings import secret

    class Odd(BaseSettings):
        odd_key: str | None = secret("gatewy")

    with pytest.raises(AssertionError, match="gatewy"):
        SecretList.of((Odd,))


def test_nats_server_gets_the_basics_and_the_passwords_its_config_reads_and_nothing_else() -> None:
    creds = Credentials.generate((*SERVICES, "admin"))
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "OPENAI_API_KEY": "sk-live",
        "BRAVE_SEARCH_API_KEY": "brave",
        "SIDEKICK_AUTH_TOKENS": "t:alice",
        "SIDEKICK_BUDGET_DAILY_TOKENS": "5",
    }
    env = nats_server_environment(source, creds.env())
    assert env == {"PATH": "/usr/bin", "HOME": "/home/me", **creds.env()}
    assert not SECRETS.allowed(NATS_SERVER)
