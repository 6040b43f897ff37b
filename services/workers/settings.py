"""Settings of the worker kinds that reach outside services (Brave Search, SendGrid, the
freshness check). Keys use the providers' usual variable names; the rest `SIDEKICK_`."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WorkerSettings(BaseSettings):
    """Read once per workers process. An empty key counts as no key."""

    model_config = SettingsConfigDict(env_prefix="SIDEKICK_", extra="ignore", populate_by_name=True)

    brave_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("BRAVE_SEARCH_API_KEY"),
        description="Brave Search subscription token; without it SEARCH and RESEARCH fail.",
    )
    brave_base_url: str = Field(
        default="https://api.search.brave.com", description="Brave Search API base URL."
    )
    brave_timeout: float = Field(default=10.0, gt=0, description="Seconds per search call.")
    brave_count: int = Field(default=5, ge=1, le=20, description="Results per search.")

    research_max_queries: int = Field(
        default=4, ge=1, le=10, description="Searches one research task may run."
    )
    freshness_timeout: float = Field(
        default=5.0, gt=0, description="Seconds a source has to answer the freshness check."
    )

    sendgrid_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SENDGRID_API_KEY"),
        description="SendGrid API key; without it mail goes to the local outbox, not sent.",
    )
    sendgrid_from_email: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SENDGRID_FROM_EMAIL"),
        description="Verified sender address for SendGrid.",
    )
    sendgrid_base_url: str = Field(
        default="https://api.sendgrid.com", description="SendGrid API base URL."
    )
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
