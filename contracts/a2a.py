"""The A2A (Agent2Agent, spec 1.0) shapes the gateway speaks over JSON-RPC: the agent card, a
task and its parts, the stream's updates, and the requests' params. JSON names are camelCase
and enums SCREAMING_SNAKE_CASE, as the spec's ProtoJSON mapping has them; optional fields with
no value are left out. Params are read leniently (unknown members ignored, 0.3 spellings such as
`role: "user"` and `{"kind": "text"}` parts accepted), as the spec asks of a server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

TaskState = Literal[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]
TERMINAL_TASK_STATES = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)

# The task an update (or a push config) is about, and its conversation.
TaskId = Annotated[str, Field(description="The task.")]
ContextId = Annotated[str, Field(description="Its conversation.")]


class Wire(BaseModel):
    """An A2A object as sent: camelCase, frozen, closed."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Params(BaseModel):
    """Request params as received: unknown members ignored (forward compatibility)."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, populate_by_name=True)


class Part(Wire):
    text: str | None = Field(default=None, description="Text content.")
    data: Any = Field(default=None, description="Structured content (any JSON value).")
    url: str | None = Field(default=None, description="A file by address.")
    media_type: str | None = Field(default=None, description="The content's media type.")
    filename: str | None = Field(default=None, description="A file's name.")


class Message(Wire):
    message_id: str = Field(description="The message's id.")
    context_id: str | None = Field(default=None, description="Its conversation (session).")
    task_id: str | None = Field(default=None, description="The task it belongs to.")
    role: Literal["ROLE_USER", "ROLE_AGENT"] = Field(description="Who sent it.")
    parts: list[Part] = Field(description="Its content.")


class TaskStatus(Wire):
    state: TaskState = Field(description="Where the task is.")
    message: Message | None = Field(default=None, description="The agent's word on it.")
    timestamp: str | None = Field(default=None, description="When (ISO 8601).")


class Artifact(Wire):
    artifact_id: str = Field(description="The artifact's id within its task.")
    name: str | None = Field(default=None, description="A name for it.")
    description: str | None = Field(default=None, description="What it is.")
    parts: list[Part] = Field(description="Its content.")


class Task(Wire):
    id: str = Field(description="The task (a Sidekick request id).")
    context_id: str = Field(description="Its conversation (the Sidekick session uuid).")
    status: TaskStatus = Field(description="Where it is.")
    artifacts: list[Artifact] | None = Field(default=None, description="The answer, sources.")
    history: list[Message] | None = Field(default=None, description="Its messages.")
    metadata: dict[str, Any] | None = Field(default=None, description="Sidekick's details.")


class TaskStatusUpdateEvent(Wire):
    task_id: TaskId
    context_id: ContextId
    status: TaskStatus = Field(description="Its new status.")


class TaskArtifactUpdateEvent(Wire):
    task_id: TaskId
    context_id: ContextId
    artifact: Artifact = Field(description="The artifact, or a chunk of it.")
    append: bool | None = Field(default=None, description="Append to the artifact so far.")
    last_chunk: bool | None = Field(default=None, description="The artifact's last chunk.")


class StreamResponse(Wire):
    """One event of a stream: exactly one member is set."""

    task: Task | None = Field(default=None, description="The task (first event).")
    message: Message | None = Field(default=None, description="A message.")
    status_update: TaskStatusUpdateEvent | None = Field(default=None, description="A status.")
    artifact_update: TaskArtifactUpdateEvent | None = Field(default=None, description="Output.")


class ListTasksResponse(Wire):
    tasks: list[Task] = Field(description="This page of tasks, newest first.")
    next_page_token: str = Field(description="The next page's cursor; empty on the last page.")
    page_size: int = Field(description="How many tasks this page holds.")
    total_size: int = Field(description="How many tasks match, over all pages.")


class AuthenticationInfo(Wire):
    scheme: str = Field(description="The HTTP scheme of the Authorization header (Bearer).")
    credentials: str | None = Field(default=None, description="What follows the scheme.")


class TaskPushNotificationConfig(Wire):
    """A webhook that gets a task's updates (A2A 1.0; 0.3 nests all but the task id in
    `pushNotificationConfig`, with `authentication.schemes`)."""

    id: str = Field(description="The config's id within its task.")
    task_id: TaskId
    url: str = Field(description="The webhook: each update is POSTed here.")
    token: str | None = Field(
        default=None, description="Echoed in each POST's X-A2A-Notification-Token header."
    )
    authentication: AuthenticationInfo | None = Field(
        default=None,
        description="Sent as the Authorization header; without it the header carries "
        "Sidekick's signed JWT (its keys at /.well-known/jwks.json).",
    )


class ListTaskPushNotificationConfigsResponse(Wire):
    configs: list[TaskPushNotificationConfig] = Field(description="The task's configs.")
    next_page_token: str = Field(default="", description="Empty: every config is on this page.")


class PushConfigRecord(BaseModel):
    """One webhook config as kept in the `push` bucket (key: the task's hash, value: all of
    that task's configs), under the principal that made it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    principal: str = Field(description="Who made it; only they see or change it.")
    config: TaskPushNotificationConfig = Field(description="The config as the client gave it.")
    version: Literal["1.0", "0.3"] = Field(
        description="The protocol it was made in: the POSTs' shape."
    )


class PushConfigs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    configs: list[PushConfigRecord] = Field(default_factory=list, description="A task's configs.")


class AuthenticationIn(Params):
    scheme: str | None = None
    schemes: list[str] | None = None  # 0.3
    credentials: str | None = None


class PushConfigIn(Params):
    """A config as a client sends it: 1.0 flat, or 0.3 nested in `pushNotificationConfig`."""

    id: str | None = Field(default=None, max_length=128)
    url: str = Field(min_length=1, max_length=2048)
    token: str | None = Field(default=None, max_length=1024)
    authentication: AuthenticationIn | None = None


class CreatePushConfigParams(PushConfigIn):
    task_id: str = Field(min_length=1, max_length=128)


class CreatePushConfigParams03(Params):
    task_id: str = Field(min_length=1, max_length=128)
    push_notification_config: PushConfigIn


class PushConfigIdParams(Params):
    """Get and Delete: the task and the config (1.0 `taskId` + `id`; 0.3 `id` is the task and
    `pushNotificationConfigId` the config)."""

    task_id: str | None = Field(default=None, max_length=128)
    id: str | None = Field(default=None, max_length=128)
    push_notification_config_id: str | None = Field(default=None, max_length=128)


class PartIn(Params):
    text: str | None = None
    data: Any = None
    kind: str | None = None  # 0.3
    url: str | None = None
    raw: str | None = None
    file: Any = None  # 0.3


class MessageIn(Params):
    message_id: str = Field(min_length=1, max_length=128)
    context_id: str | None = None
    task_id: str | None = None
    role: str
    parts: list[PartIn] = Field(min_length=1)


class SendConfiguration(Params):
    accepted_output_modes: list[str] | None = None
    task_push_notification_config: PushConfigIn | None = None
    push_notification_config: PushConfigIn | None = None  # 0.3
    history_length: int | None = Field(default=None, ge=0)
    return_immediately: bool | None = None
    blocking: bool | None = None  # 0.3: false means return at once


class SendMessageParams(Params):
    message: MessageIn
    configuration: SendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class TaskIdParams(Params):
    id: str = Field(min_length=1, max_length=128)
    history_length: int | None = Field(default=None, ge=0)


class ListTasksParams(Params):
    context_id: str | None = None
    # TASK_STATE_UNSPECIFIED (proto3's zero value, what a client sends for "not set") is no filter.
    status: TaskState | Literal["TASK_STATE_UNSPECIFIED"] | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    page_token: str | None = None
    history_length: int | None = Field(default=None, ge=0)
    status_timestamp_after: str | None = None
    include_artifacts: bool | None = None

    @field_validator("status_timestamp_after")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        """An ISO 8601 time with its zone (`2026-01-02T03:04:05Z`); a number is not one."""
        if value is None:
            return None
        try:
            when = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError("must be an ISO 8601 time such as 2026-01-02T03:04:05Z") from exc
        if when.tzinfo is None or not value[:4].isdigit():
            raise ValueError("must be an ISO 8601 time with its zone, such as 2026-01-02T03:04:05Z")
        return value

    def after(self) -> datetime | None:
        after = self.status_timestamp_after
        return datetime.fromisoformat(after) if after else None


class AgentInterface(Wire):
    url: str = Field(description="Where to call.")
    protocol_binding: str = Field(description="JSONRPC.")
    protocol_version: str = Field(description="The A2A version spoken there.")


class AgentCapabilities(Wire):
    streaming: bool = Field(description="SendStreamingMessage and SubscribeToTask.")
    push_notifications: bool = Field(description="Task updates POSTed to a client's webhook.")
    extended_agent_card: bool = Field(description="Not offered.")


class AgentSkill(Wire):
    id: str = Field(description="The skill (a worker kind, or direct answers).")
    name: str = Field(description="Its name.")
    description: str = Field(description="What it does.")
    tags: list[str] = Field(description="Keywords.")
    examples: list[str] = Field(description="Things to ask.")


class HttpAuthScheme(Wire):
    scheme: str = Field(description="bearer.")
    description: str = Field(description="Which token.")


class SecurityScheme(Wire):
    http_auth_security_scheme: HttpAuthScheme = Field(description="HTTP bearer.")


class StringList(Wire):
    scopes: list[str] = Field(alias="list", description="Scopes (none).")


class SecurityRequirement(Wire):
    schemes: dict[str, StringList] = Field(description="Scheme name to scopes.")


class AgentCard(Wire):
    name: str = Field(description="The agent.")
    description: str = Field(description="What it does.")
    version: str = Field(description="Its version.")
    supported_interfaces: list[AgentInterface] = Field(description="Where and how to call it.")
    capabilities: AgentCapabilities = Field(description="Optional features.")
    security_schemes: dict[str, SecurityScheme] | None = Field(
        default=None, description="How to authenticate (when the gateway has tokens)."
    )
    security_requirements: list[SecurityRequirement] | None = Field(
        default=None, description="Which scheme every call needs."
    )
    default_input_modes: list[str] = Field(description="Media types it reads.")
    default_output_modes: list[str] = Field(description="Media types it writes.")
    skills: list[AgentSkill] = Field(description="What it can do.")


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 call to `/a2a` (SendMessage, SendStreamingMessage, GetTask, ListTasks,
    CancelTask, SubscribeToTask, or their 0.3 names)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    jsonrpc: Literal["2.0"] = Field(description="The protocol version.")
    id: str | int | None = Field(default=None, description="The call's id, echoed back.")
    method: str = Field(description="The A2A method.")
    params: dict[str, Any] = Field(default_factory=dict, description="The method's params.")


class JsonRpcError(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    code: int = Field(description="-32700..-32600 JSON-RPC's, -32001..-32009 A2A's.")
    message: str = Field(description="What went wrong.")


class JsonRpcResponse(BaseModel):
    """The answer (streaming methods: one per SSE event, each with an `id:` line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    jsonrpc: Literal["2.0"] = Field(description="The protocol version.")
    id: str | int | None = Field(description="The call's id.")
    result: Any = Field(default=None, description="The method's result (A2A 1.0 shapes).")
    error: JsonRpcError | None = Field(default=None, description="Or why it failed.")
