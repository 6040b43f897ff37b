"""Settings of the worker kinds that reach outside services (Brave Search, SendGrid, the
freshness check). Keys use the providers' usual variable names; the rest `SIDEKICK_`."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.runtime.base.settings import secret


def provider_key(variable: str, description: str) -> Any:
    """A setting read from the provider's own variable name (no `SIDEKICK_` prefix); none by
    default."""
    return Field(default=None, validation_alias=AliasChoices(variable), description=description)


def provider_secret(variable: str, description: str) -> Any:
    """A provider's key under its own variable name: a secret only the workers hold."""
    return secret("workers", validation_alias=AliasChoices(variable), description=description)


def provider_url(default: str, provider: str) -> Any:
    """Where a provider's API is (a test points it at a local fake)."""
    return Field(default=default, description=f"{provider} API base URL.")


class BraveSettings(BaseSettings):
    """Brave Search: the SEARCH and RESEARCH kinds', and the TOOLS worker's web_search."""

    brave_api_key: str | None = provider_secret(
        "BRAVE_SEARCH_API_KEY",
        "Brave Search subscription token; without it SEARCH and RESEARCH fail, and web_search "
        "is off.",
    )
    brave_base_url: str = provider_url("https://api.search.brave.com", "Brave Search")


class ApprovalSettings(BaseSettings):
    """The operator's approval policy (services/runtime/approvals/policy.py): the EMAIL and TOOLS
    workers' (read with the `SIDEKICK_` prefix of the class that mixes it in)."""

    approval_policy: str | None = Field(
        default=None, description="A JSON file of approval rules (see docs/approvals.md)."
    )
    approvals: str = Field(
        default="",
        description="Approval rules as 'action=decision' pairs separated by ';', ahead of the "
        "file's and the defaults (e.g. 'email.send=allow;notify=ask').",
    )


class WorkerSettings(BraveSettings, ApprovalSettings):
    """Read once per workers process. An empty key counts as no key."""

    model_config = SettingsConfigDict(env_prefix="SIDEKICK_", extra="ignore", populate_by_name=True)

    brave_timeout: float = Field(default=10.0, gt=0, description="Seconds per search call.")
    brave_count: int = Field(default=5, ge=1, le=20, description="Results per search.")

    research_max_queries: int = Field(
        default=4, ge=1, le=10, description="Searches one research task may run."
    )
    freshness_timeout: float = Field(
        default=5.0, gt=0, description="Seconds a source has to answer the freshness check."
    )

    sendgrid_api_key: str | None = provider_secret(
        "SENDGRID_API_KEY", "SendGrid API key; without it mail goes to the local outbox, not sent."
    )
    sendgrid_from_email: str | None = provider_key(
        "SENDGRID_FROM_EMAIL", "Verified sender address for SendGrid."
    )
    sendgrid_base_url: str = provider_url("https://api.sendgrid.com", "SendGrid")
    sendgrid_timeout: float = Field(default=15.0, gt=0, description="Seconds per send.")
    email_allowed_domains: str = Field(
        default="", description="Comma-separated recipient domains allowed; empty = any."
    )

    @property
    def brave_configured(self) -> bool:
        return bool(self.brave_api_key)

    @property
    def sendgrid_configured(self) -> bool:
        return bool(self.sendgrid_api_key)

    @property
    def allowed_domains(self) -> frozenset[str]:
        return frozenset(
            d.strip().lower().lstrip("@")
            for d in self.email_allowed_domains.split(",")
            if d.strip()
        )
