from contracts import WORKER_DESCRIPTIONS, RequestRouted
from services.runtime.llm.prompts import context_block, conversation
from services.runtime.llm.types import Messages

SYSTEM = """You are Sidekick's orchestrator. Choose the one worker that should do the user's \
request, write a self-contained task description, give the worker its named parameters (for \
example query for search; to, subject and body notes for email), and state success criteria the \
result will be judged against. Choose NONE, with the reason as the task description, only for \
requests that must not or cannot be done.

Workers:
{workers}"""


def system_prompt(kinds: list[str]) -> str:
    lines = [f"- {k}: {WORKER_DESCRIPTIONS[k]}" for k in [*kinds, "NONE"]]
    return SYSTEM.format(workers="\n".join(lines))


def request_text(message: str, reason: str, criteria: str | None) -> str:
    text = f"User request:\n{message}\n\nWhy it was routed: {reason}"
    if criteria:
        text += f"\n\nThe user's success criteria (use them as given):\n{criteria}"
    return text


def decision_messages(req: RequestRouted, kinds: list[str]) -> Messages:
    """The decision's call: the system prompt, the session's recent turns, the request."""
    text = request_text(req.message, req.reason, req.success_criteria) + context_block(req.context)
    return conversation(system_prompt(kinds), req.history, text)
