"""What one model endpoint supports, found with tiny requests (for `sidekick doctor`).

Per endpoint: `GET /models` (does it answer, is the key accepted, is the model listed), then,
unless told not to, four tiny chat calls (a streamed "OK", and `{"ok": true}` asked as
json_schema, as a forced tool call and as json_object), or one embedding for the embeddings
role. No retries: a doctor reports what it sees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import openai
from pydantic import BaseModel, Field, ValidationError

from services.runtime.base.errors import MODEL_EXAMPLE, MODEL_VARIABLES
from services.runtime.base.settings import STRUCTURED_MODES, LLMConfig
from services.runtime.llm import schema as schemas
from services.runtime.llm.modes import refuses, with_instruction

ASK: list[Any] = [{"role": "user", "content": "Reply with the single word OK."}]
CHAT = ("streaming", "json_schema", "tools", "json_object")
EMBEDDING = ("embeddings",)


class DoctorProbe(BaseModel):
    """A health check."""

    ok: bool = Field(description="Always true.")


@dataclass
class Cell:
    """One ✓/✗: ok None means not checked (or does not apply)."""

    ok: bool | None = None
    detail: str = ""


@dataclass
class Problem:
    what: str
    fix: str  # the variable to set
    breaks: bool = True  # the configuration needs this to work


@dataclass
class Seen:
    """What the server showed; shared by every role that uses the same endpoint and model."""

    answers: Cell = field(default_factory=Cell)
    key: Cell = field(default_factory=Cell)
    listed: Cell = field(default_factory=Cell)
    capabilities: dict[str, Cell] = field(default_factory=dict)
    calls: int = 0
    usage_reported: bool | None = None  # whether the streamed reply carried usage


# What a report shows of what was seen, under the same names.
SHOWN = ("answers", "key", "listed", "capabilities", "usage_reported")


@dataclass
class ModelReport:
    role: str
    label: str
    base_url: str
    model: str
    answers: Cell
    key: Cell
    listed: Cell
    capabilities: dict[str, Cell]
    mode: str = ""
    problems: list[Problem] = field(default_factory=list)
    usage_reported: bool | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _short(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            status = getattr(exc, "status_code", "")
            return f"{status} {message}".strip()[:160]
    return (str(exc) or type(exc).__name__).splitlines()[0][:160]


class _Prober:
    def __init__(self, config: LLMConfig, timeout: float) -> None:
        self.config = config
        embeddings = config.role == "embeddings"
        self.seen = Seen(capabilities={c: Cell() for c in (EMBEDDING if embeddings else CHAT)})
        self.client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=timeout,
            max_retries=0,
        )

    async def models(self) -> bool:
        """GET /models; False when nothing more can be learned (no answer, key refused)."""
        r = self.seen
        try:
            listed = await self.client.models.list()
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            r.answers, r.key = Cell(True), Cell(False, _short(exc))
            return False
        except openai.APIStatusError as exc:
            # Some servers have no /models (404); they answered, which is what we asked.
            r.answers = Cell(True, f"/models: {_short(exc)}")
            r.listed = Cell(None, "the server does not list its models")
            return True
        except openai.OpenAIError as exc:
            r.answers = Cell(False, _short(exc))
            return False
        r.answers = Cell(True)
        r.key = Cell(True, "" if self.config.api_key else "no key needed")
        ids = [m.id for m in listed.data]
        if not ids:
            r.listed = Cell(None, "the server lists no models")
        elif self.config.model in ids:
            r.listed = Cell(True)
        else:
            r.listed = Cell(False, f"not among the {len(ids)} models the server lists")
        return True

    async def _call(self, capability: str, **extra: Any) -> Any | None:
        """One tiny chat call; None (and the cell filled) when it failed."""
        self.seen.calls += 1
        try:
            extra.setdefault("max_tokens", 64)  # `{"ok": true}` or "OK": a few tokens
            return await self.client.chat.completions.create(
                model=self.config.model, messages=extra.pop("messages", ASK), **extra
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            self.seen.key = Cell(False, _short(exc))
            self.seen.capabilities[capability] = Cell(False, "key refused")
        except openai.APIStatusError as exc:
            lacks = capability != "streaming" and refuses(
                capability,  # type: ignore[arg-type]
                exc.status_code,
                str(exc),
            )
            why = f"refused: {_short(exc)}" if lacks else _short(exc)
            self.seen.capabilities[capability] = Cell(False, why)
        except openai.OpenAIError as exc:
            self.seen.capabilities[capability] = Cell(False, _short(exc))
        return None

    async def streaming(self) -> None:
        stream = await self._call(
            "streaming", stream=True, stream_options={"include_usage": True}, max_tokens=16
        )
        if stream is None:
            return
        got = ""
        try:
            async with stream:
                async for chunk in stream:
                    got += "".join(c.delta.content or "" for c in chunk.choices)
                    if chunk.usage is not None:
                        used = chunk.usage.prompt_tokens or chunk.usage.completion_tokens
                        self.seen.usage_reported = bool(used)
                if self.seen.usage_reported is None and got:
                    self.seen.usage_reported = False
        except openai.OpenAIError as exc:
            self.seen.capabilities["streaming"] = Cell(False, _short(exc))
            return
        ok = bool(got)
        self.seen.capabilities["streaming"] = Cell(ok, "" if ok else "no text streamed")

    def _judge(self, capability: str, text: str) -> None:
        try:
            schemas.parse(DoctorProbe, text)
        except ValidationError:
            self.seen.capabilities[capability] = Cell(False, f"invalid reply: {text[:60]!r}")
            return
        self.seen.capabilities[capability] = Cell(True)

    async def structured(self) -> None:
        resp = await self._call("json_schema", response_format=schemas.response_format(DoctorProbe))
        if resp is not None:
            self._judge("json_schema", resp.choices[0].message.content or "")
        resp = await self._call(
            "tools",
            tools=[schemas.tool_for(DoctorProbe)],
            tool_choice=schemas.tool_choice(DoctorProbe),
        )
        if resp is not None:
            calls = resp.choices[0].message.tool_calls or []
            args = [c.function.arguments for c in calls if getattr(c, "function", None)]
            if args:
                self._judge("tools", args[0])
            else:
                self.seen.capabilities["tools"] = Cell(False, "no tool call in the reply")
        prompted = with_instruction(ASK, schemas.instruction(DoctorProbe))
        resp = await self._call(
            "json_object", messages=prompted, response_format={"type": "json_object"}
        )
        if resp is not None:
            self._judge("json_object", resp.choices[0].message.content or "")

    async def embeddings(self) -> None:
        self.seen.calls += 1
        try:
            await self.client.embeddings.create(model=self.config.model, input=["ok"])
        except openai.OpenAIError as exc:
            self.seen.capabilities["embeddings"] = Cell(False, _short(exc))
            return
        self.seen.capabilities["embeddings"] = Cell(True)


async def measure(config: LLMConfig, *, calls: bool, seconds: float) -> Seen:
    """Ask the server; `calls` False keeps to `GET /models` (no model is run)."""
    p = _Prober(config, seconds)
    if not config.configured:
        p.seen.answers = Cell(False, "no base URL and no key")
        return p.seen
    try:
        if await p.models() and calls:
            if config.role == "embeddings":
                await p.embeddings()
            else:
                await p.streaming()
                await p.structured()
    finally:
        await p.client.close()
    return p.seen


def setting_for(config: LLMConfig, what: str, *, fallback: bool = False) -> str:
    """The variable that sets `what` for this role, and the shared one it falls back to."""
    if fallback and what != "STRUCTURED":
        what = f"FALLBACK_{what}"
    own = config.variable(what)
    if config.role == "embeddings" and what == "MODEL":
        return own  # the embeddings model has no shared default
    return f"{own} (or SIDEKICK_LLM_{what} for every role)"


NO_MODEL = ": no model configured"  # what a role without a model is said to lack


def settings_for_a_model(config: LLMConfig) -> str:
    """What to set when `config`'s role has no model: the words of `no_model_message()`, plus
    the role's own variables."""
    embeddings = config.role == "embeddings"
    names = ("BASE_URL", "API_KEY") if embeddings else ("BASE_URL", "MODEL", "API_KEY")
    own = ", ".join(config.variable(what) for what in names) + f" for {config.role} alone"
    if embeddings:  # SIDEKICK_LLM_MODEL is a chat model; this role's has no shared default
        own += f"; its model is {config.variable('MODEL')} (default {config.model})"
    return f"{MODEL_VARIABLES} before `sidekick up` (or {own}), {MODEL_EXAMPLE}"


