"""Configuration from the environment (prefix `SIDEKICK_`), shared by every service."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

Role = Literal["frontline", "orchestrator", "worker", "evaluator", "embeddings"]
ROLES: tuple[Role, ...] = ("frontline", "orchestrator", "worker", "evaluator", "embeddings")
# How a structured output is asked for, strongest first (see services/runtime/llm/modes.py).
StructuredMode = Literal["json_schema", "tools", "json_object", "prompt"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("json_schema", "tools", "json_object", "prompt")

DEFAULT_MODEL = "gpt-4o-mini"
# The processes that call a model (the gateway never does): a key every role shares reaches these.
MODEL_CALLERS = ("frontline", "orchestrator", "evaluator", "workers")
# What the banner and the page say when every role runs the tiny local model (--local-model).
LOCAL_MODEL_NOTICE = (
    "This is a tiny demonstration model (SmolLM2-135M, on this machine): its answers will be "
    "poor. For real work point Sidekick at a real model: SIDEKICK_LLM_BASE_URL, "
    "SIDEKICK_LLM_MODEL and SIDEKICK_LLM_API_KEY, without --local-model."
)


def secret(*holders: str, **field: Any) -> Any:
    """A secret setting, and the processes whose role reads it: `sidekick up` gives it to those
    only (services/runtime/walls/secrets.py lists every secret from these marks). None by
    default."""
    return Field(default=None, json_schema_extra={"secret_of": list(holders)}, **field)


def variables_of(cls: type[BaseSettings]) -> dict[str, list[str]]:
    """Each field of a settings class and the variables it is read from (a provider's own name,
    or the prefixed one)."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    found: dict[str, list[str]] = {}
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        found[name] = (
            [str(c) for c in getattr(alias, "choices", [alias])]
            if alias
            else [f"{prefix}{name}".upper()]
        )
    return found


def secrets_of(cls: type[BaseSettings]) -> dict[str, tuple[str, ...]]:
    """Each variable of a secret field of `cls`, and the processes that may hold it."""
    found: dict[str, tuple[str, ...]] = {}
    for name, variables in variables_of(cls).items():
        extra = cls.model_fields[name].json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("secret_of"), list):
            holders = tuple(str(h) for h in extra["secret_of"])  # type: ignore[union-attr]
            found.update(dict.fromkeys(variables, holders))
    return found


@dataclass(frozen=True)
class LLMConfig:
    """Where one role's model calls go. `configured` is False when nothing was set.

    `structured` forces a structured-output mode (None: learn the strongest the server takes);
    `fallback` is the endpoint tried when this one fails after its retries."""

    role: str
    base_url: str | None
    api_key: str | None
    model: str
    structured: StructuredMode | None = None
    fallback: LLMConfig | None = None
    # Reply limits sent as `max_tokens` (0: none sent): short replies (routing, decisions,
    # verdicts, plans) and answers (llm/client.py picks by call).
    max_tokens_short: int = 0
    max_tokens_answer: int = 0
    # Every call streamed, so a timed-out call stops the server (llm/endpoint.py).
    stream_calls: bool = False

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.api_key)

    @property
    def where(self) -> str:
        return self.base_url or "the default OpenAI endpoint"

    def variable(self, what: str) -> str:
        """The environment variable that sets `what` (BASE_URL, API_KEY, MODEL, ...) here."""
        if self.role == "embeddings":
            return f"SIDEKICK_EMBEDDINGS_{what}"
        return f"SIDEKICK_{self.role.upper()}_LLM_{what}"


