"""The OpenAI-compatible endpoint's bodies (`/v1/chat/completions`, `/v1/models`), in OpenAI's
own shapes, so the `openai` SDKs and chat front ends talk to Sidekick unchanged. Sidekick's own
information (its request id, progress, verdicts, sources) travels in one added field,
`sidekick`, which OpenAI clients ignore."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_serializer

from contracts import fields
from contracts.base import Model
from contracts.decisions import Question
from contracts.frames import (
    CancelledMetadata,
    ClarificationMetadata,
    CompletedMetadata,
    FailedMetadata,
    ProgressEvent,
)

# The models Sidekick offers: the evaluator loop, or single-shot without it.
MODELS: dict[str, str] = {
    "sidekick": "Sidekick with its evaluator loop: a worker's answer is judged and retried.",
    "sidekick-direct": "Sidekick single-shot: the worker's first answer, without the evaluator.",
}


class Lenient(BaseModel):
    """What OpenAI clients send: many optional parameters Sidekick does not use are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class ContentPart(Lenient):
    type: StrictStr = Field(description="'text' (other kinds, e.g. images, are ignored).")
    text: StrictStr | None = Field(default=None, description="The text of a 'text' part.")


class ChatMessage(Lenient):
    role: StrictStr = Field(description="'system', 'user', 'assistant' (others are ignored).")
    content: StrictStr | list[ContentPart] | None = Field(
        default=None, description="The message: text, or a list of content parts."
    )

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(p.text for p in parts if p.type == "text" and p.text)


class StreamOptions(Lenient):
    include_usage: StrictBool = Field(default=False, description="Send a final usage chunk.")


class ChatCompletionRequest(Lenient):
    model: StrictStr = Field(description="'sidekick' or 'sidekick-direct'.")
    messages: list[ChatMessage] = Field(
        min_length=1, description="The conversation; the last user message is the request."
    )
    stream: StrictBool = Field(default=False, description="Stream the answer as SSE chunks.")
    stream_options: StreamOptions | None = Field(default=None, description="As OpenAI's.")
    user: StrictStr | None = Field(
        default=None, description="Names the conversation (Sidekick's session) across calls."
    )


# Fields every completion (and chunk, and model card) carries as OpenAI's do.
Created = Annotated[int, Field(description="Unix seconds.")]
AskedModel = Annotated[str, Field(description="The model asked for.")]
AlwaysNull = Annotated[str | None, Field(description="Always null.")]
NoLogprobs = Annotated[None, Field(description="Always null.")]


class CompletionUsage(Model):
    prompt_tokens: int = Field(description="Model input tokens, over every model call.")
    completion_tokens: int = Field(description="Model output tokens, over every model call.")
    total_tokens: int = Field(description="Their sum.")


class AssistantMessage(Model):
    role: Literal["assistant"] = Field(description="Always 'assistant'.")
    content: str | None = Field(description="The answer (or Sidekick's question).")
    refusal: AlwaysNull = None


FinishReason = Literal["stop", "length", "content_filter"]


class Choice(Model):
    index: int = Field(description="Always 0.")
    message: AssistantMessage = Field(description="The answer.")
    finish_reason: FinishReason = Field(description="'stop'.")
    logprobs: NoLogprobs = None


class SidekickInfo(Model):
    """Sidekick's own account of the request (an added field; OpenAI clients ignore it)."""

    request_id: fields.RequestId
    session: str = Field(description="The conversation (the `user` field or header, or new).")
    status: Literal[
        "completed", "partial", "failed", "cancelled", "awaiting_clarification", "working"
    ] = Field(description="How it ended, or 'working' on progress chunks.")
    progress: list[ProgressEvent] = Field(
        default_factory=list, description="Its steps: routed, attempts, verdicts."
    )
    questions: list[Question] = Field(
        default_factory=list, description="What Sidekick asks, when it waits for an answer."
    )
    metadata: (
        CompletedMetadata | FailedMetadata | CancelledMetadata | ClarificationMetadata | None
    ) = Field(default=None, description="The end's details (as the WebSocket's end frame).")


class ChatCompletion(Model):
    id: str = Field(description="'chatcmpl-' and the request id.")
    object: Literal["chat.completion"] = Field(description="The object type.")
    created: Created
    model: AskedModel
    choices: list[Choice] = Field(description="One choice.")
    usage: CompletionUsage = Field(description="Token usage over every model call.")
    system_fingerprint: AlwaysNull = None
    sidekick: SidekickInfo = Field(description="Sidekick's account of the request.")


class Delta(Model):
    role: Literal["assistant"] | None = Field(default=None, description="On the first chunk.")
    content: str | None = Field(default=None, description="A piece of the answer.")


class ChunkChoice(Model):
    index: int = Field(description="Always 0.")
    delta: Delta = Field(description="What this chunk adds.")
    finish_reason: FinishReason | None = Field(description="'stop' on the last content chunk.")
    logprobs: NoLogprobs = None

    @field_serializer("delta")
    def _only_what_it_adds(self, delta: Delta) -> dict[str, str]:
        # As OpenAI sends it: `{}`, `{"content": ...}`; never a key set to null.
        return {
            k: v for k, v in (("role", delta.role), ("content", delta.content)) if v is not None
        }


class ChatCompletionChunk(Model):
    id: str = Field(description="The same on every chunk of one completion.")
    object: Literal["chat.completion.chunk"] = Field(description="The object type.")
    created: Created
    model: AskedModel
    choices: list[ChunkChoice] = Field(description="One choice; none on the usage chunk.")
    usage: CompletionUsage | None = Field(
        default=None, description="On the last chunk when stream_options.include_usage is set."
    )
    system_fingerprint: AlwaysNull = None
    sidekick: SidekickInfo | None = Field(
        default=None, description="Progress (on chunks with an empty delta), and the end."
    )

    def sse(self) -> bytes:
        return f"data: {self.model_dump_json(exclude_none=False)}\n\n".encode()


class ModelCard(Model):
    id: str = Field(description="'sidekick' or 'sidekick-direct'.")
    object: Literal["model"] = Field(description="The object type.")
    created: Created
    owned_by: str = Field(description="'sidekick'.")


class ModelList(Model):
    object: Literal["list"] = Field(description="The object type.")
    data: list[ModelCard] = Field(description="The models.")


class OpenAIErrorBody(Model):
    message: str = Field(description="What went wrong.")
    type: str = Field(description="e.g. invalid_request_error, authentication_error.")
    param: str | None = Field(default=None, description="The parameter at fault, if one.")
    code: str | None = Field(default=None, description="Machine-readable reason.")


class OpenAIError(Model):
    error: OpenAIErrorBody = Field(description="The error, as OpenAI's API shapes it.")

    def sse(self) -> bytes:
        return f"data: {self.model_dump_json()}\n\n".encode()


def wire(body: Model) -> dict[str, Any]:
    return body.model_dump(mode="json")