def judge(
    config: LLMConfig,
    label: str,
    seen: Seen,
    *,
    needs_streaming: bool,
    needed: bool,
    fallback: bool = False,
) -> ModelReport:
    """What the configuration gets from what was seen, and what to set where it falls short."""
    shown = {name: getattr(seen, name) for name in SHOWN}
    r = ModelReport(
        role=config.role, label=label, base_url=config.where, model=config.model, **shown
    )

    def problem(what: str, name: str) -> None:
        fix = setting_for(config, name, fallback=fallback)
        r.problems.append(Problem(f"{label}: {what}", fix, needed))

    if not config.configured:
        r.problems.append(Problem(f"{label}{NO_MODEL}", settings_for_a_model(config), needed))
        return r
    caps = seen.capabilities
    called = any(c.ok is not None for c in caps.values())
    if seen.answers.ok is False:
        problem(f"no answer at {r.base_url} ({seen.answers.detail})", "BASE_URL")
    elif seen.key.ok is False:
        problem(f"the key was refused ({seen.key.detail})", "API_KEY")
    elif seen.listed.ok is False:
        problem(f"model {config.model} is not served there", "MODEL")
    elif called and not any(c.ok for c in caps.values()):
        first = next(iter(caps.values()))
        problem(f"no request succeeded ({first.detail})", "MODEL")
    elif needs_streaming and caps["streaming"].ok is False:
        problem(f"streaming does not work ({caps['streaming'].detail})", "MODEL")
    if config.role == "embeddings":
        return r
    forced = config.structured
    if forced is not None:
        r.mode = f"{forced} (forced)"
        if forced != "prompt" and caps[forced].ok is False:
            problem(f"the forced mode {forced} does not work here", "STRUCTURED")
    elif not called:
        r.mode = "learned at first use"
    else:
        usable = [m for m in STRUCTURED_MODES[:-1] if caps[m].ok]
        r.mode = usable[0] if usable else "prompt"
    return r