class Settings(BaseSettings):
    """Every knob, read once at start-up. See docs/configuration.md."""

    model_config = SettingsConfigDict(env_prefix="SIDEKICK_", extra="ignore")

    nats_url: str = Field(
        default="nats://127.0.0.1:4222",
        description="NATS server URL, or a comma-separated list of a cluster's servers.",
    )
    nats_lost_exit_after: float = Field(
        default=60.0,
        ge=0,
        description="Exit when NATS is gone (or hung) this many seconds; 0 = never.",
    )
    # A server that hangs (stopped, its host frozen) keeps its connections open: only pings
    # that go unanswered tell, after (max_outstanding_pings + 1) intervals; nats-py's own
    # defaults (120 s, 2) took 6 minutes, the whole system waiting on that one node.
    nats_ping_interval: float = Field(
        default=2.0, gt=0, description="Seconds between a connection's pings to its server."
    )
    nats_max_outstanding_pings: int = Field(
        default=3,
        ge=1,
        description="Pings unanswered before the server counts as hung and another is used.",
    )
    namespace: str = Field(default="sidekick", pattern=r"^[a-z][a-z0-9_]*$")
    data_dir: Path = Field(default=Path(".sidekick"), description="Local state for `up`.")

    llm_base_url: str | None = None
    llm_api_key: str | None = secret(*MODEL_CALLERS)
    llm_model: str | None = None
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL")
    )
    openai_api_key: str | None = secret(
        *MODEL_CALLERS, validation_alias=AliasChoices("OPENAI_API_KEY")
    )
    frontline_llm_base_url: str | None = None
    frontline_llm_api_key: str | None = secret("frontline")
    frontline_llm_model: str | None = None
    orchestrator_llm_base_url: str | None = None
    orchestrator_llm_api_key: str | None = secret("orchestrator")
    orchestrator_llm_model: str | None = None
    worker_llm_base_url: str | None = None
    worker_llm_api_key: str | None = secret("workers")
    worker_llm_model: str | None = None
    evaluator_llm_base_url: str | None = None
    evaluator_llm_api_key: str | None = secret("evaluator")
    evaluator_llm_model: str | None = None
    embeddings_base_url: str | None = None
    embeddings_api_key: str | None = secret("orchestrator")  # the semantic cache embeds there
    embeddings_model: str | None = None

    # Structured-output mode per role (None: probe), then for every role.
    llm_structured: StructuredMode | None = None
    frontline_llm_structured: StructuredMode | None = None
    orchestrator_llm_structured: StructuredMode | None = None
    worker_llm_structured: StructuredMode | None = None
    evaluator_llm_structured: StructuredMode | None = None
    # A second endpoint per role, used when the first fails after its retries. Its key is never
    # the primary's (that would hand one provider's key to another) unless it is the same URL.
    llm_fallback_base_url: str | None = None
    llm_fallback_api_key: str | None = secret(*MODEL_CALLERS)
    llm_fallback_model: str | None = None
    frontline_llm_fallback_base_url: str | None = None
    frontline_llm_fallback_api_key: str | None = secret("frontline")
    frontline_llm_fallback_model: str | None = None
    orchestrator_llm_fallback_base_url: str | None = None
    orchestrator_llm_fallback_api_key: str | None = secret("orchestrator")
    orchestrator_llm_fallback_model: str | None = None
    worker_llm_fallback_base_url: str | None = None
    worker_llm_fallback_api_key: str | None = secret("workers")
    worker_llm_fallback_model: str | None = None
    evaluator_llm_fallback_base_url: str | None = None
    evaluator_llm_fallback_api_key: str | None = secret("evaluator")
    evaluator_llm_fallback_model: str | None = None

    llm_timeout: float = Field(default=60.0, gt=0, description="Seconds per model call.")
    llm_max_retries: int = Field(default=3, ge=0, description="Retries on 429/5xx/timeout.")
    llm_max_tokens_short: int = Field(
        default=1024,
        ge=0,
        description="max_tokens of routing, decisions, verdicts, plans (0: none).",
    )
    llm_max_tokens_answer: int = Field(
        default=4096, ge=0, description="max_tokens of answers and reports (0: none)."
    )
    llm_stream_calls: bool = Field(
        default=False,
        description="Stream every model call (a timed-out one then stops the server).",
    )
    local_model: bool = Field(default=False, description="Set by `--local-model`: the tiny model.")

    max_attempts: int = Field(default=3, ge=1, le=10)
    cache_enabled: bool = Field(default=True, description="Use the semantic cache at all.")
    cache_threshold: float = Field(default=0.95, gt=0, le=1, description="Cosine similarity.")
    clarification_timeout: float = Field(
        default=24 * 3600, gt=0, description="Seconds a parked request waits for answers."
    )
    budget_request_tokens: int = Field(
        default=2_000_000, gt=0, description="Model tokens (in + out) one request may use."
    )
    budget_request_calls: int = Field(default=200, gt=0, description="Model calls per request.")
    budget_request_usd: float = Field(default=5.0, gt=0, description="USD one request may cost.")
    budget_request_seconds: float = Field(
        default=3600, gt=0, description="Wall seconds before a request stops at its best answer."
    )
    budget_daily_tokens: int = Field(
        default=50_000_000, gt=0, description="Model tokens one principal may use per UTC day."
    )
    budget_daily_usd: float = Field(
        default=100.0, gt=0, description="USD one principal may spend per UTC day."
    )
    budget_session_tokens: int = Field(
        default=20_000_000, gt=0, description="Model tokens one session may use."
    )
    budget_session_usd: float = Field(default=40.0, gt=0, description="USD one session may cost.")
    budget_request_tool_calls: int = Field(
        default=500, gt=0, description="Tool calls one request may make (TOOLS worker)."
    )
    budget_step_tokens: int = Field(
        default=500_000,
        gt=0,
        description="Tokens held for one attempt of a worker that loops (TOOLS, RESEARCH).",
    )
    budget_lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a process's lease of a day or a session lasts unless renewed.",
    )
    budget_flush_seconds: float = Field(
        default=2.0,
        gt=0,
        description="Seconds between a leasing process's batched counts of a day.",
    )
    budget_admission_seconds: float = Field(
        default=1.0,
        ge=0,
        description="Seconds the gateway reuses a busy principal's day and session (0: never).",
    )
    prices: str = Field(
        default="", description="Price overrides, 'model=input:output' USD per million tokens."
    )
    approval_timeout: float = Field(
        default=3600, gt=0, description="Seconds an action waits for approval, then declined."
    )
    approvers: str = Field(
        default="",
        description="Operator principals (comma-separated) who may decide any approval.",
    )
    sweep_interval: float = Field(default=15.0, gt=0, description="Parked-request check, s.")
    workers: str = Field(
        default="GENERAL,SEARCH,RESEARCH,EMAIL,TOOLS",
        description="Worker kinds the orchestrator may choose (comma-separated).",
    )
    history_turns: int = Field(default=4, ge=0, description="Turns of history the agents see.")

    stream_replicas: int = Field(
        default=1, ge=1, le=5, description="Replicas of every stream and bucket (3 on a cluster)."
    )
    # Short, so that a message held by a dead process is redelivered in seconds; handlers that
    # work longer keep theirs with in-progress acks every `heartbeat_interval` (at most 1.5
    # intervals apart: services/runtime/bus/consumer.py).
    ack_wait: float = Field(default=8.0, gt=0, description="JetStream ack wait, seconds.")
    heartbeat_interval: float = Field(default=2.0, gt=0, description="in-progress every N s.")
    max_deliver: int = Field(default=5, ge=2)
    max_concurrency: int = Field(default=64, ge=1, description="Messages handled at once.")

    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8080
    max_frame_bytes: int = Field(default=64 * 1024, ge=256)
    # Gateway security and limits (see docs/security.md).
    auth_tokens: SecretStr | None = secret(
        "gateway", description="Bearer tokens as 'token:principal,token2:principal2'."
    )
    auth_tokens_file: Path | None = secret(
        "gateway", description="A file of 'token:principal' lines (# comments)."
    )
    allow_unauthenticated: bool = Field(
        default=False, description="Allow binding a non-loopback address with auth off."
    )
    rate_limit_per_minute: int = Field(
        default=60, ge=0, description="New requests per principal per minute; 0 = no limit."
    )
    max_concurrent_requests: int = Field(
        default=10, ge=0, description="Requests in flight per principal; 0 = no limit."
    )
    max_message_chars: int = Field(default=20_000, ge=1, description="Longest user message.")
    cors_origins: str = Field(
        default="",
        description="Origins (comma-separated, e.g. http://localhost:5173) whose pages may call "
        "the HTTP API and open /ws from a browser; empty: none (same-origin only).",
    )
    allowed_hosts: str = Field(
        default="",
        description="Names (comma-separated) the gateway answers to besides IP addresses and "
        "localhost, e.g. sidekick.example.com; '*': any (DNS rebinding is then possible).",
    )
    max_connections: int = Field(
        default=10_000, ge=1, description="Open HTTP/WebSocket connections one server holds."
    )
    max_connections_per_client: int = Field(
        default=256, ge=0, description="Connections one client address may hold (0 = no cap)."
    )
    connection_limit_exempt: str = Field(
        default="127.0.0.1,::1",
        description="Addresses the per-client cap does not apply to (this machine, a proxy).",
    )
    http_head_timeout: float = Field(
        default=10.0, gt=0, description="Seconds a client has to send a request's head."
    )
    http_max_head_bytes: int = Field(
        default=32 * 1024, ge=1024, description="Longest request head (line and headers), bytes."
    )
    ws_first_frame_timeout: float = Field(
        default=30.0, gt=0, description="Seconds a new WebSocket has to send its first frame."
    )
    ws_idle_timeout: float = Field(
        default=3600.0, gt=0, description="Seconds a WebSocket may stay without a client frame."
    )
    a2a_push: bool = Field(
        default=True,
        description="A2A push notifications: task updates POSTed to the webhooks clients name.",
    )
    egress_allow: str = Field(
        default="",
        description="host:port entries exempt from the egress check (operator-trusted).",
    )
    ops_host: str = "127.0.0.1"
    ops_port: int = Field(default=0, ge=0, description="Health/metrics port; 0 = any free one.")

    @model_validator(mode="after")
    def _heartbeats_keep_messages(self) -> Settings:
        if self.heartbeat_interval * 1.5 >= self.ack_wait:
            raise ValueError(
                f"SIDEKICK_HEARTBEAT_INTERVAL ({self.heartbeat_interval:g} s) must be under "
                f"two thirds of SIDEKICK_ACK_WAIT ({self.ack_wait:g} s): in-progress acks come "
                "up to 1.5 intervals apart, and a message whose ack wait runs out is delivered "
                "again while it is still being handled"
            )
        return self

    @property
    def operators(self) -> tuple[str, ...]:
        """The principals who may decide any approval (SIDEKICK_APPROVERS)."""
        return tuple(dict.fromkeys(p.strip() for p in self.approvers.split(",") if p.strip()))

    @property
    def worker_kinds(self) -> list[str]:
        return [k.strip().upper() for k in self.workers.split(",") if k.strip()]

    def llm(self, role: Role) -> LLMConfig:
        """Resolve one role's endpoint: role override, then SIDEKICK_LLM_*, then OPENAI_*."""
        if role == "embeddings":
            base = self.embeddings_base_url
            key = self.embeddings_api_key
            model = self.embeddings_model or "text-embedding-3-small"
            structured = None
        else:
            base = getattr(self, f"{role}_llm_base_url")
            key = getattr(self, f"{role}_llm_api_key")
            model = getattr(self, f"{role}_llm_model") or self.llm_model or DEFAULT_MODEL
            structured = getattr(self, f"{role}_llm_structured") or self.llm_structured
        primary = LLMConfig(
            role=role,
            base_url=base or self.llm_base_url or self.openai_base_url,
            api_key=key or self.llm_api_key or self.openai_api_key,
            model=model,
            structured=structured,
            max_tokens_short=self.llm_max_tokens_short,
            max_tokens_answer=self.llm_max_tokens_answer,
            stream_calls=self.llm_stream_calls,
        )
        if role == "embeddings":
            return primary  # another model's vectors would not match the cached ones
        return dataclasses.replace(primary, fallback=self._fallback(role, primary))

    def _fallback(self, role: Role, primary: LLMConfig) -> LLMConfig | None:
        base = getattr(self, f"{role}_llm_fallback_base_url") or self.llm_fallback_base_url
        key = getattr(self, f"{role}_llm_fallback_api_key") or self.llm_fallback_api_key
        model = getattr(self, f"{role}_llm_fallback_model") or self.llm_fallback_model
        if not base and not model:
            return None
        if not base or base == primary.base_url:
            base, key = primary.base_url, key or primary.api_key
        return LLMConfig(
            role=role,
            base_url=base,
            api_key=key,
            model=model or primary.model,
            structured=primary.structured,
            max_tokens_short=primary.max_tokens_short,
            max_tokens_answer=primary.max_tokens_answer,
            stream_calls=primary.stream_calls,
        )
